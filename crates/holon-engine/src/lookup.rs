//! The lookup of a declared downstream agent: the one question the decision layers
//! (admission, attenuation, delegation, settlement, the engine's snapshot) ask about agents
//! they do not hold. The directory loader (`catalog`) and the engine's snapshot answer it;
//! the decision layers depend on this trait, not on the loader. Beside it, the one rule
//! for which record applies to a manifest ([`record_for`]).

use crate::manifest::Manifest;
use crate::pattern::AgentId;
use crate::record::AgentRecord;

/// Finds the manifest of a declared downstream agent.
pub trait AgentLookup {
    /// The newest known manifest of `id` whose version satisfies `range`
    /// ([`newest_in_range`]: every implementation means exactly this).
    fn find(&self, id: &AgentId, range: &semver::VersionReq) -> Option<&Manifest>;
}

/// Every agent a capability search may offer, with the record that applies to it
/// ([`record_for`]'s rule): what ranking reads, asked of whichever holds the agents (the
/// CLI's directory loader, `catalog`) without naming it.
pub trait AgentCandidates: AgentLookup {
    fn candidates(&self) -> impl Iterator<Item = (&Manifest, Option<&AgentRecord>)>;
}

/// The one meaning of "the manifest of a declared agent", shared by the CLI's catalog and
/// the engine's snapshot: among `candidates`, the newest version of `id` that satisfies
/// `range` (not the newest version, then filtered: with 1.4 and 2.0 known, `^1` finds 1.4).
pub fn newest_in_range<'a>(
    candidates: impl IntoIterator<Item = &'a Manifest>,
    id: &AgentId,
    range: &semver::VersionReq,
) -> Option<&'a Manifest> {
    candidates.into_iter().filter(|m| &m.id == id && range.matches(&m.version)).max_by(|a, b| a.version.cmp(&b.version))
}

/// A lookup that knows no agent (fail closed: undeclarable agents stay unmatched).
pub struct NoAgents;
impl AgentLookup for NoAgents {
    fn find(&self, _: &AgentId, _: &semver::VersionReq) -> Option<&Manifest> {
        None
    }
}

/// Where a candidate record was found: among records of the same rank (naming the
/// manifest's version, or none), the first origin in this order wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordOrigin {
    /// A records directory given explicitly (`--records DIR`: measured records).
    RecordsDir,
    /// In the manifest's own directory (published with it).
    Beside,
    /// Anywhere else among the documents.
    Elsewhere,
}

impl RecordOrigin {
    /// A record found in the tree of documents: beside the manifest at `manifest_path`, or
    /// elsewhere.
    pub fn of(record_path: &std::path::Path, manifest_path: &std::path::Path) -> RecordOrigin {
        if record_path.parent() == manifest_path.parent() { RecordOrigin::Beside } else { RecordOrigin::Elsewhere }
    }
}

/// Whether `record` may describe `manifest`: the same agent id, and the manifest's version
/// or no version at all. A record of another agent never applies, whatever its version.
pub fn record_applies(record: &AgentRecord, manifest: &Manifest) -> bool {
    record.agent == manifest.id && record.version.as_ref().is_none_or(|v| v == &manifest.version)
}

/// The one rule for which record applies to a manifest, used by the catalog, the engine's
/// compile, `holon serve` and `holon validate` alike: among the candidates that apply
/// ([`record_applies`]), a record naming the manifest's version before one that names
/// none; then by origin ([`RecordOrigin`]); then the first given.
pub fn record_for<'a>(
    manifest: &Manifest,
    candidates: impl IntoIterator<Item = (RecordOrigin, &'a AgentRecord)>,
) -> Option<&'a AgentRecord> {
    candidates
        .into_iter()
        .filter(|(_, r)| record_applies(r, manifest))
        .min_by_key(|(origin, r)| (r.version.is_none(), *origin))
        .map(|(_, r)| r)
}
