//! A documents directory read into one snapshot input, all or nothing: every `.yaml`/`.yml`
//! file below it must be a valid manifest, mandate, agent record or revocation list, or
//! one of the documents an engine knowingly leaves alone (a simulation scenario, a job
//! mandate, a trusted keys document). The keys and revocations files are read with it,
//! every time. Trusted keys come from the keys file only: whoever can write the documents
//! must not be able to trust a key, or signatures would prove nothing. Anything else is an
//! error that names its file and JSON Pointer (`holon serve`'s reload keeps serving what it
//! had, docs/serve.md "Hot reload"; the Python package raises it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::doc::{self, DocError, Limits};
use crate::documents::{self, Document};
use crate::engine::SnapshotInput;
use crate::lookup::RecordOrigin;
use crate::manifest::Manifest;
use crate::pattern::AgentId;
use crate::record::AgentRecord;
use crate::trust::revocation::REVOCATIONS_MAX;
use crate::trust::{Revocations, TrustedKeys};
use serde::Serialize;

/// Why a documents directory was refused: the first file at fault, where in it, and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadFailure {
    pub file: String,
    /// A JSON Pointer into the document (`/` for the whole file).
    pub pointer: String,
    pub message: String,
}

impl std::fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A pointer only where it points into a document (`/` is the whole file).
        if self.pointer == "/" {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{} at {}: {}", self.file, self.pointer, self.message)
        }
    }
}

/// What a directory held, compiled-ready.
#[derive(Debug)]
pub struct Loaded {
    pub input: SnapshotInput,
    /// Files left to other verbs (scenarios, job mandates), by path.
    pub ignored: Vec<String>,
}

/// Reads every document below `dir`. The first file that is not a valid document of a kind
/// the server serves or knowingly ignores refuses the whole directory.
/// The `--keys` and `--revocations` files.
#[derive(Debug, Clone, Default)]
pub struct TrustFiles {
    pub keys: Option<PathBuf>,
    pub revocations: Option<PathBuf>,
}

impl TrustFiles {
    pub fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        self.keys.iter().chain(&self.revocations)
    }
}

pub fn load(dir: &Path, trust: &TrustFiles) -> Result<Loaded, LoadFailure> {
    let limits = Limits::default();
    if !dir.is_dir() {
        let what = if dir.exists() { "not a directory" } else { "no such directory" };
        return Err(whole(
            dir,
            &format!("{what}: give the directory that holds the manifests, mandates and agent records"),
        ));
    }
    let files = doc::yaml_files(dir).map_err(|e| whole(dir, &e.to_string()))?;
    let mut manifests: Vec<(PathBuf, Manifest)> = Vec::new();
    let mut mandates = Vec::new();
    let mut records: BTreeMap<AgentId, Vec<(PathBuf, AgentRecord)>> = BTreeMap::new();
    let mut ignored = Vec::new();
    let mut keys = TrustedKeys::default();
    let mut revocations = Revocations::default();
    if let Some(k) = read_keys(trust)? {
        keys = k;
    }
    if let Some(r) = read_revocations(trust)? {
        revocations = r;
    }
    for file in files {
        match read_one(&file, &limits)? {
            Some(Document::Manifest(m)) => manifests.push((file, *m)),
            Some(Document::Mandate(m)) => mandates.push(Arc::new(*m)),
            Some(Document::Record(r)) => records.entry(r.agent.clone()).or_default().push((file, *r)),
            // Never trusted from here (see the module's documentation); listed as left alone.
            Some(Document::Keys(_)) => ignored.push(file.display().to_string()),
            Some(Document::Revocations(r)) => revocations.revoked.extend(r.revoked),
            #[cfg(feature = "job")]
            Some(Document::JobMandate(_)) => ignored.push(file.display().to_string()),
            None => ignored.push(file.display().to_string()),
        }
    }
    let agents = manifests
        .into_iter()
        .map(|(path, m)| {
            // The one rule (`lookup::record_for`): beside the manifest before elsewhere.
            let candidates = records.get(&m.id).into_iter().flatten().map(|(at, r)| (RecordOrigin::of(at, &path), r));
            let record = crate::lookup::record_for(&m, candidates).cloned();
            (Arc::new(m), record.map(Arc::new))
        })
        .collect();
    if revocations.revoked.len() > REVOCATIONS_MAX {
        return Err(whole(dir, &format!("more than {REVOCATIONS_MAX} revocations in all: merge the lists")));
    }
    Ok(Loaded { input: SnapshotInput { mandates, agents, keys, revocations }, ignored })
}

fn read_keys(trust: &TrustFiles) -> Result<Option<TrustedKeys>, LoadFailure> {
    let Some(file) = &trust.keys else { return Ok(None) };
    match read_one(file, &Limits::default())? {
        Some(Document::Keys(k)) => Ok(Some(*k)),
        _ => Err(whole(file, "--keys: expected a trusted keys document (`holon_keys`)")),
    }
}

fn read_revocations(trust: &TrustFiles) -> Result<Option<Revocations>, LoadFailure> {
    let Some(file) = &trust.revocations else { return Ok(None) };
    match read_one(file, &Limits::default())? {
        Some(Document::Revocations(r)) => Ok(Some(*r)),
        _ => Err(whole(file, "--revocations: expected a revocation list (`holon_revocations`)")),
    }
}

/// What a reload publishes when the documents cannot be read: `last` (the input the last
/// good reload published) with the trust files read again. Keys are replaced (a key taken
/// out is distrusted at once); revocations are added to those in effect, never taken away
/// (a failed reload only ever withdraws more).
pub fn trust_only(last: &SnapshotInput, trust: &TrustFiles) -> Result<SnapshotInput, LoadFailure> {
    let mut input = last.clone();
    if let Some(keys) = read_keys(trust)? {
        input.keys = keys;
    }
    if let Some(list) = read_revocations(trust)? {
        input.revocations.revoked.extend(list.revoked);
    }
    if input.revocations.revoked.len() > REVOCATIONS_MAX {
        return Err(whole(Path::new("--revocations"), &format!("more than {REVOCATIONS_MAX} revocations in all")));
    }
    Ok(input)
}

/// One file: a served document, `None` for one the server knowingly leaves to other
/// verbs, or the failure.
fn read_one(file: &Path, limits: &Limits) -> Result<Option<Document>, LoadFailure> {
    let text = doc::read_text(file, limits).map_err(|e| whole(file, &e.to_string()))?;
    let value = doc::yaml::parse(&text, limits).map_err(|e| whole(file, &e.to_string()))?;
    // A simulation scenario (`holon mandate simulate`) sits beside the examples.
    if value.get("holon_scenario").is_some() {
        return Ok(None);
    }
    let checked = documents::check_value(&value).map_err(|e| match e {
        DocError::UnknownKind => whole(
            file,
            "not a holon document: a manifest starts with `holon:`, a mandate with `holon_mandate:`, a record with `holon_record:`, trusted keys with `holon_keys:`, a revocation list with `holon_revocations:`; move other files out of the documents directory",
        ),
        other => whole(file, &other.to_string()),
    })?;
    match checked.result {
        Ok(document) => Ok(Some(document)),
        Err(violations) => {
            let first = violations.into_iter().next();
            let kind = checked.kind.as_str();
            Err(match first {
                Some(v) => LoadFailure {
                    file: file.display().to_string(),
                    pointer: v.path,
                    message: format!("invalid {kind}: {}", v.message),
                },
                None => whole(file, &format!("invalid {kind}")),
            })
        }
    }
}

pub fn whole(file: &Path, message: &str) -> LoadFailure {
    LoadFailure { file: file.display().to_string(), pointer: "/".to_owned(), message: message.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The repository's `examples/` (this crate lives in `crates/holon-engine/`).
    fn examples() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
    }

    #[test]
    fn the_bundled_examples_load_and_the_scenario_is_left_alone() {
        let loaded = load(&examples(), &TrustFiles::default()).unwrap();
        assert_eq!(loaded.input.mandates.len(), 5);
        assert!(loaded.input.keys.keys.is_empty(), "keys are trusted from --keys only");
        assert_eq!(loaded.input.revocations.revoked.len(), 1, "examples/trust/revocations.yaml");
        assert_eq!(loaded.input.agents.len(), 7);
        assert!(loaded.input.agents.iter().all(|(_, r)| r.is_some()), "every example agent has its record");
        assert_eq!(loaded.ignored.len(), 2, "the scenario and the keys: {:?}", loaded.ignored);
    }

    #[test]
    fn an_unknown_file_or_an_invalid_document_refuses_the_directory_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.yaml"), "hello: world\n").unwrap();
        let failure = load(dir.path(), &TrustFiles::default()).unwrap_err();
        assert!(failure.file.ends_with("notes.yaml") && failure.message.contains("not a holon document"));
        std::fs::remove_file(dir.path().join("notes.yaml")).unwrap();
        let text = std::fs::read_to_string(examples().join("mandates/alice-root.yaml")).unwrap();
        std::fs::write(dir.path().join("m.yaml"), text.replace("per_call: \"2.00\"", "per_call: \"two\"")).unwrap();
        let failure = load(dir.path(), &TrustFiles::default()).unwrap_err();
        assert_eq!(failure.pointer, "/budget/per_call", "{failure}");
        assert!(load(&dir.path().join("m.yaml"), &TrustFiles::default()).is_err(), "a file is not a directory");
    }
}
