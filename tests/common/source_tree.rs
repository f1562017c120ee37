//! The repository's own files and how the tests that read them (`tidy`, `tidy_docs`,
//! `tidy_imports`, `public_api`) tell what is code and what is test code. They include
//! this file alone rather than all of `common`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// holon's library and binary packages: each one's name (Cargo.toml's) and where its
/// sources are.
pub(crate) const PACKAGES: [(&str, &str); 4] = [
    ("holon", "src"),
    ("holon-documents", "crates/holon-documents/src"),
    ("holon-engine", "crates/holon-engine/src"),
    ("holon-job", "crates/holon-job/src"),
];

/// Every file under `dir` (with extension `ext`, if given), recursively and sorted, so
/// that what a test reports comes out in the same order on every machine.
pub(crate) fn files_under(dir: &Path, ext: Option<&str>, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, ext, out);
        } else if ext.is_none_or(|ext| p.extension().is_some_and(|e| e == ext)) {
            out.push(p);
        }
    }
}

/// Whether `attrs` hold an attribute `#[name(inner)]`, e.g. `#[cfg(test)]` or
/// `#[doc(hidden)]` (its tokens compared as the parser prints them).
pub(crate) fn has_attr(attrs: &[syn::Attribute], name: &str, inner: &str) -> bool {
    attrs.iter().any(|a| a.path().is_ident(name) && a.meta.require_list().is_ok_and(|l| l.tokens.to_string() == inner))
}

/// Whether an item is compiled for tests only (`#[cfg(test)]`).
pub(crate) fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    has_attr(attrs, "cfg", "test")
}
