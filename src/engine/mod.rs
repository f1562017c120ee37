//! The embedded admission engine: the decision logic of [`crate::admission`] turned into a
//! hot path that is lock-free, allocation-free and cannot overrun a budget.
//!
//! - [`snapshot`]: mandates and agents compiled into an immutable indexed [`Snapshot`],
//!   published with one atomic swap ([`Engine::publish`]);
//! - [`ledger`]: the per-mandate atomic ledger (CAS on reserved + settled, per day);
//! - [`registry`]: the root ledgers, kept for the engine's life, and the [`LedgerKey`]
//!   a compiled mandate names its ledger by;
//! - [`slots`]: the reservation table that makes every reservation end exactly once;
//! - [`reservation`]: the `#[must_use]` guard a gateway holds while the call runs, and
//!   the delegated run of an orchestrator;
//! - [`receipt`]: one receipt per call, handed to a non-blocking sink;
//! - [`spend`]: spend state export/import (bincode).
//!
//! ```
//! use holon::engine::{Admission, Call, Engine, EngineConfig, synthetic};
//! use holon::time::Timestamp;
//!
//! let net = synthetic::network(&synthetic::Shape { agents: 4, mandates: 2, ..Default::default() }).unwrap();
//! let engine = Engine::new(EngineConfig::default());
//! engine.publish(&net.input).unwrap();
//! let call = Call::new(engine.mandate_ix("m0").unwrap(), engine.agent_ix("syn/a1").unwrap(), net.at);
//! match engine.admit(&call) {
//!     Admission::Allowed(reservation) => {
//!         let worst = reservation.worst_case();
//!         let settled = reservation.settle(worst, net.at).unwrap();
//!         assert_eq!(settled.kept, settled.worst_case);
//!     }
//!     other => panic!("expected allowed, got {other:?}"),
//! }
//! ```

pub mod ledger;
pub mod receipt;
pub mod registry;
pub mod reservation;
pub mod slots;
pub mod snapshot;
pub mod spend;
pub mod symbols;
pub mod synthetic;

use dashmap::DashMap;

use crate::admission::{self, Code, CodeSet, Verdict, budget};
use crate::money::Amount;
use crate::pattern::Principal;
use crate::sync::{self, Arc, AtomicU64, SnapshotCell};
use crate::time::Timestamp;

pub use ledger::{Ledger, LedgerLimits};
pub use receipt::{ChannelSink, End, NullSink, Receipt, ReceiptSink};
pub use registry::LedgerKey;
pub use reservation::{Reservation, ReservationError, Settled, SubCall};
pub use snapshot::{AgentIx, CompiledAgent, CompiledMandate, MandateIx, Snapshot, SnapshotInput};
pub use symbols::Names;

use ledger::DAY_NUMBER_MAX;
use registry::LedgerRegistry;
use reservation::Run;
use slots::{SlotRecord, Slots};

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
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            in_flight_max: 65_536,
            pending_max: 10_000,
            pending_ttl_s: 86_400,
            grace_s: 30,
            clock: Timestamp::now,
        }
    }
}

/// One call a gateway asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub mandate: MandateIx,
    pub agent: AgentIx,
    pub at: Timestamp,
    /// The caller's ceiling for this call, in the mandate's currency.
    pub max_cost: Option<Amount>,
    /// The call names a capability (the gateway picked the agent), not the agent.
    pub by_capability: bool,
}

impl Call {
    pub fn new(mandate: MandateIx, agent: AgentIx, at: Timestamp) -> Self {
        Call { mandate, agent, at, max_cost: None, by_capability: false }
    }
}

/// The decision: a value, never an error.
#[derive(Debug)]
#[must_use = "an allowed admission holds a reservation; dropping it releases the budget"]
pub enum Admission<'e> {
    Allowed(Reservation<'e>),
    /// Nothing is reserved while held; [`Engine::approve`] re-admits and reserves.
    Held(PendingApproval),
    Denied(Denial),
}

impl Admission<'_> {
    pub fn verdict(&self) -> Verdict {
        match self {
            Admission::Allowed(_) => Verdict::Allowed,
            Admission::Held(_) => Verdict::Held,
            Admission::Denied(_) => Verdict::Denied,
        }
    }
}

/// A call waiting for its mandate's issuer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingApproval {
    pub id: u64,
    pub worst_case: Amount,
}

/// A held call and when it expires (unix seconds, by the engine's clock).
#[derive(Debug, Clone, Copy)]
struct Pending {
    call: Call,
    expires: i64,
}

/// Every reason a call was denied. [`Engine::explain`] gives the sentences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    pub codes: CodeSet,
    pub worst_case: Amount,
    pub receipt_id: u64,
}

/// What the engine has reserved, settled, dropped, for operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineStats {
    pub generation: u64,
    pub mandates: usize,
    pub agents: usize,
    pub in_flight: usize,
    pub pending: usize,
    pub receipts_dropped: u64,
}

/// The engine. Share it by reference (or `Arc`) between the gateway's threads.
pub struct Engine {
    cell: SnapshotCell<Snapshot>,
    slots: Slots,
    names: Arc<Names>,
    /// Root ledgers, kept for the engine's life in an append-only arena, so that a
    /// reservation can hold `&'e Ledger` instead of an `Arc`.
    ledgers: LedgerRegistry,
    pending: DashMap<u64, Pending>,
    /// Places of `pending` taken (reserved before an insert): the hard bound.
    pending_places: AtomicU64,
    sink: Arc<dyn ReceiptSink>,
    config: EngineConfig,
    publish_lock: parking_lot::Mutex<u64>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

/// Inputs of one decision, for root calls and for sub-calls of a delegated run.
pub(crate) struct Ask<'a> {
    pub m: &'a CompiledMandate,
    pub a: &'a CompiledAgent,
    pub snap: &'a Snapshot,
    pub at: Timestamp,
    pub max_cost: Option<Amount>,
    pub by_capability: bool,
    pub approved: bool,
    /// Set for a sub-call: the run it belongs to and its extra checks.
    pub run: Option<(&'a Run, CodeSet)>,
    pub parent: u64,
}

impl Engine {
    /// An engine with an empty snapshot whose receipts are discarded.
    pub fn new(config: EngineConfig) -> Self {
        Engine::with_sink(config, Arc::new(NullSink))
    }

    /// An engine that hands every receipt to `sink`.
    pub fn with_sink(config: EngineConfig, sink: Arc<dyn ReceiptSink>) -> Self {
        Engine {
            cell: SnapshotCell::new(Arc::new(Snapshot::default())),
            slots: Slots::new(config.in_flight_max),
            names: Arc::new(Names::default()),
            ledgers: LedgerRegistry::default(),
            pending: DashMap::new(),
            pending_places: AtomicU64::new(0),
            sink,
            config,
            publish_lock: parking_lot::Mutex::new(0),
        }
    }

    /// The engine's names (for receipt writers).
    pub fn names(&self) -> Arc<Names> {
        Arc::clone(&self.names)
    }

    /// Compiles `input` and publishes it in one atomic swap. Calls in flight finish on the
    /// snapshot they started with; ledgers of mandates that stay are carried over. On an
    /// error nothing changes.
    pub fn publish(&self, input: &SnapshotInput) -> Result<u64, EngineError> {
        let mut generation = self.publish_lock.lock();
        let next = *generation + 1;
        let snapshot = Arc::new(snapshot::compile(input, next, &self.names, |sym| self.ledgers.root_ledger(sym))?);
        self.cell.store(Arc::clone(&snapshot));
        // The epochs of the limits are committed only now that the publish succeeded (a
        // failed one compiled them and changed nothing). Leases taken under limits this
        // publish changed are refunded, so none waits in an idle shard for its epoch to come
        // round again (calls check the epoch anyway).
        for m in snapshot.mandates() {
            m.ledger.commit_epoch(m.ledger_limits);
            m.ledger.refund_stale_leases(m.ledger_limits.epoch);
        }
        *generation = next;
        Ok(next)
    }

    /// The live snapshot (for inspection; admission loads it itself).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.cell.load())
    }

    pub fn mandate_ix(&self, id: &str) -> Option<MandateIx> {
        self.names.mandates.get(id).map(MandateIx)
    }

    pub fn agent_ix(&self, id: &str) -> Option<AgentIx> {
        self.names.agents.get(id).map(AgentIx)
    }

    /// The root ledger of a mandate, if it has one.
    pub fn ledger(&self, mandate: MandateIx) -> Option<Arc<Ledger>> {
        self.ledgers.get(mandate.0)
    }

    pub fn stats(&self) -> EngineStats {
        let snap = self.cell.load();
        EngineStats {
            generation: snap.generation,
            mandates: snap.mandate_count(),
            agents: snap.agent_count(),
            in_flight: self.slots.active(),
            pending: self.pending.len(),
            receipts_dropped: self.sink.dropped(),
        }
    }

    /// Decides one call and, when allowed, reserves its worst case.
    ///
    /// The allowed and denied paths take no lock, allocate nothing and do no I/O (an
    /// orchestrator's allowed call is the exception: deriving its sub-mandate allocates).
    #[inline]
    pub fn admit(&self, call: &Call) -> Admission<'_> {
        self.admit_inner(call, false)
    }

    fn admit_inner(&self, call: &Call, approved: bool) -> Admission<'_> {
        let snap = self.cell.load();
        let Some(m) = snap.mandate(call.mandate) else {
            return self.deny_unknown(call, Code::UnknownMandate);
        };
        let Some(a) = snap.agent(call.agent) else {
            return self.deny_unknown(call, Code::UnknownAgent);
        };
        self.decide(&Ask {
            m,
            a,
            snap: &snap,
            at: call.at,
            max_cost: call.max_cost,
            by_capability: call.by_capability,
            approved,
            run: None,
            parent: 0,
        })
    }

    fn deny_unknown(&self, call: &Call, code: Code) -> Admission<'_> {
        let codes = CodeSet::EMPTY.with(code);
        self.deny_ids(call.mandate, call.agent, 0, call.at, codes, Amount::ZERO)
    }

    /// The decision shared by root calls and sub-calls.
    pub(crate) fn decide<'e>(&'e self, ask: &Ask<'_>) -> Admission<'e> {
        let (m, a) = (ask.m, ask.a);
        let fit = snapshot::fit_codes(m, a, ask.by_capability);
        let mut codes = fit.codes.union(snapshot::window_codes(m, ask.at.unix()));
        let (wc, wc_codes) = budget::worst_case(fit.own_ceiling, fit.passthrough_cap, ask.max_cost);
        codes = codes.union(wc_codes);
        let today = u64::try_from(ask.at.utc_day()).ok().filter(|d| *d <= DAY_NUMBER_MAX);
        let Some(today) = today else {
            return self.deny(ask, codes.with(Code::InternalError), wc.worst);
        };
        // The ledger is read only where a decision needs it: a denial lists every exceeded
        // limit (a slow path), and on the allowed path the CAS in `reserve` decides, so an
        // allowed call touches the mandate's contended cache line only to reserve.
        let ledger = &m.ledger;
        let over_limits = || {
            budget::check_limits(
                &m.limits,
                wc.worst,
                Amount::from_micros(ledger.spent_micros()),
                Amount::from_micros(ledger.spent_day_micros(today)),
            )
        };
        let in_run = |codes: CodeSet| if ask.run.is_some() { delegated_codes(codes) } else { codes };
        // `per_call` depends on the call alone.
        if m.limits.per_call.is_some_and(|cap| wc.worst > cap) {
            codes.insert(Code::PerCallExceeded);
        }
        if let Some((_, extra)) = ask.run {
            codes = codes.union(extra);
        }
        if !codes.is_empty() {
            return self.deny(ask, in_run(codes.union(over_limits())), wc.worst);
        }
        if !ask.approved && budget::needs_approval(&m.limits, wc.worst) {
            // Over budget is a denial, not a question for the issuer.
            let over = over_limits();
            if !over.is_empty() {
                return self.deny(ask, in_run(over), wc.worst);
            }
            if ask.run.is_some() {
                return self.deny(ask, CodeSet::EMPTY.with(Code::ApprovalUnavailableInDelegation), wc.worst);
            }
            return self.hold(ask, wc.worst);
        }
        // The reservation holds its ledger: a root ledger by reference into the arena (no
        // reference count touched), a run's by `Arc` (the run may end first).
        let held_ledger = match m.ledger_key {
            LedgerKey::Root(ix) => match self.ledgers.root(ix) {
                Some(root) => reservation::HeldLedger::Root(root),
                None => return self.deny(ask, CodeSet::EMPTY.with(Code::InternalError), wc.worst),
            },
            LedgerKey::Run => reservation::HeldLedger::Run(Arc::clone(ledger)),
        };
        // Ids never wrap: past the last one every call is denied.
        let Some(receipt_id) = sync::next_id() else {
            return self.deny(ask, CodeSet::EMPTY.with(Code::InternalError), wc.worst);
        };
        let Some(ticket) = self.slots.claim() else {
            return self.deny(ask, CodeSet::EMPTY.with(Code::InFlightLimitReached), wc.worst);
        };
        // A call may open a new day only up to the engine's clock's day.
        let clock_day = || u64::try_from(self.now().utc_day()).unwrap_or(0);
        let charge =
            match ledger.reserve_clocked(sync::lease_shard(), wc.worst.micros(), today, m.ledger_limits, clock_day) {
                Ok(charge) => charge,
                Err(refused) => {
                    self.slots.unclaim(ticket);
                    return self.deny(ask, in_run(refused.union(over_limits())), wc.worst);
                }
            };
        let deadline = ask.at.unix().saturating_add_unsigned(a.timeout_s.saturating_add(self.config.grace_s));
        self.slots.activate(
            ticket,
            &SlotRecord {
                worst_micros: charge.worst_micros,
                deadline,
                ids: (u64::from(m.ix.0) << 32) | u64::from(a.ix.0),
                receipt_id,
                parent_id: ask.parent,
                at: ask.at.unix(),
            },
        );
        let mut reservation = Reservation::new(
            self,
            reservation::Held {
                ledger: held_ledger,
                ticket,
                charge,
                receipt_id,
                parent: ask.parent,
                mandate: m.ix,
                agent: a.ix,
                at: ask.at,
                worst_case: wc.worst,
                sub_budget: wc.sub_budget,
            },
        );
        if a.has_calls {
            // An orchestrator: derive its sub-mandate and open the run's ledger. A
            // sub-mandate that would widen its parent denies the call before it runs.
            match Run::open(self, ask.snap, m, a, wc.sub_budget) {
                Ok(run) => reservation.attach_run(run),
                Err(()) => {
                    // Never handed out: the call did not run, so its charge goes back.
                    reservation.release_quietly();
                    return self.deny(ask, CodeSet::EMPTY.with(Code::SubMandateWidens), wc.worst);
                }
            }
        }
        Admission::Allowed(reservation)
    }

    fn deny<'e>(&'e self, ask: &Ask<'_>, codes: CodeSet, worst: Amount) -> Admission<'e> {
        self.deny_ids(ask.m.ix, ask.a.ix, ask.parent, ask.at, codes, worst)
    }

    /// A denial and its receipt.
    fn deny_ids(
        &self,
        mandate: MandateIx,
        agent: AgentIx,
        parent: u64,
        at: Timestamp,
        codes: CodeSet,
        worst: Amount,
    ) -> Admission<'_> {
        // With the id space exhausted the denial's receipt has id 0 ("none").
        let denial = Denial { codes, worst_case: worst, receipt_id: sync::next_id().unwrap_or(0) };
        self.sink.submit(&Receipt {
            id: denial.receipt_id,
            parent,
            mandate,
            agent,
            decision: Verdict::Denied,
            end: End::Decided,
            codes,
            worst_case: worst,
            actual: Amount::ZERO,
            at,
            ended_at: at,
        });
        Admission::Denied(denial)
    }

    /// A slow path (it allocates): kept out of line so that `decide` stays small enough
    /// for the allowed path's helpers to be inlined into it.
    #[cold]
    #[inline(never)]
    fn hold<'e>(&'e self, ask: &Ask<'_>, worst: Amount) -> Admission<'e> {
        let full = || self.deny(ask, CodeSet::EMPTY.with(Code::InFlightLimitReached), worst);
        // A hard bound: a place is reserved by an RMW before the insert, so parallel holds
        // can never together pass `pending_max` (a `len()` check could be passed by all).
        if !self.take_pending_place() {
            // Full: drop the expired ones (a slow path, only when full), then try once more.
            self.expire_pending(self.now());
            if !self.take_pending_place() {
                return full();
            }
        }
        let Some(id) = sync::next_id() else {
            self.give_pending_place();
            return self.deny(ask, CodeSet::EMPTY.with(Code::InternalError), worst);
        };
        let call = Call {
            mandate: ask.m.ix,
            agent: ask.a.ix,
            at: ask.at,
            max_cost: ask.max_cost,
            by_capability: ask.by_capability,
        };
        // The time to live runs on the engine's clock (a call's `at` is the caller's word).
        let expires = self.now().unix().saturating_add_unsigned(self.config.pending_ttl_s);
        self.pending.insert(id, Pending { call, expires });
        self.sink.submit(&Receipt {
            id,
            parent: 0,
            mandate: ask.m.ix,
            agent: ask.a.ix,
            decision: Verdict::Held,
            end: End::Decided,
            codes: CodeSet::EMPTY.with(Code::ApprovalRequired),
            worst_case: worst,
            actual: Amount::ZERO,
            at: ask.at,
            ended_at: ask.at,
        });
        Admission::Held(PendingApproval { id, worst_case: worst })
    }

    /// Reserves one of the `pending_max` places, or says there is none.
    fn take_pending_place(&self) -> bool {
        // Relaxed: a counter bounding the map, a single-location RMW; the map's own locks
        // order the entries. The RMW reads the latest count, so the bound is exact.
        let before = self.pending_places.fetch_add(1, sync::Ordering::Relaxed);
        if before >= self.config.pending_max as u64 {
            self.give_pending_place();
            return false;
        }
        debug_assert!(before < self.config.pending_max as u64);
        true
    }

    /// Gives a place back: exactly once per place taken (by whoever removed its entry).
    fn give_pending_place(&self) {
        // Relaxed: as in `take_pending_place`.
        let before = self.pending_places.fetch_sub(1, sync::Ordering::Relaxed);
        debug_assert!(before > 0, "a pending place given back twice");
    }

    /// Removes a pending call; its place goes back only if this call removed it.
    fn remove_pending(&self, id: u64) -> Option<Pending> {
        let removed = self.pending.remove(&id).map(|(_, p)| p);
        if removed.is_some() {
            self.give_pending_place();
        }
        removed
    }

    /// Drops every held call whose time to live ([`EngineConfig::pending_ttl_s`]) has
    /// passed by `now`; approving one later fails with
    /// [`EngineError::UnknownPending`]. Returns how many. (The engine also does this when the
    /// pending table is full.)
    pub fn expire_pending(&self, now: Timestamp) -> usize {
        let expired: Vec<u64> =
            self.pending.iter().filter(|e| e.value().expires < now.unix()).map(|e| *e.key()).collect();
        expired.into_iter().filter(|id| self.remove_pending(*id).is_some()).count()
    }

    /// The issuer approves a held call: it is admitted again at `at` (every other
    /// condition is checked anew) and, if it still fits, reserved. Anyone but the
    /// mandate's issuer is refused and the call stays pending. A call held longer than
    /// `pending_ttl_s` (by the engine's clock) is gone: [`EngineError::PendingExpired`].
    pub fn approve(&self, pending: u64, approver: &Principal, at: Timestamp) -> Result<Admission<'_>, EngineError> {
        let held = *self.pending.get(&pending).ok_or(EngineError::UnknownPending(pending))?;
        if held.expires < self.now().unix() {
            self.remove_pending(pending);
            return Err(EngineError::PendingExpired(pending));
        }
        let snap = self.cell.load();
        if let Some(m) = snap.mandate(held.call.mandate) {
            admission::check_approver(&m.source, approver)?;
        }
        if self.remove_pending(pending).is_none() {
            return Err(EngineError::UnknownPending(pending));
        }
        Ok(self.admit_inner(&Call { at, ..held.call }, true))
    }

    /// The issuer (or the gateway on its behalf) refuses a held call.
    pub fn refuse(&self, pending: u64) -> Result<(), EngineError> {
        self.remove_pending(pending).map(|_| ()).ok_or(EngineError::UnknownPending(pending))
    }

    /// The decision with every reason as a sentence, from the documents and the live
    /// spend (the slow path: for logs, CLIs and people).
    pub fn explain(&self, call: &Call) -> Option<admission::Assessment> {
        let guard = self.cell.load();
        let snap: &Snapshot = &guard;
        let m = snap.mandate(call.mandate)?;
        let a = snap.agent(call.agent)?;
        let fit = admission::fit(&m.source, &a.source, a.record.as_deref(), snap);
        let today = u64::try_from(call.at.utc_day()).unwrap_or(0);
        let ctx = admission::CallContext {
            at: call.at,
            max_cost: call.max_cost,
            spent_total: Amount::from_micros(m.ledger.spent_micros()),
            spent_today: Amount::from_micros(m.ledger.spent_day_micros(today)),
            by_capability: call.by_capability,
            delegated: false,
        };
        Some(admission::assess(&m.source, &fit, &ctx))
    }

    /// Reclaims every reservation whose callee's hard timeout plus the grace has passed
    /// by `now`: each exactly once. Its slot is freed, but its **worst case stays spent**
    /// (the call may have run; the spend export counts it the same way) until its holder's
    /// late settle or release reconciles it, once. Returns how many.
    pub fn reclaim_expired(&self, now: Timestamp) -> usize {
        self.slots.reclaim_expired(now.unix(), |r| {
            self.sink.submit(&Receipt {
                id: r.receipt_id,
                parent: r.parent_id,
                mandate: MandateIx((r.ids >> 32) as u32),
                agent: AgentIx(r.ids as u32),
                decision: Verdict::Allowed,
                end: End::Expired,
                codes: CodeSet::EMPTY,
                worst_case: Amount::from_micros(r.worst_micros),
                actual: Amount::from_micros(r.worst_micros),
                at: Timestamp::from_unix(r.at),
                ended_at: now,
            });
        })
    }

    /// **Deliberately broken** (loom-tests only): the reaper before issue #10, which gave
    /// a reclaimed root reservation's worst case back to its ledger (`root`, charged on
    /// `day`) as if the call had cost nothing. The loom suite must catch it.
    #[cfg(holon_loom)]
    #[doc(hidden)]
    pub fn reclaim_expired_racy(&self, now: Timestamp, root: &Ledger, day: u64) -> usize {
        self.slots.reclaim_expired(now.unix(), |r| {
            if r.parent_id == 0 {
                root.refund(ledger::Charge::exact(r.worst_micros, Some(day)));
            }
        })
    }

    pub(crate) fn submit(&self, receipt: &Receipt) {
        self.sink.submit(receipt);
    }

    pub(crate) fn slots(&self) -> &Slots {
        &self.slots
    }

    pub(crate) fn now(&self) -> Timestamp {
        (self.config.clock)()
    }
}

/// Inside a delegated run, the run's total is the downstream cap.
fn delegated_codes(mut codes: CodeSet) -> CodeSet {
    if codes.contains(Code::TotalExceeded) {
        codes = CodeSet::from_bits(codes.bits() & !CodeSet::EMPTY.with(Code::TotalExceeded).bits())
            .with(Code::DownstreamCapExceeded);
    }
    codes
}
