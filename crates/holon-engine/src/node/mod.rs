//! The node side of the ledger store (issue #12; docs/store.md, "The node side"): a
//! gateway node's engine admits only what the store granted it, and a background thread
//! keeps it supplied.
//!
//! - The engine is built **store-backed** ([`EngineConfig::store_backed`](crate::engine::EngineConfig)):
//!   each root ledger starts with its whole budget withheld, and admits only what a grant
//!   adds to its allowance. The hot path does not change: the allowance lives in the words
//!   the reservation's compare-and-swap already checks (`engine/ledger/allowance.rs`).
//! - [`Node::start`] counts as spent whatever this node's previous run left in leases
//!   (a crash), publishes the mandates' limits to the store, takes the first leases, and
//!   starts the thread that, every `poll_ms`: refills each mandate ahead of need (below a
//!   low watermark, or when a call was refused), flushes what calls settled every
//!   `flush_ms` in one batch (a group commit) that also renews the leases' time to live, and
//!   gives back what an idle mandate or a past day no longer uses.
//! - A call that does not fit the node's leases is denied at once, never kept waiting:
//!   `lease_pending` while the store may have more (the thread is refilling), the budget's
//!   own code once the store granted nothing, `store_unavailable` while the store cannot be
//!   reached.
//! - [`Node::drain`] (and dropping the node) flushes everything and gives back every
//!   unused lease.

mod book;
mod cycle;
mod flush;
mod held;

pub use cycle::{
    IDLE_EMPTY_MS, IDLE_KEEP_CALLS, IDLE_MS, LEASE_CALLS_MIN, LEASE_USE_MS, LOW_WATER_CALLS, LOW_WATER_MS, RETRY_MS,
    RETRY_MS_MAX,
};

use crate::engine::{Engine, EngineError};
use crate::store::{LedgerStore, LimitsCheckError, NODE_NAME_BYTES_MAX, StoreError, StoreLimits, check_limits};
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};
use crate::time::Timestamp;

/// Shortest and longest flush interval, in milliseconds.
pub const FLUSH_MS_MIN: u64 = 1;
pub const FLUSH_MS_MAX: u64 = 60_000;
/// Shortest and longest poll interval (how often the thread looks at the ledgers), in
/// milliseconds.
pub const POLL_MS_MIN: u64 = 1;
pub const POLL_MS_MAX: u64 = 1_000;
/// How often a [`Node::flush_now`] waiting for the thread looks whether the thread ended, in ms.
const FLUSH_LOOK_MS: u64 = 50;
/// Longest lease time to live, in seconds (a day).
pub const LEASE_TTL_S_MAX: u64 = 86_400;

/// A node's settings.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This node's name in the store: unique among the nodes running at once (a node that
    /// starts counts what its name's previous run left in leases as spent).
    pub node: String,
    /// How often what calls settled is flushed to the store, at most, in milliseconds.
    pub flush_ms: u64,
    /// A lease's time to live, in seconds: renewed by every flush; once it has passed
    /// without one, anyone may count the lease's remainder as spent (`holon ledger
    /// reconcile`). At least three flush intervals.
    pub lease_ttl_s: u64,
    /// How often the thread looks at the ledgers, in milliseconds.
    pub poll_ms: u64,
    /// The clock for the store's times and the UTC day (injected for tests).
    pub clock: fn() -> Timestamp,
}

/// A node's name as the store keeps it: 1 to `NODE_NAME_BYTES_MAX` bytes, no control
/// characters. The one rule: [`NodeConfig`] checks it, and the command line checks every
/// `--node` with it before anything runs.
pub fn check_node_name(name: &str) -> Result<(), NodeError> {
    if name.is_empty() || name.len() > NODE_NAME_BYTES_MAX || name.chars().any(char::is_control) {
        return Err(NodeError::BadConfig(format!(
            "a node name is 1 to {NODE_NAME_BYTES_MAX} bytes with no control characters"
        )));
    }
    Ok(())
}

impl NodeConfig {
    pub fn new(node: &str) -> Self {
        NodeConfig { node: node.to_owned(), flush_ms: 200, lease_ttl_s: 30, poll_ms: 2, clock: Timestamp::now }
    }

    fn check(&self) -> Result<(), NodeError> {
        let bad = |what: String| Err(NodeError::BadConfig(what));
        check_node_name(&self.node)?;
        if !(FLUSH_MS_MIN..=FLUSH_MS_MAX).contains(&self.flush_ms) {
            return bad(format!("flush_ms {} is outside {FLUSH_MS_MIN}..={FLUSH_MS_MAX}", self.flush_ms));
        }
        if !(POLL_MS_MIN..=POLL_MS_MAX).contains(&self.poll_ms) {
            return bad(format!("poll_ms {} is outside {POLL_MS_MIN}..={POLL_MS_MAX}", self.poll_ms));
        }
        let ttl_ms = self.lease_ttl_s.saturating_mul(1_000);
        if self.lease_ttl_s > LEASE_TTL_S_MAX || ttl_ms < self.flush_ms.saturating_mul(3) {
            return bad(format!(
                "lease_ttl_s {} must be at most {LEASE_TTL_S_MAX} and at least three flush intervals ({} ms)",
                self.lease_ttl_s, self.flush_ms
            ));
        }
        Ok(())
    }
}

/// Why a node cannot start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("node settings: {0}")]
    BadConfig(String),
    #[error("the engine keeps its budgets in memory; build it with `EngineConfig::store_backed` to run a node")]
    NotStoreBacked,
    #[error("the ledger store: {0}")]
    Store(#[from] StoreError),
    /// The store enforces lower limits than the documents: refused before anything is
    /// written.
    #[error(transparent)]
    Limits(#[from] LimitsCheckError),
    #[error("the node's thread cannot be started: {0}")]
    Thread(String),
    #[error("the node's thread stopped unexpectedly")]
    ThreadPanicked,
    #[error("a node already supplies this engine; one engine has one node (two would flush its settlements twice)")]
    AlreadyAttached,
    #[error(
        "no held call `{0}` in the store: it was approved or refused already, it expired, or it was held within the last poll (retry)"
    )]
    UnknownHeld(String),
    #[error(
        "held call `{0}` names a mandate or agent this node's documents do not hold; approve it on a node that has them"
    )]
    HeldNotHere(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the node was stopped (drained): it flushes and supplies nothing more; start a new one on the store")]
    Stopped,
}

/// What a node did, for operators and `loadtest --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeStats {
    /// Store operations (each one transaction, one round trip).
    pub round_trips: u64,
    pub grants: u64,
    pub flushes: u64,
    /// Store operations that failed (the store was unreachable or refused).
    pub store_errors: u64,
    pub granted_micros: u64,
    /// Flushed to the store as settled.
    pub settled_micros: u64,
    pub given_back_micros: u64,
    /// Counted as spent at start: what this node's previous run left in leases.
    pub recovered_micros: u64,
    /// Counted as spent by a reconcile while this node held the leases (their time to live
    /// passed without a flush).
    pub reconciled_micros: u64,
    /// Open leases now, and what they hold outstanding.
    pub leases: u64,
    pub leased_micros: u64,
}

/// The counters behind [`NodeStats`], written by the node's thread.
#[derive(Debug, Default)]
struct Counters {
    round_trips: AtomicU64,
    grants: AtomicU64,
    flushes: AtomicU64,
    store_errors: AtomicU64,
    granted_micros: AtomicU64,
    settled_micros: AtomicU64,
    given_back_micros: AtomicU64,
    recovered_micros: AtomicU64,
    reconciled_micros: AtomicU64,
    leases: AtomicU64,
    leased_micros: AtomicU64,
}

impl Counters {
    fn add(counter: &AtomicU64, n: u64) {
        // Relaxed: statistics; nothing else is read through them.
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn set(counter: &AtomicU64, n: u64) {
        // Relaxed: as above.
        counter.store(n, Ordering::Relaxed);
    }

    fn stats(&self) -> NodeStats {
        // Relaxed: as above (a moment's figures).
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        NodeStats {
            round_trips: get(&self.round_trips),
            grants: get(&self.grants),
            flushes: get(&self.flushes),
            store_errors: get(&self.store_errors),
            granted_micros: get(&self.granted_micros),
            settled_micros: get(&self.settled_micros),
            given_back_micros: get(&self.given_back_micros),
            recovered_micros: get(&self.recovered_micros),
            reconciled_micros: get(&self.reconciled_micros),
            leases: get(&self.leases),
            leased_micros: get(&self.leased_micros),
        }
    }
}

/// What the node's thread and its handle share.
#[derive(Debug, Default)]
struct Shared {
    counters: Counters,
    /// Set to stop the thread (it drains first).
    stop: parking_lot::Mutex<bool>,
    /// Set with `stop` to stop without the drain (tests play a crash with it).
    skip_drain: parking_lot::Mutex<bool>,
    wake: parking_lot::Condvar,
    /// Flushes asked for by [`Node::flush_now`] (counted under `stop`'s lock, so the thread
    /// cannot miss one between its check and its wait), and the last one the thread did.
    flushes_asked: AtomicU64,
    flushes_done: parking_lot::Mutex<u64>,
    /// Whether the last flush asked for did not reach the store.
    flush_failed: AtomicBool,
    flushed: parking_lot::Condvar,
}

/// A running node. Dropping it drains it.
pub struct Node {
    shared: Arc<Shared>,
    /// Behind a lock so that [`Node::drain_in_place`] can stop it through `&self`.
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<Result<(), NodeError>>>>,
    /// For approvals from the caller's thread (`held.rs`).
    engine: Arc<Engine>,
    store: held::SharedStore,
    name: String,
    clock: fn() -> Timestamp,
    run_id: u64,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("name", &self.name).field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl Node {
    /// Starts a node for a store-backed `engine`: counts as spent what this node's name
    /// left in leases before (a crash), publishes the live mandates' limits, takes the
    /// first leases, then keeps the engine supplied from a thread of its own. An
    /// unreachable store is an error here (a node that cannot start does not run).
    pub fn start(engine: Arc<Engine>, store: Box<dyn LedgerStore>, config: NodeConfig) -> Result<Node, NodeError> {
        // The settings and the engine are checked by `Stepper::start_shared`, first.
        let poll = std::time::Duration::from_millis(config.poll_ms);
        let (name, clock) = (config.node.clone(), config.clock);
        let store: held::SharedStore = Arc::from(store);
        let Stepper { mut runner, shared } = Stepper::start_shared(Arc::clone(&engine), Arc::clone(&store), config)?;
        let run_id = runner.run_id;
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("holon-node".to_owned())
            .spawn(move || {
                let flushes = |runner: &mut cycle::Runner, asked: u64| {
                    if asked > *thread_shared.flushes_done.lock() {
                        let reached = runner.cycle_now();
                        // Relaxed: published by the `flushes_done` lock taken just after.
                        thread_shared.flush_failed.store(!reached, Ordering::Relaxed);
                        *thread_shared.flushes_done.lock() = asked;
                        thread_shared.flushed.notify_all();
                    } else {
                        let _ = runner.cycle();
                    }
                };
                loop {
                    let asked = {
                        let mut stop = thread_shared.stop.lock();
                        // Relaxed: counted under the `stop` lock held here.
                        if !*stop
                            && thread_shared.flushes_asked.load(Ordering::Relaxed) == *thread_shared.flushes_done.lock()
                        {
                            thread_shared.wake.wait_for(&mut stop, poll);
                        }
                        if *stop {
                            break;
                        }
                        // Relaxed: as above.
                        thread_shared.flushes_asked.load(Ordering::Relaxed)
                    };
                    flushes(&mut runner, asked);
                }
                let drained = if *thread_shared.skip_drain.lock() { Ok(()) } else { runner.drain() };
                // A flush asked for while the node stopped was done by the drain (or never will be).
                *thread_shared.flushes_done.lock() = u64::MAX;
                thread_shared.flushed.notify_all();
                drained
            })
            .map_err(|e| NodeError::Thread(e.to_string()))?;
        Ok(Node { shared, thread: parking_lot::Mutex::new(Some(thread)), engine, store, name, clock, run_id })
    }

    /// What the node has done so far.
    pub fn stats(&self) -> NodeStats {
        self.shared.counters.stats()
    }

    /// Wakes the thread now (after a publish, say), instead of at its next poll.
    pub fn wake(&self) {
        self.shared.wake.notify_one();
    }

    /// Stops the node: flushes what was settled, gives back every unused lease and closes
    /// the leases left with nothing outstanding. Stop admitting calls and end their
    /// reservations first: a lease still holding a reservation stays open until its time
    /// to live passes (then `holon ledger reconcile` counts it).
    pub fn drain(self) -> Result<NodeStats, NodeError> {
        self.stop()?;
        Ok(self.stats())
    }

    /// Sends what this node's calls settled to the store now (and whatever else the node's
    /// pass does: refills, and the leases' renewal once it is due), then returns; the node
    /// goes on running (stopping it is [`Node::drain`]). Waits for the node's thread to do
    /// one pass that flushes; `Err` when that flush did not reach the store (what was
    /// settled stays here, for the next flush), when the node is stopped, or when its
    /// thread ended on its own ([`NodeError::ThreadPanicked`]). The wait has no bound of
    /// its own: a store that hangs is bounded by its own connect and statement limits.
    pub fn flush_now(&self) -> Result<NodeStats, NodeError> {
        let asked = {
            let stop = self.shared.stop.lock();
            if *stop || self.thread.lock().is_none() {
                return Err(NodeError::Stopped);
            }
            // Relaxed: counted under the `stop` lock (the thread reads it under the same lock).
            self.shared.flushes_asked.fetch_add(1, Ordering::Relaxed) + 1
        };
        self.shared.wake.notify_one();
        let mut done = self.shared.flushes_done.lock();
        while *done < asked {
            // A thread that ended without a stop (a panic) is looked for at each wake.
            let ended = self.thread.try_lock().is_some_and(|t| t.as_ref().is_some_and(|t| t.is_finished()));
            if ended {
                return Err(NodeError::ThreadPanicked);
            }
            self.shared.flushed.wait_for(&mut done, std::time::Duration::from_millis(FLUSH_LOOK_MS));
        }
        let stopped = *done == u64::MAX;
        drop(done);
        if stopped {
            return Err(NodeError::Stopped);
        }
        // Relaxed: written before `flushes_done` under its lock, read after it.
        if self.shared.flush_failed.load(Ordering::Relaxed) {
            return Err(NodeError::Store(StoreError::Unavailable(
                "the flush did not reach the ledger store; what was settled stays on this node for the next flush"
                    .to_owned(),
            )));
        }
        Ok(self.stats())
    }

    /// Whether the node's thread runs (false once drained or stopped, or once it ended on
    /// its own): a store-backed engine without a running node admits nothing
    /// (`node_stopped`).
    pub fn is_running(&self) -> bool {
        !*self.shared.stop.lock() && self.thread.lock().as_ref().is_some_and(|t| !t.is_finished())
    }

    /// [`Node::drain`] for a node that lives as long as its process (`holon serve` keeps
    /// it for the process's life, so that an approval's reservation may be held across
    /// requests): the same drain, through `&self`. Once drained, the node supplies nothing
    /// more (calls get `lease_pending`); a second call does nothing.
    pub fn drain_in_place(&self) -> Result<NodeStats, NodeError> {
        self.stop()?;
        Ok(self.stats())
    }

    /// Stops the thread **without** the drain, as a crash would (tests only): what was
    /// settled since the last flush and every lease stay as they are in the store.
    #[doc(hidden)]
    pub fn halt_without_drain(self) {
        *self.shared.skip_drain.lock() = true;
        let _ = self.stop();
    }

    fn stop(&self) -> Result<(), NodeError> {
        *self.shared.stop.lock() = true;
        self.shared.wake.notify_one();
        let thread = self.thread.lock().take();
        match thread {
            Some(thread) => thread.join().map_err(|_| NodeError::ThreadPanicked)?,
            None => Ok(()),
        }
    }
}

/// A node without its thread, stepped by hand (the node model test drives the real
/// protocol deterministically with it): not an API.
#[doc(hidden)]
pub struct Stepper {
    runner: cycle::Runner,
    shared: Arc<Shared>,
}

impl Stepper {
    /// What [`Node::start`] does before it starts the thread.
    pub fn start(engine: Arc<Engine>, store: Box<dyn LedgerStore>, config: NodeConfig) -> Result<Stepper, NodeError> {
        Stepper::start_shared(engine, Arc::from(store), config)
    }

    fn start_shared(engine: Arc<Engine>, store: held::SharedStore, config: NodeConfig) -> Result<Stepper, NodeError> {
        config.check()?;
        if !engine.is_store_backed() {
            return Err(NodeError::NotStoreBacked);
        }
        if !engine.attach_node() {
            return Err(NodeError::AlreadyAttached);
        }
        // From here the runner (or this guard, on an early error) releases the claim.
        let attached = cycle::Attached(Arc::clone(&engine));
        // Documents raised without the store (`holon ledger raise`) are an error before
        // anything is written: the node would otherwise run on limits nobody chose.
        for m in engine.snapshot().mandates() {
            let budget = &m.source.budget;
            let documents =
                StoreLimits { total_micros: budget.total.micros(), per_day_micros: budget.per_day.map(|d| d.micros()) };
            check_limits(&*store, &m.source.id, documents)?;
        }
        let shared = Arc::new(Shared::default());
        let recovered = store.reconcile(&config.node, (config.clock)().unix(), false)?;
        Counters::add(&shared.counters.round_trips, 1);
        Counters::add(&shared.counters.recovered_micros, recovered.counted_micros);
        let mut runner = cycle::Runner::new(engine, store, config, Arc::clone(&shared), held::run_id(), attached);
        runner.first_cycle()?;
        Ok(Stepper { runner, shared })
    }

    /// One pass of the thread's loop, flushing whether or not the flush interval passed.
    pub fn step(&mut self) {
        let _flushed = self.runner.cycle_now();
    }

    /// One pass after the mandates have been idle for [`IDLE_EMPTY_MS`] (their unused
    /// leases go back): what a live node's thread does once its calls stop, without the wait.
    pub fn step_idle(&mut self) {
        self.runner.age_use(std::time::Duration::from_millis(IDLE_EMPTY_MS));
        self.runner.cycle_now();
    }

    pub fn stats(&self) -> NodeStats {
        self.shared.counters.stats()
    }

    pub fn drain(self) -> Result<NodeStats, NodeError> {
        let shared = Arc::clone(&self.shared);
        self.runner.drain()?;
        Ok(shared.counters.stats())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
