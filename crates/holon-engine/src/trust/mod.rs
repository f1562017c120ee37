//! Trust: who may grant a budget and which agent is the one its publisher built. The
//! signature primitives the typed documents carry live a layer below them (`crate::sign`,
//! re-exported here as [`canonical`], [`keys`] and [`signature`]); this module says what a
//! signature means, over the typed documents.
//!
//! - [`canonical`]: the bytes a signature covers (RFC 8785 of a document's JSON value,
//!   without its `signature` block) and their SHA-256 [`Digest`], by which a sub-mandate
//!   names its parent (`parent: sha256:<hex>`).
//! - [`keys`]: the trusted keys document (`holon_keys`: accounts to ed25519 public keys)
//!   and the private key file `holon key new` writes.
//! - [`signature`]: signing and verifying one document.
//! - [`chain`]: verifying a mandate and every parent up to its root, each link signed by a
//!   key trusted for its issuer and each child narrowing its parent.
//! - [`provenance`]: the publisher's signature over a manifest's identity, carried by the
//!   agent's record.
//! - [`revocation`]: the revocation list document and which mandates it revokes (the
//!   listed ones and every sub-mandate chained to them).
//!
//! docs/trust.md says what each rule protects against.

pub mod chain;
pub mod provenance;
pub mod revocation;

pub use crate::sign::{canonical, keys, signature};

pub use canonical::Digest;
pub use chain::{ChainError, verify_chain};
pub use keys::{PrivateKey, PublicKey, TrustedKeys};
pub use revocation::Revocations;
pub use signature::{SignatureBlock, SignatureError};
