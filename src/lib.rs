#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

// The layers below, each a crate (docs/ARCHITECTURE.md, "Layers"): a gateway depends on
// `holon` alone and reaches them here under the names it always had.
pub use holon_documents::{doc, mandate, manifest, money, pattern, record, time};
pub use holon_engine::{
    admission, attenuation, delegation, documents, engine, gateway, lookup, node, settlement, store, trust,
};
#[cfg(feature = "job")]
pub use holon_job as job;

// Support for holon's own binary and tests: public to them, not promised to a gateway
// (tests/public_api.txt lists these as `hidden`; docs/ARCHITECTURE.md, "The facade").
#[doc(hidden)]
pub use holon_documents::{files, hex};
#[cfg(feature = "records")]
#[doc(hidden)]
pub use holon_engine::measure;

pub mod catalog;
pub mod ranking;
// The demo's bundled scenario (support for the binary, like the re-exports above).
#[doc(hidden)]
pub mod scenario;
