//! Job mandates (docs/job.md and docs/rulings.md "Job mandates"; `holon job`): the same idea as the caller
//! mandate — a human-approved allow-list an agent cannot widen by itself — for the tools a
//! scheduled agent job uses.
//!
//! - [`call`]: a tool call from JSON (plain or a runtime's hook payload) and its aspects;
//! - [`shell`]: command lines, lexed and reduced to command rules;
//! - [`propose`]: observations compiled into the mandate YAML, deterministically;
//! - [`mandate`]: the document, its evidence, and the compiled [`mandate::Checker`];
//! - [`state`]: the state directory (atomic writes, a lock), versions, approvals,
//!   drift, write budgets, and the fail-closed decision;
//! - `lines`, `redact`, `leash` (support for holon's command line, not promised): bounded
//!   line reading (the observation log, `observe`'s input); secrets masked before anything
//!   is shown or stored; the Leash Line status view;
//! - [`sandbox`]: the kernel sandbox of `holon job exec` (Landlock) compiled from the
//!   approved mandate.
//!
//! A crate of its own (docs/ARCHITECTURE.md, "Layers", layer 4): it uses only the values
//! and the document layer of `holon-documents`, so the compiler keeps the job guard apart
//! from the admission engine. A gateway reaches it as `holon::job` (feature `job`).
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

// The lower layers, under the names the modules of this crate use for them.
use holon_documents::{doc, files, hex, time};

pub mod call;
// The command line's views and input reading (`leash`, `lines`, `redact`): public to
// holon's binary and tests, not promised to a gateway.
#[doc(hidden)]
pub mod leash;
#[doc(hidden)]
pub mod lines;
pub mod mandate;
pub mod propose;
#[doc(hidden)]
pub mod redact;
pub mod sandbox;
pub mod shell;
pub mod state;

pub use call::{Aspect, Family, ToolCall};
pub use mandate::{Checker, JobMandate};
