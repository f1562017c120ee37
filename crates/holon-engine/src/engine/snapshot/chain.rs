//! Published sub-mandates: each one's chain of ancestors found among the mandates of one
//! publish, and held to the rules that make a call under it safe to admit
//! (docs/admission.md, "Calls under a sub-mandate"):
//!
//! - every parent is published in the same snapshot (by id or by digest, as the child
//!   names it);
//! - every link attenuates (`attenuation::attenuate`: the child only narrows its parent),
//!   checked at every publish, so a parent lowered below a child it once covered bars the
//!   child rather than letting it admit what the parent no longer would;
//! - a chain has at most [`CHAIN_MANDATES_MAX`] mandates, and a parent at most
//!   [`SUB_MANDATES_PER_PARENT_MAX`] children in one snapshot;
//! - a mandate whose ancestor is barred is barred too.
//!
//! A sub-mandate that fails any of these is barred (`sub_mandate_chain_broken`) with the
//! reason, and the rest of the publish takes effect: fail closed per mandate, as for
//! revocation and untrusted chains.

use std::collections::HashMap;

use crate::lookup::AgentLookup;
use crate::mandate::{Mandate, ParentRef};
use crate::sync::Arc;
use crate::trust::Digest;

/// The most mandates one chain may hold, its root included (a root mandate is a chain of
/// one). The standard's `delegation.max_depth` bounds useful chains well below this; the
/// bound keeps a call's reservation to a fixed number of ledgers.
pub const CHAIN_MANDATES_MAX: usize = 8;
/// The most sub-mandates one parent may have in one snapshot (direct children). Children
/// past it, in the order of the documents, are barred.
pub const SUB_MANDATES_PER_PARENT_MAX: usize = 1_024;

/// A mandate's place in its chain: its ancestors, parent first and root last (indices into
/// the publish's mandates), or why its chain does not hold.
pub(in crate::engine) type Resolved = Result<Vec<usize>, String>;

/// The chain of every mandate of one publish (`mandates[i]`'s at `i`).
pub(in crate::engine) fn resolve(mandates: &[Arc<Mandate>], agents: &dyn AgentLookup) -> Vec<Resolved> {
    let by_id: HashMap<&str, usize> = mandates.iter().enumerate().map(|(i, m)| (m.id.as_str(), i)).collect();
    // Only a digest that still describes its mandate (one edited in code keeps the form it
    // was read from, which is no longer its own).
    let by_digest: HashMap<Digest, usize> =
        mandates.iter().enumerate().filter_map(|(i, m)| m.digest_if_unchanged().map(|d| (d, i))).collect();
    let parent_of = |m: &Mandate| -> Option<Result<usize, String>> {
        let found = match m.parent_ref()? {
            ParentRef::Id(id) => by_id.get(id).copied().ok_or_else(|| format!("its parent {id} is not published")),
            ParentRef::Digest(d) => by_digest
                .get(&d)
                .copied()
                .ok_or_else(|| format!("no published mandate has the digest {d} of its parent")),
        };
        Some(found)
    };
    let mut resolved: Vec<Resolved> =
        mandates.iter().enumerate().map(|(i, _)| ancestors(i, mandates, &parent_of, agents)).collect();
    bar_extra_children(&mut resolved, mandates);
    bar_below_barred(&mut resolved, mandates);
    resolved
}

/// Walks from `mandates[start]` up to its root, checking each link.
fn ancestors(
    start: usize,
    mandates: &[Arc<Mandate>],
    parent_of: &dyn Fn(&Mandate) -> Option<Result<usize, String>>,
    agents: &dyn AgentLookup,
) -> Resolved {
    let mut chain = Vec::new();
    let mut link = start;
    loop {
        let Some(child) = mandates.get(link) else { return Err("internal: a chain left the publish".into()) };
        let Some(parent) = parent_of(child) else { return Ok(chain) };
        let parent =
            parent.map_err(|why| if link == start { why } else { format!("its ancestor {}: {why}", child.id) })?;
        if parent == start || chain.contains(&parent) {
            return Err(format!("its chain of parents comes back to {}", child.id));
        }
        if chain.len() + 2 > CHAIN_MANDATES_MAX {
            return Err(format!("its chain has more than {CHAIN_MANDATES_MAX} mandates"));
        }
        let Some(parent_doc) = mandates.get(parent) else { return Err("internal: a parent left the publish".into()) };
        let widenings = crate::attenuation::attenuate(parent_doc, child, agents);
        if !widenings.is_empty() {
            let codes: Vec<&str> = widenings.iter().map(|w| w.code).collect();
            return Err(format!("{} widens its parent {} ({})", child.id, parent_doc.id, codes.join(", ")));
        }
        chain.push(parent);
        link = parent;
    }
}

/// Children of one parent past [`SUB_MANDATES_PER_PARENT_MAX`], in document order.
fn bar_extra_children(resolved: &mut [Resolved], mandates: &[Arc<Mandate>]) {
    let mut children: HashMap<usize, usize> = HashMap::new();
    for (i, r) in resolved.iter_mut().enumerate() {
        let Ok(chain) = r else { continue };
        let Some(&parent) = chain.first() else { continue };
        let count = children.entry(parent).or_insert(0);
        *count += 1;
        if *count > SUB_MANDATES_PER_PARENT_MAX {
            let parent_id = mandates.get(parent).map_or("its parent", |m| m.id.as_str());
            let id = mandates.get(i).map_or("", |m| m.id.as_str());
            *r = Err(format!(
                "{parent_id} has more than {SUB_MANDATES_PER_PARENT_MAX} sub-mandates in this publish; {id} is past the limit"
            ));
        }
    }
}

/// A mandate under a barred ancestor is barred, naming it.
fn bar_below_barred(resolved: &mut [Resolved], mandates: &[Arc<Mandate>]) {
    let barred: Vec<bool> = resolved.iter().map(Result::is_err).collect();
    for r in resolved.iter_mut() {
        let Ok(chain) = r else { continue };
        if let Some(&bad) = chain.iter().find(|&&a| barred.get(a).copied().unwrap_or(true)) {
            let id = mandates.get(bad).map_or("an ancestor", |m| m.id.as_str());
            *r = Err(format!("its ancestor {id} admits nothing (its own chain does not hold)"));
        }
    }
}
