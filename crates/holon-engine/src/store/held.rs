//! Held calls in the store: a call above its mandate's approval threshold waits here, so
//! that the mandate's issuer can approve it on **any** node (docs/store.md, "Held calls").
//! A held call is taken out of the store once, atomically ([`LedgerStore::take_held`]):
//! whichever node takes it admits it; nobody else can. It expires at `expires_unix`.
//!
//! [`LedgerStore::take_held`]: super::LedgerStore::take_held

use super::{MANDATE_ID_BYTES_MAX, StoreError, check_name};

/// Longest held-call id (`NODE:RUN:NUMBER`), in bytes.
pub const HELD_ID_BYTES_MAX: usize = 192;
/// Longest agent id the store keeps with a held call, in bytes.
pub const AGENT_ID_BYTES_MAX: usize = 512;

/// A call waiting for its mandate's issuer, as the store keeps it: what a node needs to
/// admit it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCall {
    /// Unique in the store: the holding node's name, its run and its local pending id
    /// (`NODE:RUN:ID`).
    pub id: String,
    pub mandate: String,
    pub agent: String,
    /// The call's time (unix seconds) and the caller's ceiling, in the mandate's currency.
    pub at_unix: i64,
    pub max_cost_micros: Option<u64>,
    pub by_capability: bool,
    /// The worst case when it was held (for listings; approval computes it anew).
    pub worst_micros: u64,
    pub expires_unix: i64,
}

impl HeldCall {
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        check_name("a held call's id", &self.id, HELD_ID_BYTES_MAX)?;
        check_name("a mandate id", &self.mandate, MANDATE_ID_BYTES_MAX)?;
        check_name("an agent id", &self.agent, AGENT_ID_BYTES_MAX)
    }
}
