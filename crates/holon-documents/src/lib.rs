//! holon's values and typed documents: the bottom layers of docs/ARCHITECTURE.md ("Layers",
//! 1 to 5 but `sync`), a crate of their own so that the compiler holds them below the
//! decisions: nothing here can name an admission rule, a ledger or a store.
//!
//! - values: [`money`] (exact amounts), [`pattern`] (names and their patterns), [`time`];
//!   `hex` and `files` (bounded, regular-file reads and atomic writes), support for holon's
//!   own crates and binary, not promised to a gateway;
//! - [`doc`]: YAML under limits, the document kinds and their schemas;
//! - [`sign`]: the signature primitives the documents carry (public to the engine crate's
//!   `trust`, which a gateway sees as `holon::trust::{canonical, keys, signature}`);
//! - the typed documents: [`manifest`], [`record`], [`mandate`].
//!
//! A gateway depends on `holon`, which re-exports what it needs of this crate.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

pub mod doc;
// Support for holon's own crates, binary and tests (public to them, not promised to a
// gateway: tests/public_api.txt lists them as `hidden`).
#[doc(hidden)]
pub mod files;
#[doc(hidden)]
pub mod hex;
pub mod mandate;
pub mod manifest;
pub mod money;
pub mod pattern;
pub mod record;
pub mod sign;
pub mod time;
