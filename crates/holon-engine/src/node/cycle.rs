//! One pass of a node's thread: publish limits, refill each mandate ahead of need, flush
//! what was settled (a group commit), give back what is idle; and the drain at the end.

use std::time::{Duration, Instant};

use super::book::{Book, GiveBackFrom, Plan};
use super::{Counters, NodeConfig, NodeError, Shared};
use crate::engine::Engine;
use crate::engine::inside::{Ledger, StoreState};
use crate::store::{GrantRequest, LedgerStore, StoreError, StoreLimits};
use crate::sync::Arc;

/// A lease holds at least this many of the largest worst case seen on the mandate.
pub const LEASE_CALLS_MIN: u64 = 1_000;
/// A lease holds at least this long of the mandate's recent use, in milliseconds.
pub const LEASE_USE_MS: u64 = 1_000;
/// A refill starts when what is left is below this many worst cases ...
pub const LOW_WATER_CALLS: u64 = 250;
/// ... or below this long of recent use, in milliseconds (far above a store round trip).
pub const LOW_WATER_MS: u64 = 250;
/// A mandate with no use for this long gives back its leases but [`IDLE_KEEP_CALLS`]
/// worst cases, in milliseconds.
pub const IDLE_MS: u64 = 2_000;
/// What an idle mandate keeps, in worst cases, so its next call does not wait for a refill.
pub const IDLE_KEEP_CALLS: u64 = 10;
/// A mandate with no use for this long gives back even those, in milliseconds: no budget
/// stays in an idle node's leases longer, so a node refused while another holds the rest
/// says `lease_pending` for at most about this long (docs/store.md, "Stranded budget").
pub const IDLE_EMPTY_MS: u64 = 5_000;
/// After the store failed or granted nothing, the next try on that mandate waits this
/// long, in milliseconds (a refused call asks again sooner: it sets the need).
pub const RETRY_MS: u64 = 100;
/// The longest wait between two tries on a mandate whose budget the store said is spent,
/// in milliseconds (budget given back by other nodes is found within it).
pub const RETRY_MS_MAX: u64 = 1_000;

/// The claim a node holds on its engine ([`Engine::attach_node`]), released when the node
/// stops (drained, halted, or dropped as in a crash).
pub(super) struct Attached(pub(super) Arc<Engine>);

impl Drop for Attached {
    fn drop(&mut self) {
        self.0.detach_node();
    }
}

/// One mandate as the node follows it.
pub(super) struct Tracked {
    pub(super) id: String,
    pub(super) ledger: Arc<Ledger>,
    /// The documents' limits, and those last published to the store.
    pub(super) documents: StoreLimits,
    published: Option<StoreLimits>,
    pub(super) book: Book,
    /// Recent use, in micro-units per second (smoothed), and when it was last measured.
    pub(super) rate_micros_per_s: u64,
    pub(super) used_seen_micros: u64,
    pub(super) seen_at: Instant,
    pub(super) last_use_at: Instant,
    pub(super) retry_at: Option<Instant>,
    /// The wait before the next try once the store granted nothing: doubles each time, up
    /// to `RETRY_MS_MAX`, so an exhausted mandate does not keep the store busy.
    pub(super) backoff_ms: u64,
    /// The store enforces a `per_day` the documents no longer have (they were published
    /// without it to the running engine, which then stopped enforcing the day): the node
    /// takes no lease on it and gives back what it can (docs/store.md).
    pub(super) blocked: bool,
    /// The UTC day whose past leases were last given back.
    pub(super) rolled_day: u64,
    /// The store's last refusal found the rest of the budget in other live nodes' leases:
    /// calls get `lease_pending` (it is spent there, or given back) and the next try waits
    /// `RETRY_MS`.
    pub(super) others_hold: bool,
}

pub(super) struct Runner {
    pub(super) engine: Arc<Engine>,
    pub(super) store: Arc<dyn LedgerStore>,
    pub(super) config: NodeConfig,
    pub(super) shared: Arc<Shared>,
    pub(super) generation: u64,
    /// Held calls copied to the store: local pending id → the store's id.
    pub(super) mirrored: std::collections::HashMap<u64, String>,
    /// A flush batch whose commit failed, to send again as it was.
    pub(super) replay: Option<Vec<(usize, Plan)>>,
    /// This run's number, in the store ids of its held calls.
    pub(super) run_id: u64,
    _attached: Attached,
    pub(super) mandates: Vec<Tracked>,
    pub(super) flushed_at: Instant,
    pub(super) renewed_at: Instant,
}

impl Runner {
    pub(super) fn new(
        engine: Arc<Engine>,
        store: Arc<dyn LedgerStore>,
        config: NodeConfig,
        shared: Arc<Shared>,
        run_id: u64,
        attached: Attached,
    ) -> Self {
        let now = Instant::now();
        Runner {
            engine,
            store,
            config,
            shared,
            generation: u64::MAX,
            mirrored: std::collections::HashMap::new(),
            replay: None,
            run_id,
            _attached: attached,
            mandates: Vec::new(),
            flushed_at: now,
            renewed_at: now,
        }
    }

    pub(super) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub(super) fn store(&self) -> &dyn LedgerStore {
        &*self.store
    }

    pub(super) fn node_name(&self) -> &str {
        &self.config.node
    }

    pub(super) fn now_unix(&self) -> i64 {
        self.unix()
    }

    pub(super) fn shared(&self) -> &Shared {
        &self.shared
    }

    fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    pub(super) fn unix(&self) -> i64 {
        (self.config.clock)().unix()
    }

    pub(super) fn today(&self) -> u64 {
        u64::try_from((self.config.clock)().utc_day()).unwrap_or(0)
    }

    /// The first pass, in `Node::start`: the store must answer.
    pub(super) fn first_cycle(&mut self) -> Result<(), NodeError> {
        self.refresh();
        let now = Instant::now();
        for ix in 0..self.mandates.len() {
            self.publish(ix)?;
            if let Some(request) = self.refill_due(ix, now, true) {
                self.grant(ix, &request, now)?;
            }
        }
        self.assert_allowance_in_leases();
        Ok(())
    }

    /// Backdates every mandate's last use by `by` (the node model's idle spell).
    pub(super) fn age_use(&mut self, by: Duration) {
        for t in &mut self.mandates {
            t.last_use_at = t.last_use_at.checked_sub(by).unwrap_or(t.last_use_at);
            t.seen_at = t.seen_at.checked_sub(by).unwrap_or(t.seen_at);
        }
    }

    /// A pass that flushes now (the node model test steps the node with it): whether the
    /// flush reached the store.
    pub(super) fn cycle_now(&mut self) -> bool {
        self.flushed_at =
            self.flushed_at.checked_sub(Duration::from_millis(self.config.flush_ms)).unwrap_or(self.flushed_at);
        self.cycle().unwrap_or(false)
    }

    /// One pass of the thread. Store errors are counted and retried; the ledgers say
    /// `store_unavailable` meanwhile. `Some(reached)` when it flushed.
    pub(super) fn cycle(&mut self) -> Option<bool> {
        self.refresh();
        let now = Instant::now();
        let mut refills = Vec::new();
        for ix in 0..self.mandates.len() {
            if self.publish(ix).is_ok()
                && let Some(request) = self.refill_due(ix, now, false)
            {
                refills.push((ix, request));
            }
        }
        // A refill is preceded by the flush (one group commit for every mandate), so the
        // store sees what this node really holds when it sizes the lease.
        let renew = now.duration_since(self.renewed_at) >= Duration::from_millis(self.config.lease_ttl_s * 1_000 / 3);
        let due = now.duration_since(self.flushed_at) >= Duration::from_millis(self.config.flush_ms);
        let flushed = (renew || due || !refills.is_empty()).then(|| self.flush(renew));
        for (ix, request) in refills {
            let _ = self.grant(ix, &request, now);
        }
        self.mirror_held(renew || due);
        self.assert_allowance_in_leases();
        flushed
    }

    /// The node's invariant after each pass, on in release (a few loads per mandate, next to
    /// a pass's store round trips): the allowance a ledger may still hand to calls is never
    /// more than what the node's book holds (its leases, and the prepaid part of leases
    /// reconciled under it or of a predecessor's on this engine). An allowance granted to the ledger
    /// that the book did not record would let calls spend what the store never granted;
    /// the step stops (the thread ends, the node reports it) instead of admitting it.
    /// Why a true book never trips it: the allowance granted changes only on this thread,
    /// and the ledger's settled figure only grows and is never below the one the book has
    /// seen, so free (granted less reserved, settled and leased) stays within what the book
    /// holds (granted less what it flushed as settled, plus what it owes back), whatever
    /// calls run meanwhile.
    fn assert_allowance_in_leases(&self) {
        for t in &self.mandates {
            let free = t.ledger.allowance_free_micros();
            let holds = t.book.holds_micros();
            assert!(
                free <= holds,
                "mandate {}: the ledger may still admit {free} micro-units but the node's leases hold {holds}: a node admits only inside its leases",
                t.id
            );
        }
    }

    /// Follows the live snapshot's mandates (a mandate removed from it keeps its book: its
    /// leases are still flushed and, idle, given back).
    fn refresh(&mut self) {
        let snapshot = self.engine.snapshot();
        if snapshot.generation == self.generation {
            return;
        }
        self.generation = snapshot.generation;
        let now = Instant::now();
        for m in snapshot.mandates() {
            let budget = &m.source.budget;
            let documents =
                StoreLimits { total_micros: budget.total.micros(), per_day_micros: budget.per_day.map(|d| d.micros()) };
            match self.mandates.iter_mut().find(|t| t.id == m.source.id) {
                Some(t) => t.documents = documents,
                None => self.mandates.push(Tracked {
                    id: m.source.id.clone(),
                    ledger: Arc::clone(&m.ledger),
                    documents,
                    published: None,
                    book: new_book(&m.ledger),
                    rate_micros_per_s: 0,
                    used_seen_micros: m.ledger.used_micros(),
                    seen_at: now,
                    last_use_at: now,
                    retry_at: None,
                    backoff_ms: RETRY_MS,
                    blocked: false,
                    rolled_day: 0,
                    others_hold: false,
                }),
            }
        }
    }

    /// Sends a mandate's limits to the store when the documents changed them (a publish
    /// can only lower the store's copy; docs/store.md, "Limits that disagree").
    fn publish(&mut self, ix: usize) -> Result<(), NodeError> {
        let Some(t) = self.mandates.get(ix) else { return Ok(()) };
        if t.published == Some(t.documents) {
            return Ok(());
        }
        let result = self.store.publish_limits(&t.id, t.documents, false);
        self.answered(ix, result.as_ref().err())?;
        if let (Some(t), Ok(enforced)) = (self.mandates.get_mut(ix), result) {
            t.published = Some(t.documents);
            t.blocked = enforced.per_day_micros.is_some() && t.documents.per_day_micros.is_none();
        }
        Ok(())
    }

    /// Counts a round trip; on an error marks the mandate (or, `ix` past the end, every
    /// mandate) `store_unavailable` and returns the error.
    pub(super) fn answered(&self, ix: usize, error: Option<&StoreError>) -> Result<(), NodeError> {
        Counters::add(&self.counters().round_trips, 1);
        let Some(error) = error else { return Ok(()) };
        Counters::add(&self.counters().store_errors, 1);
        let targets: Vec<&Tracked> = match self.mandates.get(ix) {
            Some(t) => vec![t],
            None => self.mandates.iter().collect(),
        };
        for t in targets {
            t.ledger.set_store_state(StoreState::Unavailable);
        }
        Err(NodeError::Store(StoreError::Unavailable(error.to_string())))
    }

    /// Whether the mandate needs a lease (its allowance runs low, or a call was refused),
    /// and the request; gives back what a past day or an idle spell left.
    fn refill_due(&mut self, ix: usize, now: Instant, first: bool) -> Option<GrantRequest> {
        let today = self.today();
        let now_unix = self.unix();
        let t = self.mandates.get_mut(ix)?;
        let per_day = t.documents.per_day_micros.is_some();
        let ledger = Arc::clone(&t.ledger);
        if t.blocked {
            // The engine no longer checks the day the store enforces: no call may use a
            // lease any more. What is free is withdrawn; leases of past days go back, today's
            // once the day has passed (a give-back from them could free capacity today's
            // calls used).
            ledger.refund_all_leases();
            let taken = ledger.withdraw_allowance(u64::MAX, None);
            t.book.give_back(GiveBackFrom::Before(today), taken);
            t.book.owe_before(today);
            ledger.set_store_state(StoreState::DayExhausted);
            return None;
        }
        // Past days' leases serve no new call: give back what no call of theirs holds.
        if per_day && t.rolled_day != today {
            let past = t.book.outstanding_before(today);
            let taken = ledger.withdraw_allowance(past, None);
            t.book.give_back(GiveBackFrom::Before(today), taken);
            t.rolled_day = today;
        }
        // Recent use, smoothed.
        let used = ledger.used_micros();
        let elapsed_ms = u64::try_from(now.duration_since(t.seen_at).as_millis()).unwrap_or(u64::MAX).max(1);
        let fresh = used.saturating_sub(t.used_seen_micros);
        if fresh > 0 {
            t.last_use_at = now;
        }
        let sample = fresh.saturating_mul(1_000) / elapsed_ms;
        t.rate_micros_per_s = t.rate_micros_per_s / 2 + sample / 2;
        (t.used_seen_micros, t.seen_at) = (used, now);
        let need = ledger.take_need_micros();
        // The lease unit: the largest worst case seen. Before any call, a first lease as
        // large as the store grants (it caps a grant at its share of what is left).
        let seen = ledger.worst_max_micros().max(need);
        let unit = seen.max(1);
        let day = per_day.then_some(today);
        let mut free = ledger.allowance_free_micros();
        if per_day {
            free = free.min(ledger.allowance_day().filter(|(d, _)| *d == today).map_or(0, |(_, room)| room));
        }
        let low = if seen == 0 {
            1
        } else {
            unit.saturating_mul(LOW_WATER_CALLS).max(t.rate_micros_per_s.saturating_mul(LOW_WATER_MS) / 1_000)
        };
        let idle = !first && now.duration_since(t.last_use_at) >= Duration::from_millis(IDLE_MS) && need == 0;
        if idle {
            let empty = now.duration_since(t.last_use_at) >= Duration::from_millis(IDLE_EMPTY_MS);
            let keep = if empty { 0 } else { unit.saturating_mul(IDLE_KEEP_CALLS) };
            if free > keep {
                let taken = ledger.withdraw_allowance(free - keep, day);
                t.book.give_back(GiveBackFrom::Day(day), taken);
            }
            return None;
        }
        // A refused call asks for a refill at once, unless the store said the budget is
        // spent: then the backoff holds.
        // While the budget is spent, or out in other live nodes' leases, the pause holds
        // even for a refused call (asking again at every poll would only keep the store busy).
        // Under an exhausted answer, `need` is a call smaller than it was judged for (larger
        // ones were told so for good): it may still fit, and is asked for.
        let state = ledger.store_state();
        let spent_for_larger = matches!(state, StoreState::TotalExhausted | StoreState::DayExhausted) && need > 0;
        let exhausted = (state == StoreState::TotalExhausted && !spent_for_larger) || t.others_hold;
        let waiting = t.retry_at.is_some_and(|at| now < at) && (need == 0 || exhausted);
        if (free >= low && need <= free) || waiting {
            return None;
        }
        let want = if seen == 0 {
            t.documents.per_day_micros.unwrap_or(u64::MAX).min(t.documents.total_micros)
        } else {
            unit.saturating_mul(LEASE_CALLS_MIN).max(t.rate_micros_per_s.saturating_mul(LEASE_USE_MS) / 1_000)
        };
        Some(GrantRequest {
            node: self.config.node.clone(),
            mandate: t.id.clone(),
            day,
            want_micros: want,
            // At least the unit; under an exhausted answer, the smaller call still waiting:
            // once less than the largest call is left, the smaller ones are still served
            // (asking for the largest alone stranded up to one of them).
            min_micros: if spent_for_larger { need.min(unit).max(1) } else { unit },
            ttl_s: self.config.lease_ttl_s,
            now_unix,
        })
    }

    /// Asks the store for a lease and adds it to the mandate's allowance.
    fn grant(&mut self, ix: usize, request: &GrantRequest, now: Instant) -> Result<(), NodeError> {
        let granted = self.store.grant(request);
        let retry = now + Duration::from_millis(RETRY_MS);
        if granted.is_err()
            && let Some(t) = self.mandates.get_mut(ix)
        {
            t.retry_at = Some(retry);
        }
        let granted = match granted {
            Ok(g) => {
                self.answered(ix, None)?;
                g
            }
            Err(e) => return self.answered(ix, Some(&e)),
        };
        let Some(lease) = granted else {
            self.refused(ix, request, retry);
            return Ok(());
        };
        let Some(t) = self.mandates.get_mut(ix) else { return Ok(()) };
        let (ledger, day) = (Arc::clone(&t.ledger), request.day);
        t.retry_at = None;
        t.backoff_ms = RETRY_MS;
        t.others_hold = false;
        t.book.add(&lease, day);
        Counters::add(&self.shared.counters.grants, 1);
        Counters::add(&self.shared.counters.granted_micros, lease.amount_micros);
        if ledger.grant_allowance(lease.amount_micros, day).is_err() {
            // Cannot be used (its day passed meanwhile, say): straight back to the store.
            t.book.give_back(GiveBackFrom::Day(day), lease.amount_micros);
        }
        ledger.set_store_state(StoreState::Leasing);
        Ok(())
    }

    /// The store granted nothing: says why in the mandate's state, so refused calls get
    /// the right code. With the escrow rules ([`lease_cap`](crate::store::escrow)), a
    /// grant of at least one call is refused only when (a) this node already holds its
    /// share (its leases are busy with calls in flight: `lease_pending`, they end soon), or,
    /// holding less than one call, (b) the rest of the budget is in other live nodes'
    /// leases (`lease_pending`: they spend it, or give it back once idle, within
    /// [`IDLE_MS`]), (c) the total has less than one call left, or (d) the day has (one
    /// more round trip, `status`, tells which).
    fn refused(&mut self, ix: usize, request: &GrantRequest, retry: Instant) {
        let Some(t) = self.mandates.get_mut(ix) else { return };
        t.retry_at = Some(retry);
        if t.book.outstanding_micros() >= request.min_micros {
            t.ledger.set_store_state(StoreState::Leasing);
            return;
        }
        // One call larger than what is left must not make the budget look spent for the
        // usual calls: compare what is left with the usual call's worst case.
        let usual = t.ledger.worst_max_micros().max(1).min(request.min_micros);
        let status = self.store.status(Some(&request.mandate));
        if self.answered(ix, status.as_ref().err()).is_err() {
            return;
        }
        let (node, now_unix) = (self.config.node.clone(), self.unix());
        let Some(t) = self.mandates.get_mut(ix) else { return };
        let s = status.ok().and_then(|s| s.into_iter().next());
        // Saturating on purpose, unlike the book's sums: a limit lowered under what is
        // spent and leased leaves nothing (the safe reading), not an accounting error.
        let left = s
            .as_ref()
            .map_or(0, |s| s.limits.total_micros.saturating_sub(s.spent_micros).saturating_sub(s.leased_micros));
        // What other nodes hold in leases still live (a node gone quiet past its leases'
        // time to live holds nothing that will come back: a reconcile counts it).
        let others = s.as_ref().map_or(0, |s| {
            s.nodes
                .iter()
                .filter(|n| n.node != node && n.lease_expires_unix > now_unix)
                .fold(0u64, |sum, n| sum.saturating_add(n.leased_micros))
        });
        // Were every other node's live leases given back, would a call fit? (Not above a
        // limit lowered under them: what they hold is then spent or over the limit.)
        let recoverable = s.as_ref().map_or(0, |s| {
            s.limits.total_micros.saturating_sub(s.spent_micros).saturating_sub(s.leased_micros.saturating_sub(others))
        });
        t.others_hold = left < usual && others > 0 && recoverable >= usual;
        // What is left in the store and unused in this node's own leases may make a call
        // together: the unused part goes back (in the flush before the next grant), so the
        // store can grant it whole with what it has.
        if left < usual && !t.others_hold && left > 0 {
            let day = request.day;
            let taken = t.ledger.withdraw_allowance(u64::MAX, day);
            if taken > 0 && left.saturating_add(taken) >= usual {
                t.book.give_back(GiveBackFrom::Day(day), taken);
                t.retry_at = None;
                t.ledger.set_store_state(StoreState::Leasing);
                return;
            }
            if taken > 0 {
                // Not enough even together: kept for the calls it can serve.
                let _ = t.ledger.grant_allowance(taken, day);
            }
        }
        let state = if t.others_hold {
            StoreState::Leasing
        } else if left < usual {
            StoreState::TotalExhausted
        } else if request.day.is_some() {
            StoreState::DayExhausted
        } else {
            StoreState::Leasing
        };
        // Back off only when the total is surely spent (what is left, here and in every
        // live lease, is below the usual call); a day inferred full may be a call larger
        // than the usual, asked again soon.
        if state == StoreState::TotalExhausted {
            t.retry_at = Some(Instant::now() + Duration::from_millis(t.backoff_ms));
            t.backoff_ms = t.backoff_ms.saturating_mul(2).min(RETRY_MS_MAX);
        }
        // Exhausted for calls of `usual` and more: a smaller one may still fit.
        t.ledger.set_store_state_from(state, usual);
    }
}

/// A book for a ledger the node starts to follow. What the engine settled before is not
/// this node's to flush (a second node on one engine would flush it twice); what the
/// ledger was granted before and has not settled (a node ran on this engine before, and
/// calls may still hold it) is inherited as prepaid: the predecessor's leases are counted
/// as spent (reconciled at this node's start, or at their expiry), so what calls settle
/// from it must not be flushed again against this node's leases.
fn new_book(ledger: &Ledger) -> Book {
    let settled = ledger.settled_micros();
    // Never below: settled is inside what was granted. Read in this order, a settle in
    // between only makes the inherited figure larger.
    let inherited = ledger.allowance_granted_micros().saturating_sub(settled);
    Book::starting_at(settled, inherited)
}
