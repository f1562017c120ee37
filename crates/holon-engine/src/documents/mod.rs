//! The document pipeline: text in, typed and valid documents out. It sits on top of the
//! bottom layer ([`crate::doc`]: YAML, limits, kinds, schemas, violations) and of the
//! typed documents (manifest, mandate, record, job mandate), and is the only module that
//! names them all; none of them imports it back.

pub mod directory;

use std::path::Path;

use serde_json::Value;

use crate::doc::{self, DocError, DocKind, Limits, LoadError, Violation, read_text, yaml};
use crate::mandate::Mandate;
use crate::manifest::Manifest;
use crate::record::AgentRecord;
use crate::trust::{Revocations, TrustedKeys};

/// A typed, valid document.
#[derive(Debug, Clone)]
pub enum Document {
    Manifest(Box<Manifest>),
    Mandate(Box<Mandate>),
    Record(Box<AgentRecord>),
    Keys(Box<TrustedKeys>),
    Revocations(Box<Revocations>),
    #[cfg(feature = "job")]
    JobMandate(Box<crate::job::JobMandate>),
}

/// What reading one document gives: its kind, then the document or every violation.
#[derive(Debug, Clone)]
pub struct Checked {
    pub kind: DocKind,
    pub result: Result<Document, Vec<Violation>>,
}

/// Reads, shapes, types and validates one document from text.
pub fn check_str(text: &str, limits: &Limits) -> Result<Checked, DocError> {
    let value = yaml::parse(text, limits)?;
    check_value(&value)
}

/// Steps 2 to 5 of the pipeline on an already-parsed value.
pub fn check_value(value: &Value) -> Result<Checked, DocError> {
    let kind = doc::detect_kind(value)?;
    let result = match kind {
        DocKind::Manifest => doc::validated(kind, value, crate::manifest::validate).map(|mut m: Manifest| {
            // What a publisher's provenance signature covers (the whole manifest).
            m.canonical = crate::trust::canonical::Canonical::of(value).ok();
            Document::Manifest(Box::new(m))
        }),
        DocKind::Mandate => doc::validated(kind, value, crate::mandate::validate)
            .and_then(|m| with_digest(m, value))
            .map(|m| Document::Mandate(Box::new(m))),
        DocKind::Record => doc::validated(kind, value, crate::record::validate).map(|r| Document::Record(Box::new(r))),
        DocKind::Keys => doc::validated(kind, value, crate::trust::keys::validate).map(|k| Document::Keys(Box::new(k))),
        DocKind::Revocations => {
            doc::validated(kind, value, crate::trust::revocation::validate).map(|r| Document::Revocations(Box::new(r)))
        }
        #[cfg(feature = "job")]
        DocKind::JobMandate => {
            doc::validated(kind, value, crate::job::mandate::validate).map(|m| Document::JobMandate(Box::new(m)))
        }
        // The documents crate knows the kind when another crate of the build (the job
        // crate) asked for it, but this crate was built without job support.
        #[cfg(not(feature = "job"))]
        #[allow(unreachable_patterns)]
        _ => return Err(DocError::NoJobSupport),
    };
    Ok(Checked { kind, result })
}

/// A mandate read from `value` carries the digest of its canonical form (how a signature
/// and a child's `parent: sha256:` name it). A signed one without a canonical form is
/// invalid: the signature could not say what it covers.
fn with_digest(mut m: Mandate, value: &Value) -> Result<Mandate, Vec<Violation>> {
    match crate::trust::canonical::Canonical::of(value) {
        Ok(c) => m.canonical = Some(c),
        Err(e) if m.signature.is_some() => return Err(vec![Violation::new("/signature", e.to_string())]),
        Err(_) => m.canonical = None,
    }
    Ok(m)
}

/// Reads a file and checks it. I/O problems are [`DocError::Io`].
pub fn check_file(path: &Path, limits: &Limits) -> Result<Checked, DocError> {
    let text = read_text(path, limits)?;
    check_str(&text, limits)
}

/// Loads and validates a document of one expected kind from text; `origin` names it.
pub fn load_str(text: &str, origin: &str, expected: DocKind, limits: &Limits) -> Result<Document, LoadError> {
    let checked =
        check_str(text, limits).map_err(|source| LoadError::Unreadable { path: origin.into(), error: source })?;
    if checked.kind != expected {
        return Err(LoadError::WrongKind {
            path: origin.into(),
            expected: expected.as_str(),
            found: checked.kind.as_str(),
        });
    }
    checked.result.map_err(|violations| LoadError::Invalid { path: origin.into(), kind: expected.as_str(), violations })
}

/// [`load_str`] for a file.
pub fn load_file(path: &Path, expected: DocKind, limits: &Limits) -> Result<Document, LoadError> {
    let origin = path.display().to_string();
    let text =
        read_text(path, limits).map_err(|source| LoadError::Unreadable { path: origin.clone(), error: source })?;
    load_str(&text, &origin, expected, limits)
}

pub fn load_manifest(path: &Path) -> Result<Manifest, LoadError> {
    match load_file(path, DocKind::Manifest, &Limits::default())? {
        Document::Manifest(m) => Ok(*m),
        _ => Err(LoadError::WrongKind { path: path.display().to_string(), expected: "manifest", found: "other" }),
    }
}

pub fn load_mandate(path: &Path) -> Result<Mandate, LoadError> {
    match load_file(path, DocKind::Mandate, &Limits::default())? {
        Document::Mandate(m) => Ok(*m),
        _ => Err(LoadError::WrongKind { path: path.display().to_string(), expected: "mandate", found: "other" }),
    }
}

pub fn load_record(path: &Path) -> Result<AgentRecord, LoadError> {
    match load_file(path, DocKind::Record, &Limits::default())? {
        Document::Record(r) => Ok(*r),
        _ => Err(LoadError::WrongKind { path: path.display().to_string(), expected: "record", found: "other" }),
    }
}

/// Parses a mandate from YAML text (for embedding and doctests).
pub fn mandate_from_str(text: &str) -> Result<Mandate, LoadError> {
    match load_str(text, "<mandate>", DocKind::Mandate, &Limits::default())? {
        Document::Mandate(m) => Ok(*m),
        _ => Err(LoadError::WrongKind { path: "<mandate>".into(), expected: "mandate", found: "other" }),
    }
}

/// Parses a manifest from YAML text (for embedding and doctests).
pub fn manifest_from_str(text: &str) -> Result<Manifest, LoadError> {
    match load_str(text, "<manifest>", DocKind::Manifest, &Limits::default())? {
        Document::Manifest(m) => Ok(*m),
        _ => Err(LoadError::WrongKind { path: "<manifest>".into(), expected: "manifest", found: "other" }),
    }
}

pub fn load_keys(path: &Path) -> Result<TrustedKeys, LoadError> {
    match load_file(path, DocKind::Keys, &Limits::default())? {
        Document::Keys(k) => Ok(*k),
        _ => Err(LoadError::WrongKind { path: path.display().to_string(), expected: "keys", found: "other" }),
    }
}

pub fn load_revocations(path: &Path) -> Result<Revocations, LoadError> {
    match load_file(path, DocKind::Revocations, &Limits::default())? {
        Document::Revocations(r) => Ok(*r),
        _ => Err(LoadError::WrongKind { path: path.display().to_string(), expected: "revocations", found: "other" }),
    }
}
