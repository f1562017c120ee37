//! What an engine is configured with, and why it refuses an operation.

use crate::admission;
use crate::time::Timestamp;

/// Why the engine refused an operation (not a call: calls are denied, never errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("mandate `{mandate}` cannot be compiled: {message}")]
    Compile { mandate: String, message: String },
    #[error(
        "more than {max} {kind} names; the engine keeps names for its whole life, so restart it to forget old ones"
    )]
    TooManyNames { kind: &'static str, max: usize },
    #[error("spend state cannot be read: {0}")]
    SpendDecode(String),
    #[error("spend state is invalid: {0}; nothing was imported")]
    SpendInvalid(String),
    #[error("spend state is corrupted: its SHA-256 digest does not match its contents; nothing was imported")]
    SpendCorrupt,
    #[error("no pending approval {0}: it was approved, refused or never held")]
    UnknownPending(u64),
    #[error(
        "pending approval {0} expired: it waited longer than the engine's pending_ttl_s; the call must be made again"
    )]
    PendingExpired(u64),
    #[error(transparent)]
    Approval(#[from] admission::ApprovalError),
    #[error(
        "held call {0} is on a store-backed engine: approve or refuse it through its node (`Node::approve`), which takes it from the store once, on any node"
    )]
    ApproveThroughNode(u64),
}

/// Limits and knobs, each with a default that suits a gateway.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// Reservations in flight at once (the reservation table's size).
    pub in_flight_max: usize,
    /// Held calls waiting for approval at once (a hard bound: the next is denied
    /// `in_flight_limit_reached`).
    pub pending_max: usize,
    /// Seconds a held call waits for approval (by the engine's clock) before it expires.
    pub pending_ttl_s: u64,
    /// Seconds after the callee's `timeout_s` before a reservation may be reclaimed.
    pub grace_s: u64,
    /// The clock for what has no call time (a dropped reservation's receipt). Injected so
    /// tests are deterministic.
    pub clock: fn() -> Timestamp,
    /// Root ledgers admit only what a ledger store granted this node in leases
    /// ([`crate::node::Node`] grants them; docs/store.md). Without a node running, a
    /// store-backed engine denies every call that needs budget (`lease_pending`).
    pub store_backed: bool,
    /// Every published mandate must carry a signature chain that holds (docs/trust.md),
    /// else it is barred (`mandate_untrusted`, and listed by `Snapshot::untrusted`) while
    /// the rest of the publish takes effect; agents without a valid provenance signature
    /// are denied `provenance_unverified`.
    pub require_signatures: bool,
    /// Shadow mode: every call is decided as usual and its receipt says so, but a call
    /// the engine would deny or hold is allowed on a shadow reservation (its settlement
    /// goes into the mandate's shadow tally, never into the ledgers, which stay exact;
    /// `Reservation::shadow` says what the decision was). For a staged rollout: see what
    /// would be denied before denying it.
    pub shadow: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            in_flight_max: 65_536,
            pending_max: 10_000,
            pending_ttl_s: 86_400,
            grace_s: 30,
            clock: Timestamp::now,
            store_backed: false,
            require_signatures: false,
            shadow: false,
        }
    }
}
