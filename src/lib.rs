#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

pub mod admission;
pub mod attenuation;
pub mod catalog;
pub mod delegation;
pub mod doc;
pub mod documents;
pub mod engine;
pub mod files;
pub mod hex;
#[cfg(feature = "job")]
pub mod job;
pub mod lookup;
pub mod mandate;
pub mod manifest;
#[cfg(feature = "records")]
pub mod measure;
pub mod money;
pub mod node;
pub mod pattern;
pub mod ranking;
pub mod record;
pub mod scenario;
pub mod settlement;
mod sign;
pub mod store;
pub(crate) mod sync;
pub mod time;
pub mod trust;
