//! Manifest provenance: the publisher (the account of the agent's namespace) signs the
//! canonical form of the whole manifest, and the agent's record carries the signature. The
//! identity the manifest document names, `(id, version, source.ref, runtime.image)`, is
//! part of it, and so is everything else admission reads (runtime and endpoint, pricing,
//! capabilities, data policy, declared calls): a manifest edited after publishing no
//! longer matches.

use thiserror::Error;

use crate::manifest::Manifest;
use crate::record::AgentRecord;
pub use crate::record::Provenance;
use crate::sign::canonical::Digest;
use crate::sign::keys::{PrivateKey, TrustedKeys};
use crate::sign::signature::{self, Purpose, SignatureError};

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProvenanceError {
    #[error("{agent} has no record with a `provenance` signature from its publisher")]
    Missing { agent: String },
    #[error(
        "{agent}: the provenance names publisher `{publisher}`, but only the account `{namespace}` publishes in that namespace"
    )]
    WrongPublisher { agent: String, publisher: String, namespace: String },
    #[error(
        "{agent}: the manifest was not read from a document, or was changed in code since: its provenance cannot be checked"
    )]
    NotRead { agent: String },
    #[error("{agent}: provenance: {error}")]
    Signature { agent: String, error: SignatureError },
}

/// The digest the publisher signs: the manifest's canonical form, if it was read from a
/// document and not changed since.
pub fn manifest_digest(m: &Manifest) -> Option<Digest> {
    m.digest_if_unchanged()
}

/// The provenance block `key` (the publisher's) gives `m`; `None` for a manifest not read
/// from a document (it has no canonical form to sign).
pub fn sign(m: &Manifest, key: &PrivateKey) -> Option<Provenance> {
    let digest = manifest_digest(m)?;
    Some(Provenance { publisher: key.account.clone(), signature: signature::sign(key, Purpose::Provenance, &digest) })
}

/// Verifies the publisher's signature over `m`'s identity in `record`.
pub fn verify(m: &Manifest, record: Option<&AgentRecord>, keys: &TrustedKeys) -> Result<(), ProvenanceError> {
    let agent = || format!("{}@{}", m.id, m.version);
    let p = record.and_then(|r| r.provenance.as_ref()).ok_or_else(|| ProvenanceError::Missing { agent: agent() })?;
    let namespace = m.id.namespace();
    if p.publisher.as_str() != namespace {
        return Err(ProvenanceError::WrongPublisher {
            agent: agent(),
            publisher: p.publisher.to_string(),
            namespace: namespace.to_owned(),
        });
    }
    let digest = manifest_digest(m).ok_or_else(|| ProvenanceError::NotRead { agent: agent() })?;
    signature::verify(&p.signature, Purpose::Provenance, &digest, &p.publisher, keys)
        .map_err(|error| ProvenanceError::Signature { agent: agent(), error })
}
