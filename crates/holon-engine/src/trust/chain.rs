//! A signed chain: a mandate, its parent, and so on up to a root, each link signed by a key
//! trusted for its issuer, each child naming its parent by digest (`parent: sha256:<hex>`)
//! and narrowing it (attenuation). One broken link breaks the chain.

use thiserror::Error;

use crate::lookup::AgentLookup;
use crate::mandate::{Mandate, ParentRef};
use crate::sign::canonical::Digest;
use crate::sign::keys::TrustedKeys;
use crate::sign::signature::{self, Purpose, SignatureError};

/// The most links a chain may have: a root and 16 levels of delegation (`max_depth` is at
/// most 16).
pub const CHAIN_LINKS_MAX: usize = 17;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChainError {
    #[error("{mandate}: {error}")]
    Signature { mandate: String, error: SignatureError },
    #[error(
        "{mandate}: has no canonical form to verify: it was not read from a document, or was changed in code after it was read"
    )]
    NoDigest { mandate: String },
    #[error(
        "{mandate}: names its parent `{parent}` by id; a signed chain names it by digest: write `parent: <the parent's sha256>` (`holon mandate digest PARENT` prints it) and sign again"
    )]
    ParentById { mandate: String, parent: String },
    #[error("{mandate}: its parent {parent} is not among the mandates given: pass the parent's file too")]
    ParentMissing { mandate: String, parent: Digest },
    #[error("{mandate}: widens its parent {parent}: {reasons}")]
    Widens { mandate: String, parent: String, reasons: String },
    #[error("{mandate}: the chain is longer than {CHAIN_LINKS_MAX} links")]
    TooLong { mandate: String },
}

/// Verifies `mandate` and its chain up to a root. `parent_of` finds a mandate by its
/// digest; `agents` is the catalog attenuation checks declared calls against. Returns the
/// number of links.
pub fn verify_chain<'a>(
    mandate: &'a Mandate,
    parent_of: &dyn Fn(&Digest) -> Option<&'a Mandate>,
    keys: &TrustedKeys,
    agents: &dyn AgentLookup,
) -> Result<usize, ChainError> {
    let mut link = mandate;
    for links in 1..=CHAIN_LINKS_MAX {
        let digest = link.digest_if_unchanged().ok_or_else(|| ChainError::NoDigest { mandate: link.id.clone() })?;
        let block = link
            .signature
            .as_ref()
            .ok_or_else(|| ChainError::Signature { mandate: link.id.clone(), error: SignatureError::Unsigned })?;
        signature::verify(block, Purpose::Mandate, &digest, &link.issuer, keys)
            .map_err(|error| ChainError::Signature { mandate: link.id.clone(), error })?;
        let parent = match link.parent_ref() {
            None => return Ok(links),
            Some(ParentRef::Id(id)) => {
                return Err(ChainError::ParentById { mandate: link.id.clone(), parent: id.to_owned() });
            }
            Some(ParentRef::Digest(d)) => {
                parent_of(&d).ok_or(ChainError::ParentMissing { mandate: link.id.clone(), parent: d })?
            }
        };
        let widenings = crate::attenuation::attenuate(parent, link, agents);
        if !widenings.is_empty() {
            let reasons = widenings.iter().map(|w| w.code).collect::<Vec<_>>().join(", ");
            return Err(ChainError::Widens { mandate: link.id.clone(), parent: parent.id.clone(), reasons });
        }
        link = parent;
    }
    Err(ChainError::TooLong { mandate: mandate.id.clone() })
}
