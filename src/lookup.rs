//! The lookup of a declared downstream agent: the one question the decision layers
//! (admission, attenuation, delegation, settlement, the engine's snapshot) ask about agents
//! they do not hold. The directory loader (`catalog`) and the engine's snapshot answer it;
//! the decision layers depend on this trait, not on the loader.

use crate::manifest::Manifest;
use crate::pattern::AgentId;

/// Finds the manifest of a declared downstream agent.
pub trait AgentLookup {
    /// The newest known manifest of `id` whose version satisfies `range`
    /// ([`newest_in_range`]: every implementation means exactly this).
    fn find(&self, id: &AgentId, range: &semver::VersionReq) -> Option<&Manifest>;
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
