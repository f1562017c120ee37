//! Interface schemas of a manifest: valid JSON Schema 2020-12, compiled without network
//! access, and the work of validating the examples against them bounded before they are
//! compiled (a hostile schema cannot make validation explode).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::doc::Violation;

/// `uniqueItems: true` compares every pair of items; bound the list.
pub(super) const UNIQUE_ITEMS_MAX: u64 = 1000;
/// Most subschema applications one interface schema may ask for on its deepest example
/// (each `anyOf`/`oneOf`/`allOf` branch, `$ref`, `not`, `if`/`then`/`else` and property or
/// item schema counts one). A fan-out of `anyOf` through `$ref` doubles the work per
/// level (docs/PERFORMANCE.md, "Hostile input").
pub(super) const SCHEMA_APPLICATIONS_MAX: u64 = 100_000;
/// Longest chain of subschemas (through `$ref` and combinators) counted; bounds the stack.
pub(super) const SCHEMA_CHAIN_MAX: usize = 256;
/// Why an interface schema is refused before it is compiled; each says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum SchemaWorkError {
    #[error(
        "`$id` below the root of an interface schema is not supported: write the subschema under `$defs` and refer to it with `$ref: \"#/$defs/NAME\"`"
    )]
    NestedId,
    #[error("`$dynamicRef` is not supported in interface schemas: use `$ref` to a local `#/$defs/NAME`")]
    DynamicRef,
    #[error(
        "subschemas nest (through `$ref` and combinators) more than {SCHEMA_CHAIN_MAX} levels deep; flatten the schema"
    )]
    TooDeep,
    #[error(
        "the schema refers to itself without descending into the value (a `$ref` loop through `allOf`/`anyOf`/`oneOf`/`not`/`if`): such a schema never finishes; break the loop"
    )]
    Loop,
    #[error(
        "validating the examples against this schema would take more than {SCHEMA_APPLICATIONS_MAX} subschema applications: `anyOf`/`oneOf`/`allOf` branches that `$ref` other branches multiply; simplify the schema"
    )]
    TooMuchWork,
    #[error("`$ref` must be a string")]
    RefNotAString,
    #[error(
        "`$ref: {reference}` does not lead to a subschema of this schema: only local references (`#/$defs/NAME` or `#ANCHOR`) are accepted, remote ones are never fetched"
    )]
    NotLocal { reference: String },
}

/// Checks that an interface schema is valid JSON Schema 2020-12 and compiles without
/// network access; returns the compiled validator for the examples.
pub(super) fn check_interface_schema(
    schema: &Value,
    instance_depth: usize,
    path: &str,
    out: &mut Vec<Violation>,
) -> Option<jsonschema::Validator> {
    if let Err(e) = jsonschema::draft202012::meta::validate(schema) {
        out.push(Violation::new(
            format!("{path}{}", e.instance_path()),
            format!("not a valid JSON Schema 2020-12: {e}"),
        ));
        return None;
    }
    check_unique_items(schema, path, out);
    if let Err(e) = schema_work(schema, instance_depth) {
        out.push(Violation::new(path, e.to_string()));
        return None;
    }
    match jsonschema::draft202012::new(schema) {
        Ok(v) => Some(v),
        Err(e) => {
            out.push(Violation::new(path, format!("the schema cannot be compiled (remote $ref are not fetched): {e}")));
            None
        }
    }
}

/// How many levels of arrays and objects a value nests (a scalar is 0).
pub(super) fn value_depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Keywords whose subschemas apply to the same value as the schema holding them.
const SAME_VALUE: [&str; 4] = ["not", "if", "then", "else"];
const SAME_VALUE_LISTS: [&str; 3] = ["allOf", "anyOf", "oneOf"];
/// Keywords whose subschemas apply to the value's items or properties.
const CHILD_VALUE: [&str; 6] =
    ["additionalProperties", "items", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties"];
const CHILD_VALUE_MAPS: [&str; 2] = ["properties", "patternProperties"];
/// Keywords holding data, not schemas: never searched for `$ref`, `$id` or `$anchor`.
const DATA_KEYWORDS: [&str; 4] = ["enum", "const", "default", "examples"];

/// Bounds the work of validating a value at most `instance_depth` deep against `schema`
/// before the schema is compiled: counts subschema applications, following local `$ref`s,
/// up to [`SCHEMA_APPLICATIONS_MAX`]. References that this count cannot follow (remote,
/// `$dynamicRef`, `$id` below the root) are refused rather than trusted.
fn schema_work(schema: &Value, instance_depth: usize) -> Result<u64, SchemaWorkError> {
    let mut anchors = HashMap::new();
    collect_anchors(schema, true, &mut anchors)?;
    let mut work = SchemaWork { root: schema, anchors, memo: HashMap::new(), active: HashSet::new(), chain: 0 };
    work.cost(schema, instance_depth)
}

fn collect_anchors<'a>(
    node: &'a Value,
    root: bool,
    anchors: &mut HashMap<&'a str, &'a Value>,
) -> Result<(), SchemaWorkError> {
    match node {
        Value::Object(map) => {
            if !root && map.get("$id").is_some_and(Value::is_string) {
                return Err(SchemaWorkError::NestedId);
            }
            if map.get("$dynamicRef").is_some_and(Value::is_string) {
                return Err(SchemaWorkError::DynamicRef);
            }
            if let Some(Value::String(name)) = map.get("$anchor") {
                anchors.insert(name.as_str(), node);
            }
            for (key, value) in map {
                if !DATA_KEYWORDS.contains(&key.as_str()) {
                    collect_anchors(value, false, anchors)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(|v| collect_anchors(v, false, anchors)),
        _ => Ok(()),
    }
}

struct SchemaWork<'a> {
    root: &'a Value,
    anchors: HashMap<&'a str, &'a Value>,
    memo: HashMap<(*const Value, usize), u64>,
    /// Schemas being counted for the same value: meeting one again is a loop.
    active: HashSet<(*const Value, usize)>,
    /// Schemas on the current chain, bounded by [`SCHEMA_CHAIN_MAX`].
    chain: usize,
}

impl<'a> SchemaWork<'a> {
    fn cost(&mut self, node: &'a Value, depth: usize) -> Result<u64, SchemaWorkError> {
        let key = (node as *const Value, depth);
        if let Some(known) = self.memo.get(&key) {
            return Ok(*known);
        }
        let Value::Object(map) = node else { return Ok(1) };
        if self.chain >= SCHEMA_CHAIN_MAX {
            return Err(SchemaWorkError::TooDeep);
        }
        if !self.active.insert(key) {
            return Err(SchemaWorkError::Loop);
        }
        let mut total: u64 = 1;
        let mut same: Vec<&'a Value> = Vec::new();
        let mut child: Vec<&'a Value> = Vec::new();
        for (keyword, value) in map {
            let k = keyword.as_str();
            if SAME_VALUE.contains(&k) {
                same.push(value);
            } else if SAME_VALUE_LISTS.contains(&k) {
                same.extend(value.as_array().into_iter().flatten());
            } else if k == "dependentSchemas" {
                same.extend(value.as_object().into_iter().flat_map(|m| m.values()));
            } else if k == "$ref" {
                same.push(self.resolve(value)?);
            } else if CHILD_VALUE.contains(&k) {
                child.push(value);
            } else if CHILD_VALUE_MAPS.contains(&k) {
                child.extend(value.as_object().into_iter().flat_map(|m| m.values()));
            } else if k == "prefixItems" {
                child.extend(value.as_array().into_iter().flatten());
            }
        }
        self.chain += 1;
        let counted = self.add_all(total, &same, depth).and_then(|total| match depth.checked_sub(1) {
            Some(below) => self.add_all(total, &child, below),
            None => Ok(total),
        });
        self.chain -= 1;
        total = counted?;
        self.active.remove(&key);
        self.memo.insert(key, total);
        Ok(total)
    }

    fn add_all(&mut self, mut total: u64, subs: &[&'a Value], depth: usize) -> Result<u64, SchemaWorkError> {
        for sub in subs {
            total = total.saturating_add(self.cost(sub, depth)?);
            if total > SCHEMA_APPLICATIONS_MAX {
                return Err(SchemaWorkError::TooMuchWork);
            }
        }
        Ok(total)
    }

    fn resolve(&self, reference: &Value) -> Result<&'a Value, SchemaWorkError> {
        let Some(text) = reference.as_str() else { return Err(SchemaWorkError::RefNotAString) };
        let found = match text.strip_prefix('#') {
            Some("") => Some(self.root),
            Some(pointer) if pointer.starts_with('/') => percent_decode(pointer).and_then(|p| self.root.pointer(&p)),
            Some(anchor) => self.anchors.get(anchor).copied(),
            None => None,
        };
        found.ok_or_else(|| SchemaWorkError::NotLocal { reference: text.to_owned() })
    }
}

/// Decodes `%XX` escapes of a URI fragment; `None` if malformed.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn check_unique_items(schema: &Value, path: &str, out: &mut Vec<Violation>) {
    match schema {
        Value::Object(map) => {
            if map.get("uniqueItems") == Some(&Value::Bool(true)) {
                let bounded = map.get("maxItems").and_then(Value::as_u64).is_some_and(|n| n <= UNIQUE_ITEMS_MAX);
                if !bounded {
                    out.push(Violation::new(
                        format!("{path}/uniqueItems"),
                        format!("`uniqueItems: true` needs `maxItems` of at most {UNIQUE_ITEMS_MAX} beside it: checking uniqueness compares every pair of items"),
                    ));
                }
            }
            for (key, value) in map {
                check_unique_items(value, &format!("{path}/{}", crate::doc::pointer_escape(key)), out);
            }
        }
        Value::Array(items) => {
            for (i, value) in items.iter().enumerate() {
                check_unique_items(value, &format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}
