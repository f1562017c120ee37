//! holon's decisions and the machinery that holds them: the layers 6 to 11 of
//! docs/ARCHITECTURE.md ("Layers") and `sync`, a crate of its own so that the compiler
//! keeps them above the typed documents (`holon-documents`, which cannot name anything
//! here) and below the command line and the sidecar (which live in the `holon` package and
//! reach this crate only through what it exports).
//!
//! - [`lookup`]: the one question decisions ask about agents;
//! - pure decisions: [`admission`], [`attenuation`], [`settlement`], `measure` (feature
//!   `records`), [`delegation`], [`trust`];
//! - [`store`]: the ledger store's rows and backends (features `sqlite`, `postgres`);
//! - [`engine`]: compiled snapshots, reservations on atomic ledgers, receipts;
//! - [`node`]: a node between an engine and a store; [`documents`]: the document pipeline;
//! - [`gateway`]: the gateway protocol every surface (the sidecar, the bindings) calls.
//!
//! A gateway depends on `holon`, which re-exports what it needs of this crate.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

// The lower layers, under the names the modules of this crate use for them.
use holon_documents::{doc, mandate, manifest, money, pattern, record, sign, time};
#[cfg(feature = "job")]
use holon_job as job;

pub mod admission;
pub mod attenuation;
pub mod delegation;
pub mod documents;
pub mod engine;
pub mod gateway;
pub mod lookup;
// The load test's recorder, for holon's binary: not promised to a gateway.
#[cfg(feature = "records")]
#[doc(hidden)]
pub mod measure;
pub mod node;
pub mod settlement;
pub mod store;
pub(crate) mod sync;
pub mod trust;
