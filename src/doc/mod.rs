//! The document layer: text in, typed and validated documents out.
//!
//! Pipeline (parse → check shape → type → check meaning), each step a separate function:
//! 1. [`yaml::parse`]: YAML text to a JSON value, under [`Limits`]. Failure = unparseable.
//! 2. [`detect_kind`]: the top key says which document it is.
//! 3. [`schema::check`]: the committed JSON Schema reports **every** shape violation.
//! 4. typed deserialization (`serde_path_to_error` names the field of the first failure).
//! 5. the kind's own rules (`manifest::validate`, `mandate::validate`, `record::validate`),
//!    again reporting every violation.
//!
//! Only `yaml.rs` knows YAML; everything above it sees `serde_json::Value`.

pub mod file;
pub mod schema;
pub mod yaml;

pub use file::{read_bounded, read_text_bounded};

use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use crate::mandate::Mandate;
use crate::manifest::Manifest;
use crate::record::AgentRecord;

/// Limits on any document we read. Permission documents are small; these bound the work
/// a hostile file can cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub bytes_max: usize,
    pub depth_max: usize,
    pub nodes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { bytes_max: 1 << 20, depth_max: 64, nodes_max: 100_000 }
    }
}

/// Why a document could not be read at all (exit code 2 in the CLI).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DocError {
    #[error("cannot read: {0}")]
    Io(String),
    #[error("this is {what}, not a regular file: holon reads documents only from regular files; pass the file itself")]
    NotAFile { what: &'static str },
    #[error(
        "file is {bytes} bytes, over the limit of {bytes_max} bytes; holon documents are small, check you passed the right file"
    )]
    TooLarge { bytes: usize, bytes_max: usize },
    #[error(
        "line {line}: YAML anchors and aliases (&name, *name) are not accepted in holon documents; write the value out"
    )]
    Anchor { line: usize },
    #[error("{}YAML syntax error: {message}", location(*line, *column))]
    Syntax { line: Option<usize>, column: Option<usize>, message: String },
    #[error(
        "{}nesting is deeper than {depth_max} levels; holon documents are shallow: flatten the structure, or look for an unclosed `[` or `{{`",
        location(*line, None)
    )]
    TooDeep { depth_max: usize, line: Option<usize> },
    #[error("more than {nodes_max} values in one document")]
    TooManyNodes { nodes_max: usize },
    #[error("duplicate key `{key}`: each key may appear once in a mapping")]
    DuplicateKey { key: String },
    #[error("{what} cannot be represented; use plain strings, numbers, booleans, lists and mappings")]
    NotJson { what: String },
    #[error(
        "not a holon document: expected exactly one top-level `holon` (manifest), `holon_mandate` or `holon_record` key"
    )]
    UnknownKind,
}

fn location(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!("line {l}, column {c}: "),
        (Some(l), None) => format!("line {l}: "),
        _ => String::new(),
    }
}

/// One thing wrong with a document: where (a JSON Pointer) and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

impl Violation {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        let path = path.into();
        Violation { path: if path.is_empty() { "/".into() } else { path }, message: message.into() }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Escapes one JSON Pointer reference token (RFC 6901).
pub fn pointer_escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    Manifest,
    Mandate,
    Record,
    /// A job mandate (`mandate: 1`, `holon job`).
    JobMandate,
}

impl DocKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Manifest => "manifest",
            DocKind::Mandate => "mandate",
            DocKind::Record => "record",
            DocKind::JobMandate => "job_mandate",
        }
    }
}

/// Which document this is, by its top-level key.
pub fn detect_kind(value: &Value) -> Result<DocKind, DocError> {
    let obj = value.as_object().ok_or(DocError::UnknownKind)?;
    let kinds = [
        ("holon", DocKind::Manifest),
        ("holon_mandate", DocKind::Mandate),
        ("holon_record", DocKind::Record),
        ("mandate", DocKind::JobMandate),
    ];
    // `mandate` alone is a common word (a simulation scenario names its mandate file with
    // it): a job mandate is `mandate` with a number, or `mandate` beside `job`.
    let job_mandate = obj.get("mandate").is_some_and(|v| v.is_number() || obj.contains_key("job"));
    let mut found = kinds
        .iter()
        .filter(|(key, kind)| obj.contains_key(*key) && (*kind != DocKind::JobMandate || job_mandate))
        .map(|(_, k)| *k);
    match (found.next(), found.next()) {
        (Some(kind), None) => Ok(kind),
        _ => Err(DocError::UnknownKind),
    }
}

/// A typed, valid document.
#[derive(Debug, Clone)]
pub enum Document {
    Manifest(Box<Manifest>),
    Mandate(Box<Mandate>),
    Record(Box<AgentRecord>),
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
    let kind = detect_kind(value)?;
    let shape = schema::check(kind, value);
    if !shape.is_empty() {
        return Ok(Checked { kind, result: Err(shape) });
    }
    let result = match kind {
        DocKind::Manifest => typed::<Manifest>(value)
            .and_then(|m| reject_if_any(crate::manifest::validate(&m)).map(|()| Document::Manifest(Box::new(m)))),
        DocKind::Mandate => typed::<Mandate>(value)
            .and_then(|m| reject_if_any(crate::mandate::validate(&m)).map(|()| Document::Mandate(Box::new(m)))),
        DocKind::Record => typed::<AgentRecord>(value)
            .and_then(|r| reject_if_any(crate::record::validate(&r)).map(|()| Document::Record(Box::new(r)))),
        DocKind::JobMandate => typed::<crate::job::JobMandate>(value)
            .and_then(|m| reject_if_any(crate::job::mandate::validate(&m)).map(|()| Document::JobMandate(Box::new(m)))),
    };
    Ok(Checked { kind, result })
}

fn reject_if_any(violations: Vec<Violation>) -> Result<(), Vec<Violation>> {
    if violations.is_empty() { Ok(()) } else { Err(violations) }
}

/// Deserializes into the typed model; the first failure becomes a violation at its path.
fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, Vec<Violation>> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e
            .path()
            .iter()
            .filter_map(|seg| match seg {
                serde_path_to_error::Segment::Seq { index } => Some(index.to_string()),
                serde_path_to_error::Segment::Map { key } => Some(pointer_escape(key)),
                serde_path_to_error::Segment::Enum { variant } => Some(pointer_escape(variant)),
                serde_path_to_error::Segment::Unknown => None,
            })
            .fold(String::new(), |acc, seg| acc + "/" + &seg);
        vec![Violation::new(path, e.into_inner().to_string())]
    })
}

/// Reads a file and checks it. I/O problems are [`DocError::Io`].
pub fn check_file(path: &Path, limits: &Limits) -> Result<Checked, DocError> {
    let text = read_text(path, limits)?;
    check_str(&text, limits)
}

/// Reads a regular file as UTF-8 text, at most `limits.bytes_max` bytes
/// ([`read_text_bounded`]: devices, FIFOs, sockets and directories are refused).
pub fn read_text(path: &Path, limits: &Limits) -> Result<String, DocError> {
    read_text_bounded(path, limits.bytes_max)
}

/// Errors from loading a document of an expected kind.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Unreadable { path: String, source: DocError },
    #[error("{path}: expected a {expected} document, found a {found}")]
    WrongKind { path: String, expected: &'static str, found: &'static str },
    #[error("{path}: invalid {kind}:\n{}", list(violations))]
    Invalid { path: String, kind: &'static str, violations: Vec<Violation> },
}

fn list(violations: &[Violation]) -> String {
    violations.iter().map(|v| format!("  {v}")).collect::<Vec<_>>().join("\n")
}

/// Loads and validates a document of one expected kind from text; `origin` names it.
pub fn load_str(text: &str, origin: &str, expected: DocKind, limits: &Limits) -> Result<Document, LoadError> {
    let checked = check_str(text, limits).map_err(|source| LoadError::Unreadable { path: origin.into(), source })?;
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
    let text = read_text(path, limits).map_err(|source| LoadError::Unreadable { path: origin.clone(), source })?;
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

/// Serializes a document back to YAML (the only other place YAML is written is `yaml.rs`).
pub fn to_yaml<T: Serialize>(doc: &T) -> Result<String, DocError> {
    yaml::to_string(doc)
}

/// Parses YAML text into any typed value with the document limits (for auxiliary files
/// such as simulation scenarios). Shape errors name their path.
pub fn parse_typed<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, LoadError> {
    let value = yaml::parse(text, &Limits::default())
        .map_err(|source| LoadError::Unreadable { path: origin.into(), source })?;
    typed(&value).map_err(|violations| LoadError::Invalid { path: origin.into(), kind: "file", violations })
}

/// Most YAML files one directory walk returns.
pub const WALK_FILES_MAX: usize = 10_000;
/// Deepest directory nesting walked.
pub const WALK_DEPTH_MAX: usize = 32;

/// `path` itself if it is a file; else every `.yaml`/`.yml` file below it, sorted,
/// skipping hidden entries, bounded by [`WALK_FILES_MAX`] and [`WALK_DEPTH_MAX`].
pub fn yaml_files(path: &Path) -> Result<Vec<std::path::PathBuf>, DocError> {
    let mut out = Vec::new();
    if path.is_dir() {
        walk(path, 0, &mut out)?;
    } else if path.exists() {
        out.push(path.to_path_buf());
    } else {
        return Err(DocError::Io(format!("{}: no such file or directory", path.display())));
    }
    Ok(out)
}

fn walk(dir: &Path, depth: usize, out: &mut Vec<std::path::PathBuf>) -> Result<(), DocError> {
    if depth > WALK_DEPTH_MAX {
        return Err(DocError::Io(format!("{}: directories nested deeper than {WALK_DEPTH_MAX} levels", dir.display())));
    }
    // Each entry with its own type, symbolic links not followed: a link to a directory
    // is not walked (a link to `.` would repeat the walk at every level), a link to a
    // file is read like a file (and refused there if it leads to a device or a FIFO).
    let mut entries: Vec<(std::path::PathBuf, bool)> = std::fs::read_dir(dir)
        .map_err(|e| DocError::Io(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| (e.path(), e.file_type().is_ok_and(|t| t.is_dir()))))
        .filter(|(p, _)| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    entries.sort();
    for (p, is_dir) in entries {
        if is_dir {
            walk(&p, depth + 1, out)?;
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            if out.len() >= WALK_FILES_MAX {
                return Err(DocError::Io(format!(
                    "more than {WALK_FILES_MAX} files under {}; name a smaller directory",
                    dir.display()
                )));
            }
            out.push(p);
        }
    }
    Ok(())
}
