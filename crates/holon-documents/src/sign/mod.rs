//! The signature primitives the typed documents carry, knowing no typed document: what a
//! signature covers and how one is made and checked. What a signature *means* (a chain of
//! mandates, a manifest's provenance, a revocation) is `trust`, a layer above the documents.
//!
//! - [`canonical`]: the bytes a signature covers (RFC 8785 of a document's JSON value,
//!   without its `signature` block) and their SHA-256 [`canonical::Digest`], by which a
//!   sub-mandate names its parent (`parent: sha256:<hex>`).
//! - [`keys`]: the trusted keys document (`holon_keys`: accounts to ed25519 public keys)
//!   and the private key file `holon key new` writes.
//! - [`signature`]: signing and verifying one document's digest.
//!
//! The library's public paths for these are `holon::trust::{canonical, keys, signature}`.

pub mod canonical;
pub mod keys;
pub mod signature;
