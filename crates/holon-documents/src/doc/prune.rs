//! One pass over a document with problems: the parts that failed are cut out, the rest is
//! typed and judged by its kind's rules, and every problem found on the way is reported
//! where it is in the document *as written* (a cut list element shifts the indices after
//! it; pointers are mapped back).
//!
//! A cut is never a repair: a document with any problem is refused. Cutting only lets
//! the rules see the parts that typed correctly, so a mandate with 14 problems reports
//! 14, not 8, then 1, then 5.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// A document's value with failing parts cut out, and the map back to the original.
#[derive(Debug, Clone)]
pub(super) struct Pruned {
    pub value: Value,
    /// Cut or untypable places, as pointers into the original document.
    spoiled: Vec<String>,
    /// Per list (its original pointer), the original indices cut from it.
    removed: BTreeMap<String, BTreeSet<usize>>,
}

/// The reference tokens of a JSON Pointer, still escaped (`""` and `"/"` are the root;
/// elsewhere an empty token is the key `""`).
fn tokens(pointer: &str) -> Vec<&str> {
    if pointer == "/" { Vec::new() } else { pointer.split('/').skip(1).collect() }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Whether one place contains the other (or they are the same): a problem there may be
/// a consequence of the cut rather than a problem of its own.
fn related(a: &str, b: &str) -> bool {
    let (a, b) = (tokens(a), tokens(b));
    let n = a.len().min(b.len());
    a.get(..n) == b.get(..n)
}

impl Pruned {
    pub(super) fn new(value: &Value) -> Pruned {
        Pruned { value: value.clone(), spoiled: Vec::new(), removed: BTreeMap::new() }
    }

    /// Whether `original` lies in, contains or is a place already cut or spoiled.
    pub(super) fn touches(&self, original: &str) -> bool {
        self.spoiled.iter().any(|s| related(s, original))
    }

    /// Marks a place whose problems are already reported (a missing key's object):
    /// nothing found there later is reported again.
    pub(super) fn spoil(&mut self, original: &str) {
        self.spoiled.push(original.to_owned());
    }

    /// The original pointer of a place in the pruned value.
    pub(super) fn original(&self, pruned: &str) -> String {
        let mut out = String::new();
        for token in tokens(pruned) {
            let mapped = match (self.removed.get(&out), token.parse::<usize>()) {
                // The i-th element left in a list is the i-th original index not cut.
                (Some(cut), Ok(i)) => (0..).filter(|j| !cut.contains(j)).nth(i).map(|j| j.to_string()),
                _ => None,
            };
            out.push('/');
            out.push_str(mapped.as_deref().unwrap_or(token));
        }
        out
    }

    /// The place in the pruned value of an original pointer; `None` if it was cut.
    fn pruned(&self, original: &str) -> Option<String> {
        let mut prefix = String::new();
        let mut out = String::new();
        for token in tokens(original) {
            let mapped = match (self.removed.get(&prefix), token.parse::<usize>()) {
                (Some(cut), Ok(j)) if cut.contains(&j) => return None,
                (Some(cut), Ok(j)) => Some((j - cut.range(..j).count()).to_string()),
                _ => None,
            };
            out.push('/');
            out.push_str(mapped.as_deref().unwrap_or(token));
            prefix.push('/');
            prefix.push_str(token);
        }
        Some(out)
    }

    /// Cuts the node at `original` out of the value. False for the root, or a place
    /// not (or no longer) there.
    pub(super) fn cut(&mut self, original: &str) -> bool {
        let Some(at) = self.pruned(original) else { return false };
        let mut path = tokens(&at);
        let Some(last) = path.pop() else { return false };
        let parent_original = {
            let mut t = tokens(original);
            t.pop();
            t.iter().fold(String::new(), |acc, t| acc + "/" + t)
        };
        let mut node = &mut self.value;
        for token in path {
            node = match node {
                Value::Object(map) => match map.get_mut(&unescape(token)) {
                    Some(n) => n,
                    None => return false,
                },
                Value::Array(items) => match token.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                    Some(n) => n,
                    None => return false,
                },
                _ => return false,
            };
        }
        let done = match node {
            Value::Object(map) => map.remove(&unescape(last)).is_some(),
            Value::Array(items) => match last.parse::<usize>() {
                Ok(i) if i < items.len() => {
                    items.remove(i);
                    let original_index = tokens(original).last().and_then(|t| t.parse::<usize>().ok());
                    if let Some(j) = original_index {
                        self.removed.entry(parent_original).or_default().insert(j);
                    }
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if done {
            self.spoiled.push(original.to_owned());
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cut_list_elements_map_back_to_where_they_were_written() {
        let mut p = Pruned::new(&json!({"a": [0, 1, 2, 3, 4], "b": {"x/y": 1}}));
        assert!(p.cut("/a/3") && p.cut("/a/1"));
        assert_eq!(p.value["a"], json!([0, 2, 4]));
        assert_eq!(p.original("/a/2"), "/a/4");
        assert_eq!(p.original("/a/1"), "/a/2");
        assert!(!p.cut("/a/1"), "already cut");
        assert!(p.cut("/a/4"));
        assert_eq!(p.value["a"], json!([0, 2]));
        assert!(p.cut("/b/x~1y"));
        assert_eq!(p.value["b"], json!({}));
        assert!(!p.cut("/") && !p.cut("") && !p.cut("/nowhere/1"));
        assert!(p.touches("/a") && p.touches("/a/1/z") && !p.touches("/c"));
        // The empty key is a key: cutting it leaves its object.
        let mut p = Pruned::new(&json!({"d": {"": 1, "k": 2}}));
        assert!(p.cut("/d/"));
        assert_eq!(p.value, json!({"d": {"k": 2}}));
    }
}
