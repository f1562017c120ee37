//! One signature: ed25519 over a purpose tag and the SHA-256 digest of a canonical form.
//! The tag keeps a signature made for one purpose (a mandate) from verifying for another (a
//! manifest's provenance) even if the two canonical forms ever coincided.

use ed25519_dalek::Signer as _;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::canonical::{CanonicalError, Digest};
use super::keys::{KeyError, PrivateKey, PublicKey, TrustedKeys, decode, encode};
use crate::pattern::Principal;

/// What a signature is for; part of the signed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A caller mandate, by its issuer.
    Mandate,
    /// A manifest's `(id, version, source.ref, runtime.image)`, by its publisher.
    Provenance,
}

impl Purpose {
    fn tag(self) -> &'static [u8] {
        match self {
            Purpose::Mandate => b"holon mandate signature v1\n",
            Purpose::Provenance => b"holon manifest provenance v1\n",
        }
    }
}

fn message(purpose: Purpose, digest: &Digest) -> Vec<u8> {
    [purpose.tag(), &digest.0[..]].concat()
}

/// The only signature algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Algorithm {
    #[serde(rename = "ed25519")]
    Ed25519,
}

/// The `signature` block of a signed document (or of a record's provenance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureBlock {
    pub alg: Algorithm,
    /// The public key that signed; it must be trusted for the signer's account.
    pub key: PublicKey,
    /// The 64-byte signature in base64.
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SignatureError {
    #[error("not signed: sign it with `holon mandate sign FILE --key KEY`")]
    Unsigned,
    #[error("the signature block is unusable: {0}")]
    Malformed(#[from] KeyError),
    #[error(
        "the key {key} is not trusted for `{account}`: add it to the trusted keys file (`holon key new` does) or sign with a key that is there"
    )]
    KeyNotTrusted { account: Principal, key: String },
    #[error("the signature does not match the document: it was changed after signing, or signed as another document")]
    Mismatch,
    #[error(transparent)]
    Canonical(#[from] CanonicalError),
}

/// Signs `digest` for `purpose`.
pub fn sign(key: &PrivateKey, purpose: Purpose, digest: &Digest) -> SignatureBlock {
    let signature = key.key.sign(&message(purpose, digest));
    SignatureBlock { alg: Algorithm::Ed25519, key: key.public_key(), value: encode(&signature.to_bytes()) }
}

/// Verifies that `block` signs `digest` for `purpose` with a key trusted for `signer`.
/// Strict verification: no malleable or small-order signatures.
pub fn verify(
    block: &SignatureBlock,
    purpose: Purpose,
    digest: &Digest,
    signer: &Principal,
    keys: &TrustedKeys,
) -> Result<(), SignatureError> {
    let Algorithm::Ed25519 = block.alg;
    let bytes = decode::<64>(&block.value, "signature")?;
    if !keys.trusts(signer, &block.key) {
        return Err(SignatureError::KeyNotTrusted { account: signer.clone(), key: block.key.to_base64() });
    }
    let signature = ed25519_dalek::Signature::from_bytes(&bytes);
    block.key.0.verify_strict(&message(purpose, digest), &signature).map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> (PrivateKey, TrustedKeys) {
        let key = PrivateKey::from_seed(Principal::parse("alice").unwrap(), [3u8; 32]);
        let mut keys = TrustedKeys::default();
        keys.add(key.account.clone(), key.public_key());
        (key, keys)
    }

    #[test]
    fn a_signature_verifies_only_for_its_digest_purpose_signer_and_trusted_key() {
        let (key, keys) = alice();
        let d = Digest::of(b"doc");
        let block = sign(&key, Purpose::Mandate, &d);
        let alice = Principal::parse("alice").unwrap();
        assert_eq!(verify(&block, Purpose::Mandate, &d, &alice, &keys), Ok(()));
        assert_eq!(
            verify(&block, Purpose::Mandate, &Digest::of(b"other"), &alice, &keys),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(verify(&block, Purpose::Provenance, &d, &alice, &keys), Err(SignatureError::Mismatch));
        let bob = Principal::parse("bob").unwrap();
        assert!(matches!(verify(&block, Purpose::Mandate, &d, &bob, &keys), Err(SignatureError::KeyNotTrusted { .. })));
        assert!(matches!(
            verify(&block, Purpose::Mandate, &d, &alice, &TrustedKeys::default()),
            Err(SignatureError::KeyNotTrusted { .. })
        ));
    }

    #[test]
    fn hostile_signature_values_are_clear_errors() {
        let (key, keys) = alice();
        let d = Digest::of(b"doc");
        let alice = Principal::parse("alice").unwrap();
        let mut block = sign(&key, Purpose::Mandate, &d);
        block.value = "%%%".into();
        assert!(matches!(
            verify(&block, Purpose::Mandate, &d, &alice, &keys),
            Err(SignatureError::Malformed(KeyError::NotBase64(_)))
        ));
        block.value = encode(&[0u8; 63]);
        assert!(matches!(
            verify(&block, Purpose::Mandate, &d, &alice, &keys),
            Err(SignatureError::Malformed(KeyError::WrongLength { expected: 64, found: 63, .. }))
        ));
        block.value = encode(&[0u8; 64]);
        assert_eq!(verify(&block, Purpose::Mandate, &d, &alice, &keys), Err(SignatureError::Mismatch));
    }
}
