//! The embedded admission engine: the admission rules, compiled, on a hot path that is
//! lock-free, allocation-free and cannot overrun a budget.
//!
//! - [`Engine::publish`]: mandates and agents compiled into an immutable indexed
//!   [`Snapshot`], published with one atomic swap;
//! - [`Engine::admit`]: the pure judgement of a call, then its effects: the worst case
//!   reserved on the mandate's atomic ledger, a place in the reservation table that makes
//!   every reservation end exactly once;
//! - [`Reservation`]: the `#[must_use]` guard a gateway holds while the call runs, and
//!   the delegated run of an orchestrator ([`Reservation::sub_call`]);
//! - [`Assessor`]: the same rules for one mandate outside a running engine, explained;
//! - [`receipt`]: one receipt per call, handed to a non-blocking sink;
//! - [`spend`]: spend state export/import (bincode).
//!
//! docs/engine.md describes the inside (snapshot, ledger words, leases, slots, registry).
//!
//! ```
//! use holon_engine::engine::{Admission, Call, Engine, EngineConfig, synthetic};
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

// The public face is what this module re-exports below plus `receipt`, `spend` and
// `synthetic`; the rest is the engine's inside. What the loom models, the stress tests and
// the benches must reach of the inside is in `internals`, hidden from the documentation.
mod assess;
mod chain;
mod config;
mod explain;
mod held;
mod judge;
mod ledger;
mod node_link;
mod pending;
mod reasons;
pub mod receipt;
mod reclaim;
mod registry;
mod reservation;
mod run;
mod shadow;
mod slots;
mod snapshot;
pub mod spend;
mod sub_call;
mod symbols;
// Generated networks for the load test and the benches: not promised to a gateway.
#[doc(hidden)]
pub mod synthetic;

/// The engine's inside, for the node (in this crate) and, under the `internals` feature,
/// for holon's own loom models, stress tests and benches: never the public API.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub(crate) mod inside {
    #[cfg(feature = "internals")]
    pub use super::ledger::{ALLOWANCE_CAP_MICROS, AllowanceError, AuditError, Charge, LedgerLimits};
    pub use super::ledger::{Ledger, StoreState};
    #[cfg(holon_loom)]
    pub use crate::sync::pin_lease_shard;
}

/// The engine's inside (the ledger and its words) for holon's own loom models, stress
/// tests and benches, behind the `internals` feature that no gateway turns on: not an API,
/// and it changes without notice.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub use super::inside::*;
}

use dashmap::DashMap;

use crate::admission::{Code, CodeSet, Verdict};
use crate::money::Amount;
use crate::sync::{self, Arc, AtomicU64, SnapshotCell};
use crate::time::Timestamp;

pub use assess::{Assessor, Callee, cheapest_implementer};
pub use config::{EngineConfig, EngineError};
pub use held::Shadowed;
pub use judge::Spent;
use ledger::Ledger;
use pending::Pending;
pub use pending::{HeldLocally, PendingApproval};
pub use receipt::{BatchSink, ChannelSink, End, NullSink, Outcome, Receipt, ReceiptSink, RunReport};
pub use reservation::{Reservation, ReservationError, Settled};
pub use run::{RUN_TEMPLATES_MAX, RUNS_POOLED_MAX};
pub use shadow::{SHADOW_UNKNOWN_TIMEOUT_S, ShadowTally};
pub use snapshot::{
    AgentIx, CHAIN_MANDATES_MAX, CompiledAgent, CompiledMandate, MandateIx, SUB_MANDATES_PER_PARENT_MAX, Snapshot,
    SnapshotInput,
};
pub use sub_call::SubCall;
pub use symbols::Names;

use registry::{LedgerKey, LedgerRegistry};
use run::Run;
use slots::{SlotRecord, Slots};

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

/// Every reason a call was denied. [`Engine::explain_denial`] gives the sentences, from
/// the spend the decision read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denial {
    pub codes: CodeSet,
    pub worst_case: Amount,
    pub receipt_id: u64,
    /// The spend the decision read (zero where it read none: an unknown id, a full table).
    pub spent: Spent,
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
    /// Shadow mode's tallies, one ledger per root mandate, made on a mandate's first shadow
    /// reservation and kept for the engine's life (never a ledger the node supplies).
    shadow_ledgers: DashMap<u32, Arc<Ledger>>,
    /// Whether a node supplies this engine (at most one: two would flush its settlements
    /// twice).
    node_attached: parking_lot::Mutex<bool>,
    /// Ended delegated runs, for the next orchestrator's call (`run.rs`).
    runs: run::RunPool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

/// Inputs of one decision, for root calls and for sub-calls of a delegated run.
pub(crate) struct Ask<'a> {
    pub mandate: &'a CompiledMandate,
    pub agent: &'a CompiledAgent,
    /// The snapshot both were loaded from (an orchestrator's run resolves its sub-mandate
    /// against it).
    pub snapshot: &'a Snapshot,
    /// The call's facts (with a sub-call's run checks in `sub_call`).
    pub call: judge::CallFacts,
    /// The receipt id of the orchestrator's call for a sub-call, 0 for a root call.
    pub parent_receipt: u64,
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
            ledgers: LedgerRegistry::new(config.store_backed),
            pending: DashMap::new(),
            pending_places: AtomicU64::new(0),
            sink,
            config,
            publish_lock: parking_lot::Mutex::new(0),
            shadow_ledgers: DashMap::new(),
            node_attached: parking_lot::Mutex::new(false),
            runs: run::RunPool::new(),
        }
    }

    /// What the engine was configured with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
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
        let snapshot = Arc::new(snapshot::compile(input, next, self.config.require_signatures, &self.names, |sym| {
            self.ledgers.root_ledger(sym)
        })?);
        self.cell.store(Arc::clone(&snapshot));
        // The epochs of the limits are committed only now that the publish succeeded (a
        // failed one compiled them and changed nothing). Leases taken under limits this
        // publish changed are refunded, so none waits in an idle shard for its epoch to come
        // round again (calls check the epoch anyway).
        for m in snapshot.mandates() {
            m.ledger.set_revoked(m.revoked());
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

    /// The root ledger of a mandate, if it has one (the engine's inside, under the
    /// `internals` feature: for holon's stress tests and loom models).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn ledger(&self, mandate: MandateIx) -> Option<Arc<Ledger>> {
        self.ledgers.get(mandate.0)
    }

    /// What this engine's ledger holds for a mandate, read-only (`None` for an unknown
    /// mandate): its figures on this node, for audits and status pages.
    pub fn ledger_view(&self, mandate: MandateIx) -> Option<LedgerView> {
        self.ledgers.get(mandate.0).map(LedgerView)
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

    // Always inlined into `admit` (where `approved` is a constant): when `approve` grew in
    // issue #12, LLVM stopped inlining it and the allowed path took 1,030 instructions per
    // admit+settle instead of 1,005 (`.ci/bench-gate`'s count).
    #[inline(always)]
    fn admit_inner(&self, call: &Call, approved: bool) -> Admission<'_> {
        let snap = self.cell.load();
        let Some(m) = snap.mandate(call.mandate) else {
            return self.deny_unknown(call, Code::UnknownMandate);
        };
        let Some(a) = snap.agent(call.agent) else {
            return self.deny_unknown(call, Code::UnknownAgent);
        };
        self.decide(&Ask {
            mandate: m,
            agent: a,
            snapshot: &snap,
            call: judge::CallFacts::of_call(call, approved),
            parent_receipt: 0,
        })
    }

    fn deny_unknown(&self, call: &Call, code: Code) -> Admission<'_> {
        let codes = CodeSet::EMPTY.with(code);
        let decided = shadow::Decided::new(call.mandate, call.agent, call.mandate, 0, call.at);
        self.deny_ids(&decided, Verdict::Denied, codes, (Amount::ZERO, Spent::default()))
    }

    /// The decision shared by root calls and sub-calls: the pure judgement
    /// ([`judge::judge`]), then its effects (a slot, the ledger's reservation, a run).
    pub(crate) fn decide<'e>(&'e self, ask: &Ask<'_>) -> Admission<'e> {
        let (m, a) = (ask.mandate, ask.agent);
        let ledger = &m.ledger;
        let judgement = judge::judge(m, a, &ask.call, &judge::LedgerSpend(ledger));
        let (mut wc, today) = (judgement.worst, judgement.today);
        // A call under a published sub-mandate is judged and reserved on every ancestor
        // first (`chain.rs`); a root mandate's call pays this one branch.
        let extra = if m.ancestors.is_empty() {
            match judgement.step {
                judge::Step::Deny => return self.deny_read(ask, judgement.codes, wc.worst, judgement.spent),
                judge::Step::Hold if self.config.shadow => {
                    let decided = shadow::Decided::new(m.ix, a.ix, m.root, ask.parent_receipt, ask.call.at);
                    return self.deny_ids(&decided, Verdict::Held, judgement.codes, (wc.worst, judgement.spent));
                }
                judge::Step::Hold => return self.hold(ask, wc.worst),
                judge::Step::Reserve => None,
            }
        } else {
            // The judgement is made again there (cold): handing it over kept it in memory on
            // the root path too.
            match self.chain_step(ask) {
                chain::ChainStep::Reserve { worst, extra } => {
                    wc.worst = worst;
                    Some(extra)
                }
                chain::ChainStep::Done(admission) => return admission,
            }
        };
        // Every refusal from here gives the ancestors' charges back first.
        let give_back = |extra: &Option<Box<held::Extra<'_>>>| {
            if let Some(held) = extra.as_ref().and_then(|e| e.ancestors.as_ref()) {
                held.refund();
            }
        };
        // The reservation holds its ledger: a root ledger by reference into the arena (no
        // reference count touched), a run's by `Arc` (the run may end first).
        let held_ledger = match m.ledger_key {
            LedgerKey::Root(ix) => match self.ledgers.root(ix) {
                Some(root) => held::HeldLedger::Root(root),
                None => {
                    give_back(&extra);
                    return self.deny(ask, CodeSet::EMPTY.with(Code::InternalError), wc.worst);
                }
            },
            LedgerKey::Run => held::HeldLedger::Run(Arc::clone(ledger)),
        };
        // Ids never wrap: past the last one every call is denied.
        let Some(receipt_id) = sync::next_id() else {
            give_back(&extra);
            return self.deny(ask, CodeSet::EMPTY.with(Code::InternalError), wc.worst);
        };
        let Some(ticket) = self.slots.claim() else {
            give_back(&extra);
            return self.deny(ask, CodeSet::EMPTY.with(Code::InFlightLimitReached), wc.worst);
        };
        // A call may open a new day only up to the engine's clock's day.
        let clock_day = || u64::try_from(self.now().utc_day()).unwrap_or(0);
        let charge =
            match ledger.reserve_clocked(sync::lease_shard(), wc.worst.micros(), today, m.ledger_limits, clock_day) {
                Ok(charge) => charge,
                Err(refused) => {
                    self.slots.unclaim(ticket);
                    give_back(&extra);
                    let (codes, spent) = judge::refused_codes(m, refused, wc.worst, today);
                    return self.deny_read(ask, ask.call.in_run(codes), wc.worst, spent);
                }
            };
        self.activate_slot(ask, ticket, charge.worst_micros, receipt_id);
        let reservation = Reservation::with_extra(
            self,
            held::Held {
                ledger: held_ledger,
                ticket,
                charge,
                receipt_id,
                parent: ask.parent_receipt,
                mandate: m.ix,
                agent: a.ix,
                at: ask.call.at,
                worst_case: wc.worst,
                sub_budget: wc.sub_budget,
            },
            extra,
        );
        if a.has_calls {
            return self.open_run(ask, reservation, wc);
        }
        Admission::Allowed(reservation)
    }

    /// The reservation's slot, made live: what the reaper reads to reclaim it past its
    /// deadline (the agent's timeout and the engine's grace).
    #[inline(always)]
    fn activate_slot(&self, ask: &Ask<'_>, ticket: slots::Ticket, worst_micros: u64, receipt_id: u64) {
        let (m, a) = (ask.mandate, ask.agent);
        let deadline = ask.call.at.unix().saturating_add_unsigned(a.timeout_s.saturating_add(self.config.grace_s));
        self.slots.activate(
            ticket,
            &SlotRecord {
                worst_micros,
                deadline,
                ids: (u64::from(m.ix.0) << 32) | u64::from(a.ix.0),
                receipt_id,
                parent_id: ask.parent_receipt,
                at: ask.call.at.unix(),
                shadow: false,
            },
        );
    }

    /// An orchestrator's call: derive its sub-mandate and open the run's ledger. A
    /// sub-mandate that would widen its parent denies the call before it runs.
    fn open_run<'e>(
        &'e self,
        ask: &Ask<'_>,
        mut reservation: Reservation<'e>,
        wc: crate::admission::WorstCase,
    ) -> Admission<'e> {
        match Run::open(self, ask.snapshot, ask.mandate, ask.agent, wc.sub_budget) {
            Ok(run) => {
                reservation.attach_run(run);
                Admission::Allowed(reservation)
            }
            Err(refused) => {
                // Never handed out: the call did not run, so its charge goes back.
                reservation.release_quietly();
                let code = match refused {
                    run::RunRefused::Widens => Code::SubMandateWidens,
                    run::RunRefused::Engine => Code::InternalError,
                };
                self.deny(ask, CodeSet::EMPTY.with(code), wc.worst)
            }
        }
    }

    fn deny<'e>(&'e self, ask: &Ask<'_>, codes: CodeSet, worst: Amount) -> Admission<'e> {
        self.deny_read(ask, codes, worst, Spent::default())
    }

    /// A denial that read the mandate's spend.
    fn deny_read<'e>(&'e self, ask: &Ask<'_>, codes: CodeSet, worst: Amount, spent: Spent) -> Admission<'e> {
        let decided =
            shadow::Decided::new(ask.mandate.ix, ask.agent.ix, ask.mandate.root, ask.parent_receipt, ask.call.at);
        self.deny_ids(&decided, Verdict::Denied, codes, (worst, spent))
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

/// One mandate's ledger on this engine, read-only: what a gateway's audit or status page
/// reads ([`Engine::ledger_view`](Engine::ledger_view)). Each figure is one moment's
/// reading of atomic words that calls keep changing; none of them can change the ledger.
#[derive(Debug, Clone)]
pub struct LedgerView(Arc<Ledger>);

impl LedgerView {
    /// Reserved + settled (micro-units): exact when no call runs; while calls run, one
    /// moment's estimate that never exceeds what the limit is enforced on.
    pub fn spent_micros(&self) -> u64 {
        self.0.spent_micros()
    }

    /// Settled (kept) amounts (micro-units).
    pub fn settled_micros(&self) -> u64 {
        self.0.settled_micros()
    }

    /// (reserved, settled) read together (micro-units): what calls hold now, and what they
    /// kept.
    pub fn reserved_and_settled_micros(&self) -> (u64, u64) {
        self.0.reserved_and_settled_micros()
    }

    /// Reserved + settled on day `today` (days since 1970-01-01, UTC; micro-units).
    pub fn spent_day_micros(&self, today: u64) -> u64 {
        self.0.spent_day_micros(today)
    }

    /// Reserved + settled + leased to threads (micro-units): the word the total limit is
    /// enforced on, less what a node holds in store leases; never above the limit, so the
    /// figure for a budget audit.
    pub fn used_micros(&self) -> u64 {
        self.0.used_micros()
    }
}
