//! The repository's own files, for the tests that read them (`tidy`, `tidy_docs`,
//! `tidy_imports`, `public_api`), which include this file alone rather than all of
//! `common`.

use std::path::{Path, PathBuf};

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
