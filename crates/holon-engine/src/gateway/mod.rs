//! The gateway protocol: what every surface does around the engine and its node, written
//! once (docs/ARCHITECTURE.md, "Which layer owns which rule"). `holon serve` (HTTP/JSON and
//! Envoy's ext_authz), the Python binding and `holon_litellm` translate their wire formats
//! and call these; none of them holds a rule, a retry loop or a constant of its own.
//!
//! - [`wait`]: the one lease wait ([`LEASE_WAIT_MS`]) and what it waits for;
//! - [`words`]: the settlement outcomes' words, the bound on a reported latency, the
//!   reservation id's one written form, an approver's account in its two written forms;
//! - [`keys`]: idempotency keys as a gateway uses them: which answers are kept for a
//!   retry, which are let go, and the rule that a replay never authorises a call whose
//!   reservation has ended;
//! - [`calls`]: a call as the engine judges it (the capability check, a held call rebuilt
//!   with its `max_cost` and capability for its approval and its explanation), and the
//!   spend view of a mandate (no side effect on any ledger).

pub mod calls;
pub mod keys;
pub mod wait;
pub mod words;

pub use calls::{NotTheIssuer, SpendView, capability_offered, check_approver, held_call, spend_view};
pub use keys::{
    IdempotencyKeyError, KEEP_S, KEYS_MAX, REPLAY_ENDED, Replay, keep_answer, key, replay_ended_sentence,
    replay_of_allowed,
};
pub use wait::{
    LEASE_WAIT_MS, find_held, find_held_blocking, lease_wait, lease_wait_blocking, only_for_want_of_lease_or_store,
};
pub use words::{LATENCY_MS_MAX, WordError, account, latency_ms, outcome, reservation_id, unknown_name};
