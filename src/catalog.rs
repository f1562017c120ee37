//! A set of known agents: manifests with their records, loaded from directories.
//! It answers [`AgentLookup`] (the lookup of declared downstream agents, which lives in
//! [`crate::lookup`] so that the decision layers do not depend on this loader); ranking
//! and the CLI iterate it.

use std::path::{Path, PathBuf};

use crate::doc::{self, DocError, DocKind, Limits, LoadError};
use crate::documents::{self, Document};
use crate::lookup::{AgentCandidates, AgentLookup, RecordOrigin, newest_in_range, record_for};
use crate::manifest::Manifest;
use crate::pattern::AgentId;
use crate::record::AgentRecord;

/// Most agents one catalog holds when loaded from disk.
pub const AGENTS_MAX: usize = 100_000;

#[derive(Debug, Clone)]
pub struct Entry {
    pub manifest: Manifest,
    pub record: Option<AgentRecord>,
    pub path: PathBuf,
}

#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub entries: Vec<Entry>,
}

impl AgentLookup for Catalog {
    fn find(&self, id: &AgentId, range: &semver::VersionReq) -> Option<&Manifest> {
        newest_in_range(self.entries.iter().map(|e| &e.manifest), id, range)
    }
}

impl AgentCandidates for Catalog {
    fn candidates(&self) -> impl Iterator<Item = (&Manifest, Option<&AgentRecord>)> {
        self.entries.iter().map(|e| (&e.manifest, e.record.as_ref()))
    }
}

impl Catalog {
    pub fn get(&self, id: &AgentId) -> Option<&Entry> {
        self.entries.iter().filter(|e| &e.manifest.id == id).max_by(|a, b| a.manifest.version.cmp(&b.manifest.version))
    }

    /// Loads manifests from files or directories (recursively), with their records: the
    /// records found among the same files and, if given, in `records_dir`; which one applies
    /// to a manifest is [`record_for`]'s rule (a records directory's first, then the one
    /// beside the manifest, then any other).
    pub fn load(paths: &[PathBuf], records_dir: Option<&Path>) -> Result<Catalog, LoadError> {
        let limits = Limits::default();
        let mut files = Vec::new();
        for p in paths {
            if !p.exists() {
                // Said once, with the path in front (not `x: cannot read: x: …`); an agent id
                // given where a path goes is the usual cause.
                let id_like = AgentId::parse(&p.display().to_string()).is_ok();
                let hint = if id_like {
                    "; agents are given as paths to their manifests or directories (like examples/agents/fx-convert), not by id"
                } else {
                    ""
                };
                let error = DocError::Io(format!("no such file or directory{hint}"));
                return Err(LoadError::Unreadable { path: p.display().to_string(), error });
            }
            files.extend(
                doc::yaml_files(p).map_err(|e| LoadError::Unreadable { path: p.display().to_string(), error: e })?,
            );
        }
        let mut records: Vec<(PathBuf, Option<RecordOrigin>, AgentRecord)> = Vec::new();
        if let Some(dir) = records_dir {
            let rfiles = doc::yaml_files(dir)
                .map_err(|e| LoadError::Unreadable { path: dir.display().to_string(), error: e })?;
            for f in rfiles {
                if let Some(Document::Record(r)) = load_if(&f, &[DocKind::Record], &limits)? {
                    records.push((f, Some(RecordOrigin::RecordsDir), *r));
                }
            }
        }
        let mut manifests = Vec::new();
        for f in files {
            match load_if(&f, &[DocKind::Manifest, DocKind::Record], &limits)? {
                Some(Document::Manifest(m)) => manifests.push((f, *m)),
                Some(Document::Record(r)) => records.push((f, None, *r)),
                _ => {}
            }
        }
        // A manifest named as a file: the `record.yaml` beside it is a candidate too.
        for (path, _) in &manifests {
            let beside = path.with_file_name("record.yaml");
            if beside.exists() && !records.iter().any(|(at, _, _)| at == &beside) {
                let record = documents::load_record(&beside)?;
                records.push((beside, None, record));
            }
        }
        if manifests.len() > AGENTS_MAX {
            return Err(LoadError::Unreadable {
                path: paths.first().map(|p| p.display().to_string()).unwrap_or_default(),
                error: doc::DocError::Io(format!("more than {AGENTS_MAX} agents")),
            });
        }
        let entries = manifests
            .into_iter()
            .map(|(path, manifest)| {
                let candidates =
                    records.iter().map(|(at, origin, r)| (origin.unwrap_or_else(|| RecordOrigin::of(at, &path)), r));
                let record = record_for(&manifest, candidates).cloned();
                Entry { manifest, record, path }
            })
            .collect();
        Ok(Catalog { entries })
    }
}

/// Loads a file if it is a document of one of `kinds`; other holon documents are skipped,
/// unreadable or invalid ones are errors.
fn load_if(path: &Path, kinds: &[DocKind], limits: &Limits) -> Result<Option<Document>, LoadError> {
    let origin = path.display().to_string();
    let text =
        doc::read_text(path, limits).map_err(|source| LoadError::Unreadable { path: origin.clone(), error: source })?;
    let value = doc::yaml::parse(&text, limits)
        .map_err(|source| LoadError::Unreadable { path: origin.clone(), error: source })?;
    let kind = match doc::detect_kind(&value) {
        Ok(k) if kinds.contains(&k) => k,
        _ => return Ok(None),
    };
    let checked = documents::check_value(&value)
        .map_err(|source| LoadError::Unreadable { path: origin.clone(), error: source })?;
    checked.result.map(Some).map_err(|violations| LoadError::Invalid { path: origin, kind: kind.as_str(), violations })
}
