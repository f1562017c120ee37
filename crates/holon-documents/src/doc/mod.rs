//! The bottom of the document layer: text in, shaped and typed values out. It knows YAML,
//! the limits on a document, the kinds of document and their committed schemas, and how a
//! violation is reported; it knows no typed document (those sit above it and use it to
//! report their own violations). The pipeline that turns text into a typed, valid
//! document is [`crate::documents`].
//!
//! Steps (parse → check shape → type → check meaning), each a separate function:
//! 1. [`yaml::parse`]: YAML text to a JSON value, under [`Limits`]. Failure = unparseable.
//! 2. [`detect_kind`]: the top key says which document it is.
//! 3. [`schema::check`]: the committed JSON Schema reports **every** shape violation.
//! 4. typed deserialization (`serde_path_to_error` names the field of the first failure).
//! 5. the kind's own rules (`manifest::validate`, `mandate::validate`, `record::validate`),
//!    again reporting every violation; [`validated`] runs 3 to 5 given those rules.
//!
//! Only `yaml.rs` knows YAML; everything above it sees `serde_json::Value`.

pub mod file;
mod prune;
pub mod schema;
pub mod yaml;

pub use file::{WALK_DEPTH_MAX, WALK_FILES_MAX, read_bounded, read_text_bounded, yaml_files};

use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

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
    #[error("{}duplicate key `{key}`: each key may appear once in a mapping; keep one", location(*line, None))]
    DuplicateKey { key: String, line: Option<usize> },
    #[error("{what} cannot be represented; use plain strings, numbers, booleans, lists and mappings")]
    NotJson { what: String },
    #[error(
        "not a holon document: expected exactly one top-level `holon` (manifest), `holon_mandate`, `holon_record`, `holon_keys`, `holon_revocations` or `holon_scenario` (a simulation scenario) key, or a job mandate's `mandate: 1`"
    )]
    UnknownKind,
    #[error(
        "this is a job mandate (`mandate: 1`), and this build of holon has no job support: use a build with the `job` feature (the default)"
    )]
    NoJobSupport,
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
    /// The trusted keys document (`holon_keys`): accounts to ed25519 public keys.
    Keys,
    /// The revocation list (`holon_revocations`).
    Revocations,
    /// A job mandate (`mandate: 1`, `holon job`); only with the `job` feature.
    #[cfg(feature = "job")]
    JobMandate,
}

impl DocKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Manifest => "manifest",
            DocKind::Mandate => "mandate",
            DocKind::Record => "record",
            DocKind::Keys => "keys",
            DocKind::Revocations => "revocations",
            #[cfg(feature = "job")]
            DocKind::JobMandate => "job_mandate",
        }
    }
}

/// The kind a job mandate is detected as: none in a build without the `job` feature, which
/// still recognises one, to refuse it with [`DocError::NoJobSupport`] rather than call it
/// unknown or take it for another kind.
#[cfg(feature = "job")]
const JOB_MANDATE: Option<DocKind> = Some(DocKind::JobMandate);
#[cfg(not(feature = "job"))]
const JOB_MANDATE: Option<DocKind> = None;

/// Which document this is, by its top-level key.
pub fn detect_kind(value: &Value) -> Result<DocKind, DocError> {
    let obj = value.as_object().ok_or(DocError::UnknownKind)?;
    // `mandate` alone is a common word (a simulation scenario names its mandate file with
    // it): a job mandate is `mandate` with a number, or `mandate` beside `job`.
    let job_mandate = obj.get("mandate").is_some_and(|v| v.is_number() || obj.contains_key("job"));
    let kinds = [
        (obj.contains_key("holon"), Some(DocKind::Manifest)),
        (obj.contains_key("holon_mandate"), Some(DocKind::Mandate)),
        (obj.contains_key("holon_record"), Some(DocKind::Record)),
        (obj.contains_key("holon_keys"), Some(DocKind::Keys)),
        (obj.contains_key("holon_revocations"), Some(DocKind::Revocations)),
        (job_mandate, JOB_MANDATE),
    ];
    let mut found = kinds.into_iter().filter(|(present, _)| *present).map(|(_, kind)| kind);
    match (found.next(), found.next()) {
        (Some(Some(kind)), None) => Ok(kind),
        (Some(None), None) => Err(DocError::NoJobSupport),
        _ => Err(DocError::UnknownKind),
    }
}

/// Added to a rule's message found while other parts were left out.
pub const PROVISIONAL: &str = " (found with the parts reported above left out: check again once they are fixed)";

/// Most places cut one at a time while typing a document with problems (each cut is one
/// problem reported, or a consequence of one).
const TYPING_CUTS_MAX: usize = 64;

/// The top-level keys that name a kind of document (and a simulation scenario).
const KIND_KEYS: [&str; 6] =
    ["holon", "holon_mandate", "holon_record", "holon_keys", "holon_revocations", "holon_scenario"];

/// The kind keys at the top of `value` (a document has exactly one).
pub fn kind_keys_in(value: &Value) -> Vec<&'static str> {
    value.as_object().map_or_else(Vec::new, |obj| KIND_KEYS.iter().copied().filter(|k| obj.contains_key(*k)).collect())
}

/// A top-level key that looks like a misspelt kind key (`holon_mandat`, `Holon_Mandate`):
/// the key and the kind key it is closest to. A document with a typo in its kind must be
/// reported, not passed over as not ours.
pub fn kind_key_typo(value: &Value) -> Option<(String, &'static str)> {
    let obj = value.as_object()?;
    obj.keys().find_map(|key| {
        let lower = key.to_lowercase();
        KIND_KEYS
            .iter()
            .map(|k| (strsim::levenshtein(k, &lower), *k))
            .filter(|(d, k)| *d <= 2 || (lower.starts_with("holon") && lower.len() <= k.len() + 2))
            .min()
            .filter(|(_, k)| *k != key.as_str())
            .map(|(_, k)| (key.clone(), k))
    })
}

/// Steps 3 to 5 for a value of a known kind: the typed value, or every violation in one
/// pass: the shape's (schema), then the typing's, then the kind's own `rules` on the parts
/// that typed correctly (`prune.rs`), each at its place in the document as written.
pub fn validated<T: DeserializeOwned>(
    kind: DocKind,
    value: &Value,
    rules: impl FnOnce(&T) -> Vec<Violation>,
) -> Result<T, Vec<Violation>> {
    let shape = schema::examine_doc(kind, value);
    let mut found = shape.violations;
    if found.is_empty()
        && let Ok(t) = typed::<T>(value)
    {
        let violations = rules(&t);
        return if violations.is_empty() { Ok(t) } else { Err(violations) };
    }
    let mut pruned = prune::Pruned::new(value);
    if !found.is_empty() {
        let Some((cut, missing)) = shape.places else { return Err(found) };
        cut.iter().for_each(|p| {
            pruned.cut(p);
        });
        missing.iter().for_each(|p| pruned.spoil(p));
    }
    let mut cuts = 0;
    let t = loop {
        match typed::<T>(&pruned.value) {
            Ok(t) => break t,
            Err(violations) => {
                let Some(v) = violations.into_iter().next() else { return Err(found) };
                let at = pruned.original(&v.path);
                // A problem inside or around a place already cut is its consequence.
                if !pruned.touches(&at) {
                    found.push(Violation::new(at.clone(), v.message));
                }
                cuts += 1;
                if cuts > TYPING_CUTS_MAX || !pruned.cut(&at) {
                    found.sort();
                    found.dedup();
                    return Err(found);
                }
            }
        }
    };
    // A rule can read a field other than the one it reports at (a cut `parent` makes a
    // mandate look like a root): what the rules find here is said to be provisional.
    for v in rules(&t) {
        let at = pruned.original(&v.path);
        if !pruned.touches(&at) {
            found.push(Violation::new(at, format!("{}{PROVISIONAL}", v.message)));
        }
    }
    // Something was cut or failed to type on the way here, so something was reported;
    // should that ever not hold, the document is still refused, never passed.
    debug_assert!(!found.is_empty(), "a document that reached the cutting has a problem");
    if found.is_empty() {
        found.push(Violation::new("/", "the document could not be checked whole: fix the problems above and retry"));
    }
    found.sort();
    found.dedup();
    Err(found)
}

/// Steps 4 and 5 alone, for a value whose very text passed step 3 (the shape) against
/// this very schema before: a job mandate version approved with its schema's SHA-256
/// recorded (docs/job.md, "What a check reads"). The typing and the kind's own rules still
/// have the final word; only the schema's pass (most of a `holon job check`'s work: its
/// validator is compiled, meta-schema and all, in every process) is not repeated.
pub fn validated_shape_known<T: DeserializeOwned>(
    value: &Value,
    rules: impl FnOnce(&T) -> Vec<Violation>,
) -> Result<T, Vec<Violation>> {
    let t = typed::<T>(value)?;
    let violations = rules(&t);
    if violations.is_empty() { Ok(t) } else { Err(violations) }
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

/// Reads a regular file as UTF-8 text, at most `limits.bytes_max` bytes
/// ([`read_text_bounded`]: devices, FIFOs, sockets and directories are refused).
pub fn read_text(path: &Path, limits: &Limits) -> Result<String, DocError> {
    read_text_bounded(path, limits.bytes_max)
}

/// Errors from loading a document of an expected kind.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LoadError {
    // `error`, not `source`: the message already says it, so an error chain printed in
    // full (`{:#}`) must not say it twice.
    #[error("{path}: {error}")]
    Unreadable { path: String, error: DocError },
    #[error("{path}: expected a {expected} document, found a {found}")]
    WrongKind { path: String, expected: &'static str, found: &'static str },
    #[error("{path}: invalid {kind}:\n{}", list(violations))]
    Invalid { path: String, kind: &'static str, violations: Vec<Violation> },
}

fn list(violations: &[Violation]) -> String {
    violations.iter().map(|v| format!("  {v}")).collect::<Vec<_>>().join("\n")
}

/// Serializes a document back to YAML (the only other place YAML is written is `yaml.rs`).
pub fn to_yaml<T: Serialize>(doc: &T) -> Result<String, DocError> {
    yaml::to_string(doc)
}

/// Parses YAML text into any typed value with the document limits (for auxiliary files
/// such as private key files). Shape errors name their path.
pub fn parse_typed<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, LoadError> {
    let value = yaml::parse(text, &Limits::default())
        .map_err(|source| LoadError::Unreadable { path: origin.into(), error: source })?;
    typed(&value).map_err(|violations| LoadError::Invalid { path: origin.into(), kind: "file", violations })
}

/// A simulation scenario's text, typed: every shape violation against
/// `schema/holon-scenario.schema.json` at once, with the same advice as the documents'.
pub fn parse_scenario<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, LoadError> {
    let value = yaml::parse(text, &Limits::default())
        .map_err(|source| LoadError::Unreadable { path: origin.into(), error: source })?;
    // A document of another kind (a mandate where the scenario goes): said plainly, not
    // as a list of every key a scenario lacks.
    if value.get("holon_scenario").is_none()
        && let Ok(kind) = detect_kind(&value)
    {
        return Err(LoadError::WrongKind { path: origin.into(), expected: "scenario", found: kind.as_str() });
    }
    let invalid = |violations| LoadError::Invalid { path: origin.into(), kind: "scenario", violations };
    let shape = schema::check_scenario(&value);
    if !shape.is_empty() {
        return Err(invalid(shape));
    }
    typed(&value).map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_mandate_is_detected_or_refused_as_one_never_taken_for_another_kind() {
        let job = serde_json::json!({"mandate": 1, "job": "nightly"});
        #[cfg(feature = "job")]
        assert_eq!(detect_kind(&job), Ok(DocKind::JobMandate));
        #[cfg(not(feature = "job"))]
        assert_eq!(detect_kind(&job), Err(DocError::NoJobSupport));
        let both = serde_json::json!({"mandate": 1, "holon_mandate": {}});
        assert_eq!(detect_kind(&both), Err(DocError::UnknownKind));
        let scenario_word = serde_json::json!({"mandate": "alice.yaml", "holon_record": {}});
        assert_eq!(detect_kind(&scenario_word), Ok(DocKind::Record));
    }
}
