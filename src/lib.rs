#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

// The layers below, each a crate (docs/ARCHITECTURE.md, "Layers"): a gateway depends on
// `holon` alone and reaches them here under the names it always had.
pub use holon_documents::{doc, files, hex, mandate, manifest, money, pattern, record, time};
#[cfg(feature = "records")]
pub use holon_engine::measure;
pub use holon_engine::{admission, attenuation, delegation, documents, engine, lookup, node, settlement, store, trust};
#[cfg(feature = "job")]
pub use holon_job as job;

pub mod catalog;
pub mod ranking;
pub mod scenario;
