//! The revocation list (`holon_revocations`): mandates withdrawn before their `until`, by
//! id or by digest, each with the time it was decided and a reason. A revocation reaches
//! down every chain: a sub-mandate whose parent (by id or digest) is revoked is revoked,
//! and so on to any depth.
//!
//! What it does to calls is the engine's (docs/trust.md, "Revocation"): none is admitted
//! under a revoked mandate once the publish that carries the list has returned.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::doc::Violation;
use crate::mandate::{Mandate, ParentRef};
use crate::sign::canonical::Digest;
use crate::time::Timestamp;

/// Most entries in one revocation list (the schema says so too).
pub const REVOCATIONS_MAX: usize = 100_000;
/// The longest reason, in bytes.
pub const REASON_BYTES_MAX: usize = 1_024;
/// The version of the document this build reads.
pub const REVOCATIONS_VERSION: &str = "0.1";

/// The revocation list document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revocations {
    pub holon_revocations: String,
    #[serde(default)]
    pub revoked: Vec<Revoked>,
}

impl Default for Revocations {
    fn default() -> Self {
        Revocations { holon_revocations: REVOCATIONS_VERSION.into(), revoked: Vec::new() }
    }
}

/// One revoked mandate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Revoked {
    /// The mandate's id, or `sha256:<hex>` of its canonical form.
    pub mandate: String,
    /// When the revocation was decided (a record for audits: it takes effect when the list
    /// is published, whatever this says).
    pub at: Timestamp,
    pub reason: String,
}

/// The entries by what they name, each parsed once: one lookup per mandate, whatever the
/// list's length.
struct Index<'r> {
    ids: HashMap<&'r str, &'r Revoked>,
    digests: HashMap<Digest, &'r Revoked>,
}

impl<'r> Index<'r> {
    fn of(list: &'r Revocations) -> Self {
        let mut ids = HashMap::new();
        let mut digests = HashMap::new();
        for r in &list.revoked {
            match r.mandate.parse::<Digest>() {
                Ok(d) => _ = digests.entry(d).or_insert(r),
                Err(_) => _ = ids.entry(r.mandate.as_str()).or_insert(r),
            }
        }
        Index { ids, digests }
    }

    /// The entry that names `m`, or the parent `m` names (so a sub-mandate is revoked with
    /// its parent even where the parent's document is not at hand).
    fn reaching(&self, m: &Mandate) -> Option<&'r Revoked> {
        let own = self.ids.get(m.id.as_str()).or_else(|| m.digest().and_then(|d| self.digests.get(&d)));
        let parent = match m.parent_ref() {
            Some(ParentRef::Id(id)) => self.ids.get(id),
            Some(ParentRef::Digest(d)) => self.digests.get(&d),
            None => None,
        };
        own.or(parent).copied()
    }
}

impl Revocations {
    pub fn is_empty(&self) -> bool {
        self.revoked.is_empty()
    }

    /// Which of `mandates` are revoked, by id, with the entry that revoked each (its own,
    /// or the one of the nearest revoked ancestor among `mandates`, or of the parent it
    /// names).
    pub fn apply<'m>(&self, mandates: &[&'m Mandate]) -> BTreeMap<&'m str, &Revoked> {
        let mut out: BTreeMap<&str, &Revoked> = BTreeMap::new();
        if self.revoked.is_empty() {
            return out;
        }
        let index = Index::of(self);
        for m in mandates {
            if let Some(entry) = index.reaching(m) {
                out.insert(m.id.as_str(), entry);
            }
        }
        let by_id: HashMap<&str, &Mandate> = mandates.iter().map(|m| (m.id.as_str(), *m)).collect();
        let by_digest: HashMap<Digest, &Mandate> =
            mandates.iter().filter_map(|m| m.digest().map(|d| (d, *m))).collect();
        // Each round reaches one more level down; a chain is at most as long as the list.
        for _ in 0..mandates.len() {
            let mut changed = false;
            for m in mandates {
                if out.contains_key(m.id.as_str()) {
                    continue;
                }
                let parent = match m.parent_ref() {
                    Some(ParentRef::Id(id)) => by_id.get(id),
                    Some(ParentRef::Digest(d)) => by_digest.get(&d),
                    None => None,
                };
                if let Some(entry) = parent.and_then(|p| out.get(p.id.as_str()).copied()) {
                    out.insert(m.id.as_str(), entry);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        out
    }
}

/// The rules of a revocation list beyond its shape.
pub fn validate(list: &Revocations) -> Vec<Violation> {
    let mut out = Vec::new();
    if list.revoked.len() > REVOCATIONS_MAX {
        out.push(Violation::new("/revoked", format!("at most {REVOCATIONS_MAX} entries in one list")));
    }
    for (i, entry) in list.revoked.iter().enumerate() {
        if entry.reason.trim().is_empty() {
            out.push(Violation::new(format!("/revoked/{i}/reason"), "say why it is revoked: auditors read this"));
        }
        if entry.reason.len() > REASON_BYTES_MAX {
            out.push(Violation::new(format!("/revoked/{i}/reason"), format!("at most {REASON_BYTES_MAX} bytes")));
        }
        if entry.mandate.starts_with("sha256:") && entry.mandate.parse::<Digest>().is_err() {
            out.push(Violation::new(format!("/revoked/{i}/mandate"), "write sha256: and 64 lower-case hex digits"));
        }
    }
    out
}

impl Revocations {
    /// The entry that revokes `m`, itself or through the parent it names (one mandate
    /// without its chain: the CLI's view; the engine applies [`Revocations::apply`] to the
    /// whole snapshot).
    pub fn revoking(&self, m: &Mandate) -> Option<&Revoked> {
        Index::of(self).reaching(m)
    }
}
