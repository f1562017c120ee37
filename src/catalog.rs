//! A set of known agents: manifests with their records, loaded from directories.
//! It answers [`AgentLookup`] (the lookup of declared downstream agents, which lives in
//! [`crate::lookup`] so that the decision layers do not depend on this loader); ranking
//! and the CLI iterate it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::doc::{self, DocError, DocKind, Limits, LoadError};
use crate::documents::{self, Document};
use crate::lookup::{AgentLookup, newest_in_range};
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

impl Catalog {
    pub fn get(&self, id: &AgentId) -> Option<&Entry> {
        self.entries.iter().filter(|e| &e.manifest.id == id).max_by(|a, b| a.manifest.version.cmp(&b.manifest.version))
    }

    /// Loads manifests from files or directories (recursively). A `record.yaml` beside a
    /// manifest is its record; `records_dir`, if given, supplies records by agent id.
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
        let mut records: BTreeMap<AgentId, Vec<AgentRecord>> = BTreeMap::new();
        if let Some(dir) = records_dir {
            let rfiles = doc::yaml_files(dir)
                .map_err(|e| LoadError::Unreadable { path: dir.display().to_string(), error: e })?;
            for f in rfiles {
                if let Some(Document::Record(r)) = load_if(&f, DocKind::Record, &limits)? {
                    records.entry(r.agent.clone()).or_default().push(*r);
                }
            }
        }
        let mut entries = Vec::new();
        for f in files {
            let Some(Document::Manifest(m)) = load_if(&f, DocKind::Manifest, &limits)? else { continue };
            let beside = f.with_file_name("record.yaml");
            let mut record = match beside.exists() {
                true => Some(documents::load_record(&beside)?),
                false => None,
            };
            if let Some(rs) = records.get(&m.id) {
                record = rs
                    .iter()
                    .find(|r| r.version.as_ref() == Some(&m.version))
                    .or_else(|| rs.iter().find(|r| r.version.is_none()))
                    .cloned()
                    .or(record);
            }
            // A record for another agent, or another version, does not apply.
            let record = record.filter(|r| r.agent == m.id && r.version.as_ref().is_none_or(|v| v == &m.version));
            if entries.len() >= AGENTS_MAX {
                return Err(LoadError::Unreadable {
                    path: f.display().to_string(),
                    error: doc::DocError::Io(format!("more than {AGENTS_MAX} agents")),
                });
            }
            entries.push(Entry { manifest: *m, record, path: f });
        }
        Ok(Catalog { entries })
    }
}

/// Loads a file if it is a document of `kind`; other holon documents are skipped,
/// unreadable or invalid ones are errors.
fn load_if(path: &Path, kind: DocKind, limits: &Limits) -> Result<Option<Document>, LoadError> {
    let origin = path.display().to_string();
    let text =
        doc::read_text(path, limits).map_err(|source| LoadError::Unreadable { path: origin.clone(), error: source })?;
    let value = doc::yaml::parse(&text, limits)
        .map_err(|source| LoadError::Unreadable { path: origin.clone(), error: source })?;
    match doc::detect_kind(&value) {
        Ok(k) if k == kind => {}
        _ => return Ok(None),
    }
    let checked = documents::check_value(&value)
        .map_err(|source| LoadError::Unreadable { path: origin.clone(), error: source })?;
    checked.result.map(Some).map_err(|violations| LoadError::Invalid { path: origin, kind: kind.as_str(), violations })
}
