//! Reason codes: the stable, snake_case API users switch on. A set of them fits one `u64`,
//! so the hot path can report every failing condition without allocating.

use std::fmt;

use serde::Serialize;

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $bit:literal => $text:literal,)*) => {
        /// Why a call is denied (or, for `ApprovalRequired`, held).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Code { $($(#[$doc])* $name = $bit,)* }

        impl Code {
            pub const ALL: &'static [Code] = &[$(Code::$name,)*];
            pub const fn as_str(self) -> &'static str {
                match self { $(Code::$name => $text,)* }
            }
        }
    };
}

codes! {
    MandateNotYetValid = 0 => "mandate_not_yet_valid",
    MandateExpired = 1 => "mandate_expired",
    AgentDenied = 2 => "agent_denied",
    NotAllowed = 3 => "not_allowed",
    PublishedNotAllowed = 4 => "published_not_allowed",
    DelegationDepthExceeded = 5 => "delegation_depth_exceeded",
    DownstreamNotAllowed = 6 => "downstream_not_allowed",
    ChargeOnSuccessRequired = 7 => "charge_on_success_required",
    RuntimeNotAllowed = 8 => "runtime_not_allowed",
    RetentionTooLong = 9 => "retention_too_long",
    TrainingUseNotAllowed = 10 => "training_use_not_allowed",
    EgressNotAllowed = 11 => "egress_not_allowed",
    RecordMissing = 12 => "record_missing",
    SuccessRateBelowMin = 13 => "success_rate_below_min",
    LatencyP95AboveMax = 14 => "latency_p95_above_max",
    RunsBelowMin = 15 => "runs_below_min",
    EvalScoreBelowMin = 16 => "eval_score_below_min",
    CurrencyWithoutRate = 17 => "currency_without_rate",
    MaxCostBelowPrice = 18 => "max_cost_below_price",
    PerCallExceeded = 19 => "per_call_exceeded",
    TotalExceeded = 20 => "total_exceeded",
    PerDayExceeded = 21 => "per_day_exceeded",
    ApprovalUnavailableInDelegation = 22 => "approval_unavailable_in_delegation",
    /// Money arithmetic overflowed: the engine cannot decide, so it denies.
    AmountOverflow = 23 => "amount_overflow",
    /// Inside a delegated run: the sub-call is not among the orchestrator's declared calls.
    CallNotDeclared = 24 => "call_not_declared",
    /// Inside a delegated run: the sub-call's worst case is above its declared `max_cost`.
    CallMaxCostExceeded = 25 => "call_max_cost_exceeded",
    /// Inside a delegated run: the sub-call would exceed what is left of the downstream cap.
    DownstreamCapExceeded = 26 => "downstream_cap_exceeded",
    /// The engine could not decide (internal fault, unknown id): fail closed.
    InternalError = 27 => "internal_error",
    /// The derived sub-mandate of an orchestrator would widen its parent: the call is
    /// denied before anything runs.
    SubMandateWidens = 28 => "sub_mandate_widens",
    /// The engine: the call names a mandate the live snapshot does not hold.
    UnknownMandate = 29 => "unknown_mandate",
    /// The engine: the call names an agent the live snapshot does not hold.
    UnknownAgent = 30 => "unknown_agent",
    /// Held, not denied: the worst case is above `approval.above`.
    ApprovalRequired = 31 => "approval_required",
    /// The engine: every reservation slot (or every pending-approval place) is taken.
    /// A bound, not a budget decision: retry when calls in flight have finished.
    InFlightLimitReached = 32 => "in_flight_limit_reached",
    /// The engine: a sub-call of a delegated run whose orchestrator's reservation has
    /// ended (reclaimed after its deadline): the run admits nothing more.
    ParentReservationEnded = 33 => "parent_reservation_ended",
    /// A store-backed node: the call does not fit the budget this node holds in leases,
    /// and the store may have more; a refill is on its way. Retry shortly.
    LeasePending = 34 => "lease_pending",
    /// A store-backed node: the call does not fit the budget this node holds in leases, and
    /// the ledger store cannot be reached to grant more (fail closed).
    StoreUnavailable = 35 => "store_unavailable",
    /// The mandate, or a mandate it is chained to, is on the published revocation list.
    MandateRevoked = 36 => "mandate_revoked",
    /// Signatures are required and the agent's record carries no valid signature of its
    /// publisher over the manifest's identity.
    ProvenanceUnverified = 37 => "provenance_unverified",
    /// Signatures are required and the mandate's chain does not hold (unsigned, a bad
    /// signature, a key not trusted for its issuer, a parent missing or widened): it is
    /// published so that its revocation or removal still takes effect, and admits nothing.
    MandateUntrusted = 38 => "mandate_untrusted",
    /// The mandate is a published sub-mandate whose chain does not hold (a parent not
    /// published, a link that widens its parent, a chain too long, a parent with too many
    /// children, an ancestor that admits nothing): it admits nothing, and the publish says
    /// why.
    SubMandateChainBroken = 39 => "sub_mandate_chain_broken",
    /// A gateway: a retry with an idempotency key whose first answer allowed a call, after
    /// that call's reservation ended (settled, released, reclaimed) or on a node where it is
    /// not open. A replay never authorises a call; nothing was reserved.
    ReplayReservationEnded = 40 => "replay_reservation_ended",
    /// A store-backed engine whose node was stopped (or never started): nothing supplies
    /// it with budget from the store, so it admits nothing. Not a retry: start a node.
    NodeStopped = 41 => "node_stopped",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A set of codes in one word: allocation-free "every failing condition".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CodeSet(u64);

impl CodeSet {
    pub const EMPTY: CodeSet = CodeSet(0);
    pub const fn bits(self) -> u64 {
        self.0
    }
    pub const fn from_bits(bits: u64) -> Self {
        CodeSet(bits)
    }
    pub fn insert(&mut self, code: Code) {
        self.0 |= 1u64 << (code as u8);
    }
    pub const fn with(self, code: Code) -> Self {
        CodeSet(self.0 | 1u64 << (code as u8))
    }
    pub const fn contains(self, code: Code) -> bool {
        self.0 & (1u64 << (code as u8)) != 0
    }
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub const fn union(self, other: CodeSet) -> Self {
        CodeSet(self.0 | other.0)
    }
    /// Codes in a stable order (their numbers).
    pub fn iter(self) -> impl Iterator<Item = Code> {
        Code::ALL.iter().copied().filter(move |c| self.contains(*c))
    }
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }
    /// Whether these are a denial's codes only for want of a lease, of the store or of a
    /// running node: nothing was decided about the call itself, so the same key may ask
    /// again and a held call stays held (the one rule; `holon::gateway` and the node read
    /// it).
    pub fn only_for_want_of_lease_or_store(self) -> bool {
        let want = CodeSet::EMPTY.with(Code::LeasePending).with(Code::StoreUnavailable).with(Code::NodeStopped);
        !self.is_empty() && self.0 & !want.0 == 0
    }
}

/// A code with the sentence that explains it for this call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    pub code: Code,
    pub message: String,
}

impl Reason {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Reason { code, message: message.into() }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_fit_a_word() {
        let mut seen = std::collections::HashSet::new();
        for c in Code::ALL {
            assert!((*c as u8) < 64);
            assert!(seen.insert(format!("bit {}", *c as u8)));
            assert!(seen.insert(c.as_str().to_owned()));
            assert!(c.as_str().bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
        }
        let set = CodeSet::EMPTY.with(Code::TotalExceeded).with(Code::AgentDenied);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![Code::AgentDenied, Code::TotalExceeded]);
        assert_eq!(set.len(), 2);
    }
}
