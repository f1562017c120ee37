//! The node side of the ledger store (docs/store.md, "The node side"): a store-backed
//! engine admits only what its node's leases hold; nodes on one store never spend more
//! than the limit together; a crash, a store that goes away, a new UTC day and a limit
//! lowered by another node each end as the document says.
#![cfg(feature = "sqlite")]

mod common;

use holon::admission::Code;
use holon::engine::{Admission, Call, Engine, EngineConfig, synthetic};
use holon::money::Amount;
use holon::node::{Node, NodeConfig};
use holon::store::memory::MemoryStore;
use holon::store::sqlite::SqliteStore;
use holon::store::{
    FlushEntry, FlushOutcome, GrantRequest, HeldCall, Lease, LedgerStore, MandateStatus, Reconciled, StoreError,
    StoreLimits,
};
use holon::time::Timestamp;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

fn at() -> Timestamp {
    Timestamp::from_unix(synthetic::AT_UNIX)
}

fn engine(total: &str, clock: fn() -> Timestamp) -> (Arc<Engine>, Call) {
    let total = Amount::parse(total).unwrap();
    let net = synthetic::network(&synthetic::Shape { agents: 4, mandates: 1, total }).unwrap();
    let engine = Arc::new(Engine::new(EngineConfig { store_backed: true, clock, ..EngineConfig::default() }));
    engine.publish(&net.input).unwrap();
    let call = Call::new(engine.mandate_ix("m0").unwrap(), engine.agent_ix("syn/a1").unwrap(), clock());
    (engine, call)
}

fn config(node: &str, clock: fn() -> Timestamp) -> NodeConfig {
    NodeConfig { flush_ms: 20, poll_ms: 1, clock, ..NodeConfig::new(node) }
}

fn sqlite(dir: &tempfile::TempDir) -> Box<dyn LedgerStore> {
    Box::new(SqliteStore::open(&dir.path().join("ledger.db")).unwrap())
}

fn status(store: &dyn LedgerStore) -> MandateStatus {
    store.status(Some("m0")).unwrap().into_iter().next().unwrap()
}

/// Admits and settles up to `calls_max` calls (each settled at `keep` micro-units) until
/// the budget is spent, retrying a call that waits for a lease for up to a minute (a bound, not a window: the wait ends with the lease). Returns the
/// micro-units settled and the last denial's codes.
fn spend_until_refused(engine: &Engine, call: &Call, keep: u64, calls_max: u64) -> (u64, Vec<Code>) {
    let mut settled = 0;
    let mut waiting_since: Option<Instant> = None;
    let mut admitted = 0;
    while admitted < calls_max {
        match engine.admit(call) {
            Admission::Allowed(r) => {
                waiting_since = None;
                admitted += 1;
                settled += r.settle(Amount::from_micros(keep), call.at).unwrap().kept.micros();
            }
            Admission::Denied(d) if d.codes.contains(Code::LeasePending) => {
                let since = *waiting_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(60) {
                    return (settled, d.codes.iter().collect());
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            Admission::Denied(d) => return (settled, d.codes.iter().collect()),
            Admission::Held(_) => panic!("a leaf call is never held"),
        }
    }
    (settled, Vec::new())
}

#[test]
fn a_store_backed_engine_admits_nothing_without_a_node() {
    let (engine, call) = engine("10", at);
    match engine.admit(&call) {
        Admission::Denied(d) => assert_eq!(d.codes.iter().collect::<Vec<_>>(), [Code::LeasePending]),
        other => panic!("expected lease_pending, got {other:?}"),
    }
    let store = Box::new(MemoryStore::new());
    assert!(Node::start(Arc::new(Engine::new(EngineConfig::default())), store, config("n", at)).is_err());
}

#[test]
fn a_node_supplies_its_engine_and_its_drain_flushes_and_gives_everything_back() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, call) = engine("10", at);
    let node = Node::start(Arc::clone(&engine), sqlite(&dir), config("n1", at)).unwrap();
    let (settled, codes) = spend_until_refused(&engine, &call, 700, 500);
    assert_eq!(settled, 500 * 700, "every call was admitted: {codes:?}");
    let stats = node.drain().unwrap();
    assert_eq!(stats.settled_micros, settled);
    let store = sqlite(&dir);
    let s = status(&*store);
    assert_eq!((s.spent_micros, s.leased_micros), (settled, 0), "all settled, every lease given back");
    assert!(s.nodes.is_empty(), "no lease left open: {:?}", s.nodes);
}

#[test]
fn two_nodes_on_one_store_spend_the_limit_exactly_once_and_strand_little() {
    let dir = tempfile::tempdir().unwrap();
    const LIMIT_MICROS: u64 = 3_000_000;
    let run = |name: &'static str| {
        let dir = dir.path().to_owned();
        std::thread::spawn(move || {
            let (engine, call) = engine("3", at);
            let store = Box::new(SqliteStore::open(&dir.join("ledger.db")).unwrap());
            let node = Node::start(Arc::clone(&engine), store, config(name, at)).unwrap();
            let (settled, codes) = spend_until_refused(&engine, &call, 920, 1_000_000);
            let stats = node.drain().unwrap();
            (settled, codes, stats)
        })
    };
    let (a, b) = (run("a"), run("b"));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    let store = sqlite(&dir);
    let s = status(&*store);
    assert_eq!(s.spent_micros, a.0 + b.0, "the store's spent is what the nodes settled, to the micro-unit");
    assert_eq!((a.2.settled_micros, b.2.settled_micros), (a.0, b.0));
    assert!(s.spent_micros <= LIMIT_MICROS);
    assert_eq!(s.leased_micros, 0);
    for (_, codes, _) in [&a, &b] {
        assert!(codes.contains(&Code::TotalExceeded) || codes.contains(&Code::PerDayExceeded), "{codes:?}");
    }
    let stranded = LIMIT_MICROS - s.spent_micros;
    assert!(stranded <= LIMIT_MICROS / 100 + 2 * 920, "stranded {stranded} of {LIMIT_MICROS}");
}

#[test]
fn a_node_that_crashed_is_counted_at_its_restart_and_nothing_settled_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, call) = engine("10", at);
    let node = Node::start(Arc::clone(&engine), sqlite(&dir), config("n1", at)).unwrap();
    let (settled, _) = spend_until_refused(&engine, &call, 900, 200);
    node.halt_without_drain();
    let store = sqlite(&dir);
    let before = status(&*store);
    assert!(before.leased_micros > 0, "the crashed node left its leases");
    // Restart under the same name: its previous run's leases are counted as spent.
    let (engine2, call2) = self::engine("10", at);
    let node2 = Node::start(Arc::clone(&engine2), sqlite(&dir), config("n1", at)).unwrap();
    assert_eq!(node2.stats().recovered_micros, before.leased_micros);
    let after = status(&*store);
    assert!(after.spent_micros >= settled, "spent {} below what was settled {settled}", after.spent_micros);
    assert_eq!(after.spent_micros, before.spent_micros + before.leased_micros, "counted once, as spent");
    let (more, _) = spend_until_refused(&engine2, &call2, 900, 100);
    node2.drain().unwrap();
    let end = status(&*store);
    assert_eq!(end.spent_micros, after.spent_micros + more);
    assert!(end.spent_micros <= 10_000_000);
}

/// A memory store that can be switched off, to play a store that goes away.
struct Flaky {
    inner: Arc<MemoryStore>,
    down: Arc<AtomicBool>,
}

impl Flaky {
    fn up(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) { Err(StoreError::Unavailable("switched off".into())) } else { Ok(()) }
    }
}

impl LedgerStore for Flaky {
    fn publish_limits(&self, mandate: &str, limits: StoreLimits, raise: bool) -> Result<StoreLimits, StoreError> {
        self.up()?;
        self.inner.publish_limits(mandate, limits, raise)
    }
    fn grant(&self, request: &GrantRequest) -> Result<Option<Lease>, StoreError> {
        self.up()?;
        self.inner.grant(request)
    }
    fn flush(&self, node: &str, entries: &[FlushEntry], now_unix: i64) -> Result<Vec<FlushOutcome>, StoreError> {
        self.up()?;
        self.inner.flush(node, entries, now_unix)
    }
    fn reconcile(&self, node: &str, now_unix: i64, expired_only: bool) -> Result<Reconciled, StoreError> {
        self.up()?;
        self.inner.reconcile(node, now_unix, expired_only)
    }
    fn status(&self, mandate: Option<&str>) -> Result<Vec<MandateStatus>, StoreError> {
        self.up()?;
        self.inner.status(mandate)
    }
    fn hold(&self, call: &HeldCall) -> Result<(), StoreError> {
        self.up()?;
        self.inner.hold(call)
    }
    fn take_held(&self, id: &str, now_unix: i64) -> Result<Option<HeldCall>, StoreError> {
        self.up()?;
        self.inner.take_held(id, now_unix)
    }
    fn held_calls(&self, mandate: Option<&str>, now_unix: i64) -> Result<Vec<HeldCall>, StoreError> {
        self.up()?;
        self.inner.held_calls(mandate, now_unix)
    }
    fn release_held(&self, id: &str) -> Result<(), StoreError> {
        self.up()?;
        self.inner.release_held(id)
    }
}

#[test]
fn a_store_that_goes_away_leaves_the_leases_held_then_store_unavailable_then_recovery() {
    let inner = Arc::new(MemoryStore::new());
    let down = Arc::new(AtomicBool::new(false));
    let flaky = || Box::new(Flaky { inner: Arc::clone(&inner), down: Arc::clone(&down) });
    let (engine, call) = engine("10", at);
    let node = Node::start(Arc::clone(&engine), flaky(), config("n1", at)).unwrap();
    let (warm, _) = spend_until_refused(&engine, &call, 900, 50);
    down.store(true, Ordering::SeqCst);
    // Within the leases held, calls go on; then they are denied store_unavailable.
    let (during, codes) = spend_until_refused(&engine, &call, 900, 1_000_000);
    assert!(during > 0, "the node kept admitting within its leases");
    assert_eq!(codes, [Code::StoreUnavailable]);
    assert!(node.stats().store_errors > 0);
    down.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(60);
    let after = loop {
        match engine.admit(&call) {
            Admission::Allowed(r) => break r.settle(Amount::from_micros(900), call.at).unwrap().kept.micros(),
            Admission::Denied(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            other => panic!("the node did not recover: {other:?}"),
        }
    };
    node.drain().unwrap();
    let s = inner.status(Some("m0")).unwrap().remove(0);
    assert_eq!(s.spent_micros, warm + during + after, "everything settled while the store was away was flushed");
}

static DAY_CLOCK: AtomicI64 = AtomicI64::new(synthetic::AT_UNIX);
fn day_clock() -> Timestamp {
    Timestamp::from_unix(DAY_CLOCK.load(Ordering::SeqCst))
}

#[test]
fn a_new_utc_day_is_opened_only_by_a_lease_of_that_day() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, mut call) = engine("10", day_clock);
    let node = Node::start(Arc::clone(&engine), sqlite(&dir), config("n1", day_clock)).unwrap();
    let (first_day, _) = spend_until_refused(&engine, &call, 900, 100);
    assert_eq!(first_day, 100 * 900);
    // Midnight: a call of the new day waits for a lease of that day, then is admitted.
    DAY_CLOCK.store(synthetic::AT_UNIX + 86_400, Ordering::SeqCst);
    call.at = day_clock();
    let (next_day, codes) = spend_until_refused(&engine, &call, 900, 100);
    assert_eq!(next_day, 100 * 900, "{codes:?}");
    node.drain().unwrap();
    let store = sqlite(&dir);
    let s = status(&*store);
    assert_eq!((s.spent_micros, s.leased_micros), (200 * 900, 0));
}

#[test]
fn a_limit_lowered_by_one_node_stops_new_grants_but_not_the_other_nodes_lease() {
    let dir = tempfile::tempdir().unwrap();
    let (engine_a, call_a) = engine("10", at);
    let node_a = Node::start(Arc::clone(&engine_a), sqlite(&dir), config("a", at)).unwrap();
    let (first, _) = spend_until_refused(&engine_a, &call_a, 1_000, 10);
    let held = node_a.stats().leased_micros.max(status(&*sqlite(&dir)).leased_micros);
    // Node b publishes the mandate with a lower total: the store's copy goes down.
    let (engine_b, call_b) = engine("0.5", at);
    let node_b = Node::start(Arc::clone(&engine_b), sqlite(&dir), config("b", at)).unwrap();
    assert_eq!(status(&*sqlite(&dir)).limits.total_micros, 500_000);
    let (a_more, _) = spend_until_refused(&engine_a, &call_a, 1_000, 1_000_000);
    let (b_more, _) = spend_until_refused(&engine_b, &call_b, 1_000, 1_000_000);
    node_a.drain().unwrap();
    node_b.drain().unwrap();
    let s = status(&*sqlite(&dir));
    assert_eq!(s.spent_micros, first + a_more + b_more);
    assert!(
        s.spent_micros <= 500_000 + held,
        "spent {} above the lowered limit plus the lease held {held}",
        s.spent_micros
    );
}

#[test]
fn a_node_whose_documents_are_above_the_stores_limit_does_not_start_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir);
    store.publish_limits("m0", StoreLimits { total_micros: 1_000_000, per_day_micros: None }, false).unwrap();
    let before = status(&*store);
    let (engine, _) = engine("10", at);
    let err = Node::start(engine, sqlite(&dir), config("n1", at)).unwrap_err().to_string();
    assert!(err.contains("holon ledger raise"), "{err}");
    assert!(err.contains("10") && err.contains("1.00"), "{err}");
    assert_eq!(status(&*store), before, "nothing was written");
}

#[test]
fn held_calls_are_taken_once_and_expire_in_memory_and_sqlite() {
    common::held::held_calls_are_taken_once_and_expire(&MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    common::held::held_calls_are_taken_once_and_expire(&*sqlite(&dir));
}

#[test]
fn idempotency_keys_are_claimed_once_and_replayed_in_memory_and_sqlite() {
    let memory = std::sync::Arc::new(MemoryStore::new());
    common::held::idempotency_keys_are_claimed_once_and_replayed(&memory, &std::sync::Arc::clone(&memory));
    let dir = tempfile::tempdir().unwrap();
    common::held::idempotency_keys_are_claimed_once_and_replayed(&*sqlite(&dir), &*sqlite(&dir));
}

static HELD_CLOCK: AtomicI64 = AtomicI64::new(synthetic::AT_UNIX);
fn held_clock() -> Timestamp {
    Timestamp::from_unix(HELD_CLOCK.load(Ordering::SeqCst))
}

/// A call held on node A is approved by its mandate's issuer on node B, exactly once;
/// anyone else is refused and it stays held; node A cannot approve it locally (only
/// through the store), and forgets it once B took it; a held call that expired cannot be
/// approved anywhere.
#[test]
fn a_call_held_on_one_node_is_approved_on_another_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let build = || {
        let net =
            synthetic::network(&synthetic::Shape { agents: 10, mandates: 1, total: Amount::parse("10").unwrap() })
                .unwrap();
        let config =
            EngineConfig { store_backed: true, clock: held_clock, pending_ttl_s: 600, ..EngineConfig::default() };
        let engine = Arc::new(Engine::new(config));
        engine.publish(&net.input).unwrap();
        engine
    };
    let (a, b) = (build(), build());
    let node_a = Node::start(Arc::clone(&a), sqlite(&dir), config("a", held_clock)).unwrap();
    let node_b = Node::start(Arc::clone(&b), sqlite(&dir), config("b", held_clock)).unwrap();
    // syn/a9 costs 0.90, above the mandate's approval threshold of 0.50.
    let call = Call::new(a.mandate_ix("m0").unwrap(), a.agent_ix("syn/a9").unwrap(), held_clock());
    let held = loop {
        match a.admit(&call) {
            Admission::Held(p) => break p,
            Admission::Denied(d) if d.codes.contains(Code::LeasePending) => {
                std::thread::sleep(Duration::from_millis(1))
            }
            other => panic!("expected held, got {other:?}"),
        }
    };
    let id = node_a.held_id(held.id);
    let store = sqlite(&dir);
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.held_calls(None, held_clock().unix()).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the held call never reached the store");
        std::thread::sleep(Duration::from_millis(2));
    }
    let issuer = holon::pattern::Principal::parse("acct0").unwrap();
    let stranger = holon::pattern::Principal::parse("acct1").unwrap();
    assert!(matches!(
        a.approve(held.id, &issuer, held_clock()),
        Err(holon::engine::EngineError::ApproveThroughNode(_))
    ));
    assert!(node_b.approve(&id, &stranger, held_clock()).is_err(), "only the issuer approves");
    assert_eq!(store.held_calls(None, held_clock().unix()).unwrap().len(), 1, "still held");
    let admitted = loop {
        match node_b.approve(&id, &issuer, held_clock()).unwrap() {
            Admission::Allowed(r) => break r,
            Admission::Denied(d) if d.codes.iter().all(|c| c == Code::LeasePending) => {
                std::thread::sleep(Duration::from_millis(1))
            }
            other => panic!("expected allowed on node b, got {other:?}"),
        }
    };
    admitted.settle(Amount::parse("0.90").unwrap(), held_clock()).unwrap();
    assert!(matches!(node_b.approve(&id, &issuer, held_clock()), Err(holon::node::NodeError::UnknownHeld(_))));
    assert!(matches!(node_a.approve(&id, &issuer, held_clock()), Err(holon::node::NodeError::UnknownHeld(_))));
    // Node A forgets the call it held, now taken from the store on node B.
    let deadline = Instant::now() + Duration::from_secs(60);
    while a.stats().pending > 0 {
        assert!(Instant::now() < deadline, "node a kept the call approved elsewhere");
        std::thread::sleep(Duration::from_millis(5));
    }
    // A call that expired cannot be approved anywhere.
    let expiring = loop {
        match a.admit(&call) {
            Admission::Held(p) => break node_a.held_id(p.id),
            Admission::Denied(_) => std::thread::sleep(Duration::from_millis(1)),
            other => panic!("expected held, got {other:?}"),
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.held_calls(None, held_clock().unix()).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the held call never reached the store");
        std::thread::sleep(Duration::from_millis(2));
    }
    HELD_CLOCK.fetch_add(601, Ordering::SeqCst);
    assert!(matches!(node_b.approve(&expiring, &issuer, held_clock()), Err(holon::node::NodeError::UnknownHeld(_))));
    node_a.drain().unwrap();
    node_b.drain().unwrap();
    let s = status(&*store);
    assert_eq!((s.spent_micros, s.leased_micros), (900_000, 0), "the approved call was billed once");
}

/// A store written by the schema before held calls (version 1) is brought up to date when a
/// node opens it: its leases kept, the held calls' table added.
#[test]
fn a_version_one_sqlite_store_gains_held_calls_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let store = SqliteStore::open(&path).unwrap();
    store.publish_limits("m0", StoreLimits { total_micros: 1_000, per_day_micros: None }, false).unwrap();
    drop(store);
    let old = rusqlite::Connection::open(&path).unwrap();
    old.execute_batch("DROP TABLE held_calls; PRAGMA user_version = 1;").unwrap();
    drop(old);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(status(&store).limits.total_micros, 1_000);
    common::held::held_calls_are_taken_once_and_expire(&store);
}

/// Flushes whose commits went through but whose answers were lost are sent again exactly
/// as they were, and move nothing a second time: the store's spent is what was settled,
/// every lease goes back, and the drain's own flush (which closes the leases) is among
/// the lost answers. Before flushes carried what each lease held, a repeated give-back was
/// applied twice (budget freed that the node still used) or the node was stuck on a lease
/// its lost flush had closed.
#[test]
fn a_flush_whose_answer_was_lost_is_sent_again_and_applied_once() {
    let inner = Arc::new(MemoryStore::new());
    let lose = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (engine, call) = engine("10", at);
    let store = Box::new(common::lost_answers::LostAnswers { inner: Arc::clone(&inner), lose: Arc::clone(&lose) });
    let node = Node::start(Arc::clone(&engine), store, config("n1", at)).unwrap();
    let (first, _) = spend_until_refused(&engine, &call, 700, 300);
    lose.store(3, Ordering::SeqCst);
    let (second, _) = spend_until_refused(&engine, &call, 700, 300);
    std::thread::sleep(Duration::from_millis(200));
    lose.store(1, Ordering::SeqCst);
    node.drain().unwrap_err();
    // The drain's answer was lost: its flush committed anyway.
    let s = inner.status(Some("m0")).unwrap().remove(0);
    assert_eq!(s.spent_micros, first + second, "each settlement counted once");
    assert_eq!(s.leased_micros, 0, "every unused lease given back once");
    // A flush that names a lease the store closed is answered, not refused.
    let closed = FlushEntry { lease: 1, expect_outstanding_micros: Some(5), ..FlushEntry::default() };
    assert!(inner.flush("n1", &[closed], 0).is_ok());
}

#[test]
fn a_flush_entry_that_expects_another_outstanding_is_refused_and_changes_nothing() {
    let store = MemoryStore::new();
    store.publish_limits("m", StoreLimits { total_micros: 100_000, per_day_micros: None }, false).unwrap();
    let request = GrantRequest {
        node: "n".into(),
        mandate: "m".into(),
        day: None,
        want_micros: 100,
        min_micros: 1,
        ttl_s: 30,
        now_unix: 0,
    };
    let lease = store.grant(&request).unwrap().unwrap();
    let entry = |expect| FlushEntry {
        lease: lease.id,
        settle_micros: 10,
        give_back_micros: 20,
        expect_outstanding_micros: Some(expect),
        ..FlushEntry::default()
    };
    store.flush("n", &[entry(100)], 0).unwrap();
    // The same entry again: applied already, nothing moves.
    assert_eq!(store.flush("n", &[entry(100)], 0).unwrap()[0].outstanding_micros, 70);
    assert!(store.flush("n", &[entry(90)], 0).is_err(), "a node and a store that disagree");
    let s = store.status(Some("m")).unwrap().remove(0);
    assert_eq!((s.spent_micros, s.leased_micros), (10, 70));
}

#[test]
fn a_restarted_node_never_reuses_a_held_call_id_and_an_engine_has_one_node() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = engine("10", at);
    let first = Node::start(Arc::clone(&engine), sqlite(&dir), config("n1", at)).unwrap();
    assert!(matches!(
        Node::start(Arc::clone(&engine), sqlite(&dir), config("n2", at)),
        Err(holon::node::NodeError::AlreadyAttached)
    ));
    let id = first.held_id(7);
    first.drain().unwrap();
    let again = Node::start(Arc::clone(&engine), sqlite(&dir), config("n1", at)).unwrap();
    assert_ne!(again.held_id(7), id, "local ids start again at every start; store ids must not");
    again.drain().unwrap();
}

static BLOCK_CLOCK: AtomicI64 = AtomicI64::new(synthetic::AT_UNIX);
fn block_clock() -> Timestamp {
    Timestamp::from_unix(BLOCK_CLOCK.load(Ordering::SeqCst))
}

/// Documents published without `per_day` to a running store-backed engine stop the engine
/// checking the day, while the store keeps its `per_day` (a publish only lowers): the node
/// then admits nothing more through its leases (`per_day_exceeded`), and gives them back
/// once their day has passed. Before, day leases served later days.
#[test]
fn a_per_day_dropped_from_running_documents_stops_the_leases_and_gives_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, call) = engine("10", block_clock);
    let node = Node::start(Arc::clone(&engine), sqlite(&dir), config("n1", block_clock)).unwrap();
    let (spent, _) = spend_until_refused(&engine, &call, 900, 50);
    assert_eq!(spent, 50 * 900);
    let net =
        synthetic::network(&synthetic::Shape { agents: 4, mandates: 1, total: Amount::parse("10").unwrap() }).unwrap();
    let mut input = net.input.clone();
    let mut m = (*input.mandates[0]).clone();
    m.budget.per_day = None;
    input.mandates[0] = Arc::new(m);
    engine.publish(&input).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match engine.admit(&call) {
            Admission::Denied(d) if d.codes.contains(Code::PerDayExceeded) => break,
            Admission::Allowed(r) => r.release(call.at).unwrap(),
            _ => {}
        }
        assert!(Instant::now() < deadline, "the node kept its leases usable");
        std::thread::sleep(Duration::from_millis(2));
    }
    // The next day, the day-old leases go back to the store.
    BLOCK_CLOCK.fetch_add(86_400, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(&*sqlite(&dir)).nodes.iter().any(|n| n.node == "n1" && n.leased_micros > 0) {
        assert!(Instant::now() < deadline, "the node kept its past day's leases");
        std::thread::sleep(Duration::from_millis(5));
    }
    node.drain().unwrap();
    assert_eq!(status(&*sqlite(&dir)).spent_micros, spent);
}

/// Admits and settles `call` at its worst case until it is denied for the budget; a call
/// told `lease_pending` asks again (for up to a generous minute: the refill is waited for,
/// not timed). Returns the micro-units settled and the denial's codes.
fn spend_until_spent(engine: &Engine, call: &Call) -> (u64, Vec<Code>) {
    let mut settled = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match engine.admit(call) {
            Admission::Allowed(r) => {
                let worst = r.worst_case();
                settled += r.settle(worst, call.at).unwrap().kept.micros();
            }
            Admission::Denied(d) if d.codes.contains(Code::LeasePending) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Admission::Denied(d) => return (settled, d.codes.iter().collect()),
            Admission::Held(_) => panic!("not held"),
        }
    }
}

/// Calls of two sizes on one mandate: once less than the larger call is left, the smaller
/// ones are still served down to the last of the budget. The node asked the store only
/// for leases of at least its largest call, so it stranded up to one of them (here 2% of
/// the budget: 0.002 of 0.102 after 25 calls of 0.004).
#[test]
fn the_smaller_calls_spend_what_is_too_little_for_the_larger_ones() {
    let catalog = holon::catalog::Catalog::load(&["examples/agents".into()], None).unwrap();
    let mut mandate = holon::documents::load_mandate("examples/mandates/alice-root.yaml".as_ref()).unwrap();
    mandate.budget.total = Amount::parse("0.102").unwrap();
    mandate.budget.per_day = Some(Amount::parse("0.102").unwrap());
    let input = holon::engine::SnapshotInput {
        mandates: vec![Arc::new(mandate)],
        agents: catalog.entries.into_iter().map(|e| (Arc::new(e.manifest), e.record.map(Arc::new))).collect(),
        ..holon::engine::SnapshotInput::default()
    };
    let engine = Arc::new(Engine::new(EngineConfig { store_backed: true, ..EngineConfig::default() }));
    engine.publish(&input).unwrap();
    let store = Arc::new(MemoryStore::new());
    let node =
        Node::start(Arc::clone(&engine), Box::new(Arc::clone(&store)), config("two-sizes", Timestamp::now)).unwrap();
    let m = engine.mandate_ix("alice/m-2026-11").unwrap();
    let now = Timestamp::now();
    let large = Call::new(m, engine.agent_ix("acme/table-extract").unwrap(), now);
    let small = Call::new(m, engine.agent_ix("holon-labs/fx-convert").unwrap(), now);
    let (by_large, codes) = spend_until_spent(&engine, &large);
    assert_eq!((by_large, codes.as_slice()), (100_000, [Code::TotalExceeded].as_slice()), "25 calls of 0.004");
    let (by_small, codes) = spend_until_spent(&engine, &small);
    assert_eq!(by_small, 2_000, "the last 0.002 in two calls of 0.001 (denied {codes:?})");
    node.drain().unwrap();
    assert_eq!(store.status(Some("alice/m-2026-11")).unwrap()[0].spent_micros, 102_000, "nothing stranded");
}

/// Budget sitting in another live node's idle leases is not spent budget: a node refused
/// while the rest is there says `lease_pending` (it said `total_exceeded`: a false denial
/// while the budget sat idle elsewhere), and the idle node gives it all back within
/// `IDLE_EMPTY_MS`, so the rest is spent to the last call, nothing stranded.
#[test]
fn budget_idle_in_another_nodes_leases_comes_back_and_is_spent() {
    let store = Arc::new(MemoryStore::new());
    let (idle_engine, idle_call) = engine("1", Timestamp::now);
    let idle =
        Node::start(Arc::clone(&idle_engine), Box::new(Arc::clone(&store)), config("idle", Timestamp::now)).unwrap();
    // The idle node makes one call (taking its first lease), then none.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (first, worst) = loop {
        match idle_engine.admit(&idle_call) {
            Admission::Allowed(r) => {
                let worst = r.worst_case();
                break (r.settle(worst, idle_call.at).unwrap().kept.micros(), worst.micros());
            }
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            other => panic!("the idle node's call: {other:?}"),
        }
    };
    let held = status(&*store).nodes.iter().find(|n| n.node == "idle").map_or(0, |n| n.leased_micros);
    assert!(held >= 2 * worst, "the idle node holds more than a call: {held}");
    let (busy_engine, busy_call) = engine("1", Timestamp::now);
    let busy =
        Node::start(Arc::clone(&busy_engine), Box::new(Arc::clone(&store)), config("busy", Timestamp::now)).unwrap();
    let (mut settled, mut pending_while_held) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(120);
    let last = loop {
        match busy_engine.admit(&busy_call) {
            Admission::Allowed(r) => {
                settled += r.settle(Amount::from_micros(worst), busy_call.at).unwrap().kept.micros()
            }
            Admission::Denied(d) if d.codes.contains(Code::LeasePending) && Instant::now() < deadline => {
                if status(&*store).nodes.iter().any(|n| n.node == "idle" && n.leased_micros >= worst) {
                    pending_while_held += 1;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Admission::Denied(d) => break d.codes.iter().collect::<Vec<_>>(),
            Admission::Held(_) => panic!("a leaf call is never held"),
        }
    };
    assert_eq!(last, [Code::TotalExceeded], "the end is the budget's");
    assert!(pending_while_held > 0, "the busy node waited while the idle one held the rest");
    busy.drain().unwrap();
    idle.drain().unwrap();
    let s = status(&*store);
    let stranded = 1_000_000 - (first + settled);
    assert!(stranded < worst, "less than a call left: {stranded} (a call is {worst})");
    assert_eq!((s.spent_micros, s.leased_micros), (first + settled, 0));
}
