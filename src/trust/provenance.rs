//! Manifest provenance: the publisher (the account of the agent's namespace) signs the
//! agent's identity, `(id, version, source.ref, runtime.image)`, and the agent's record
//! carries the signature. A manifest edited after publishing (another image, another
//! source) no longer matches it.

use serde::{Deserialize, Serialize};
use serde_json::json;
use thiserror::Error;

use super::canonical::{self, CanonicalError, Digest};
use super::keys::{PrivateKey, TrustedKeys};
use super::signature::{self, Purpose, SignatureBlock, SignatureError};
use crate::manifest::Manifest;
use crate::pattern::Principal;
use crate::record::AgentRecord;

/// A record's `provenance` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub publisher: Principal,
    pub signature: SignatureBlock,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProvenanceError {
    #[error("{agent} has no record with a `provenance` signature from its publisher")]
    Missing { agent: String },
    #[error(
        "{agent}: the provenance names publisher `{publisher}`, but only the account `{namespace}` publishes in that namespace"
    )]
    WrongPublisher { agent: String, publisher: String, namespace: String },
    #[error("{agent}: provenance: {error}")]
    Signature { agent: String, error: SignatureError },
}

/// The digest of the identity the publisher signs.
pub fn identity_digest(m: &Manifest) -> Result<Digest, CanonicalError> {
    let identity = json!({
        "id": m.id.as_str(),
        "version": m.version.to_string(),
        "source_ref": m.source.git_ref,
        "runtime_image": m.runtime.image,
    });
    canonical::digest(&identity)
}

/// The provenance block `key` (the publisher's) gives `m`.
pub fn sign(m: &Manifest, key: &PrivateKey) -> Result<Provenance, CanonicalError> {
    let digest = identity_digest(m)?;
    Ok(Provenance { publisher: key.account.clone(), signature: signature::sign(key, Purpose::Provenance, &digest) })
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
    let digest = identity_digest(m).map_err(|e| ProvenanceError::Signature { agent: agent(), error: e.into() })?;
    signature::verify(&p.signature, Purpose::Provenance, &digest, &p.publisher, keys)
        .map_err(|error| ProvenanceError::Signature { agent: agent(), error })
}
