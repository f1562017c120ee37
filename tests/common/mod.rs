//! Helpers shared by the integration tests.
#![allow(dead_code)]

#[cfg(feature = "cli")]
pub(crate) mod cluster;
pub(crate) mod held;
#[cfg(feature = "cli")]
pub(crate) mod job_state;
pub(crate) mod lost_answers;
pub(crate) mod rng;
#[cfg(feature = "serve")]
pub(crate) mod server;
pub(crate) mod store_model;

use holon::doc::{self, Limits};
use holon::documents;
use serde_json::Value;

pub(crate) enum Edit {
    Set(&'static str, Value),
    Remove(&'static str),
}

pub(crate) fn set(pointer: &'static str, value: Value) -> Edit {
    Edit::Set(pointer, value)
}
pub(crate) fn remove(pointer: &'static str) -> Edit {
    Edit::Remove(pointer)
}

pub(crate) fn load_value(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    doc::yaml::parse(&text, &Limits::default()).unwrap()
}

/// Applies edits at JSON Pointers (the parent must exist; the last token is created).
pub(crate) fn apply(base: &Value, edits: &[Edit]) -> Value {
    let mut doc = base.clone();
    for edit in edits {
        let pointer = match edit {
            Edit::Set(p, _) | Edit::Remove(p) => *p,
        };
        let (parent, last) = pointer.rsplit_once('/').unwrap();
        let target = doc.pointer_mut(parent).unwrap_or_else(|| panic!("no parent {parent}"));
        match (edit, target) {
            (Edit::Set(_, v), Value::Object(map)) => {
                map.insert(last.to_owned(), v.clone());
            }
            (Edit::Set(_, v), Value::Array(items)) => {
                items[last.parse::<usize>().unwrap()] = v.clone();
            }
            (Edit::Remove(_), Value::Object(map)) => {
                map.remove(last).unwrap_or_else(|| panic!("nothing at {pointer}"));
            }
            (Edit::Remove(_), Value::Array(items)) => {
                items.remove(last.parse::<usize>().unwrap());
            }
            _ => panic!("cannot edit {pointer}"),
        }
    }
    doc
}

/// Every violation of a document, as "pointer: message" strings.
pub(crate) fn violations(value: &Value) -> Vec<String> {
    let checked = documents::check_value(value).unwrap();
    match checked.result {
        Ok(_) => vec![],
        Err(v) => v.iter().map(|v| format!("{}: {}", v.path, v.message)).collect(),
    }
}

/// Runs the `holon` binary with `NO_COLOR`: (exit code, stdout, stderr).
#[cfg(feature = "cli")]
pub(crate) fn holon(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holon")).args(args).env("NO_COLOR", "1").output().unwrap();
    (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// Two agents of the same version with crossed records, in a copy of the examples at
/// `docs`: fx-convert and page-reader both 1.0.0, each directory's `record.yaml` the
/// *other* agent's (fx-convert's measured at 0.99, page-reader's at 0.50). The rule
/// (`lookup::record_for`) gives each agent its own, found in the other's directory.
pub(crate) fn cross_records(docs: &std::path::Path) {
    let set_version = |file: &str| {
        let path = docs.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let (before, after) = text.split_once("\nversion: ").unwrap();
        let rest = after.split_once('\n').unwrap().1;
        std::fs::write(&path, format!("{before}\nversion: 1.0.0\n{rest}")).unwrap();
    };
    set_version("agents/fx-convert/holon.yaml");
    set_version("agents/page-reader/holon.yaml");
    let record = |agent: &str, rate: &str| {
        format!(
            "holon_record: \"0.1\"\nagent: {agent}\nversion: 1.0.0\nsuccess_rate: \"{rate}\"\nlatency_p95_s: 1.0\nruns_30d: 500\neval_score: \"0.95\"\n"
        )
    };
    std::fs::write(docs.join("agents/fx-convert/record.yaml"), record("holon-labs/page-reader", "0.50")).unwrap();
    std::fs::write(docs.join("agents/page-reader/record.yaml"), record("holon-labs/fx-convert", "0.99")).unwrap();
}

/// Copies a directory tree.
pub(crate) fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
