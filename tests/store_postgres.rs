//! The PostgreSQL store against a real PostgreSQL 15: the one named by
//! `HOLON_TEST_POSTGRES` (`.ci/run` starts one), or else a throwaway cluster this test
//! starts with `.ci/postgres` and stops at the end. The restart test always starts a
//! cluster of its own, since it stops and starts that server. No mock stands in for the
//! database.
#![cfg(feature = "postgres")]

mod common;
use common::store_model::{op, reconciled_and_closed_leases_are_kept, run, share_one_budget};
use holon::store::postgres::{POOL_CONNECTIONS_MAX, POOL_WAIT_MS, PostgresStore};
use holon::store::{FlushEntry, GrantRequest, LedgerStore, StoreError, StoreLimits};
use proptest::strategy::{Strategy, ValueTree};

/// A database server for this test binary; a cluster it started is stopped on drop.
struct Server {
    url: String,
    started: bool,
    /// The `.ci/postgres` state file of the cluster (`HOLON_PG_STATE`).
    state: String,
}

impl Server {
    /// The shared server: `HOLON_TEST_POSTGRES`, or a cluster started here.
    fn get() -> Server {
        if let Ok(url) = std::env::var("HOLON_TEST_POSTGRES") {
            return Server { url, started: false, state: String::new() };
        }
        Server::own(".ci/.postgres-state")
    }

    /// A cluster of this test's own, with its own state file.
    fn own(state: &str) -> Server {
        let mut server = Server { url: String::new(), started: false, state: state.to_owned() };
        let out = server.ci_postgres("start");
        let url = out.trim().strip_prefix("export HOLON_TEST_POSTGRES=").unwrap().to_owned();
        server.url = url;
        server.started = true;
        server
    }

    /// Runs `.ci/postgres VERB` on this server's cluster; returns what it printed.
    fn ci_postgres(&self, verb: &str) -> String {
        let out = std::process::Command::new("bash")
            .args([".ci/postgres", verb])
            .env("HOLON_PG_STATE", &self.state)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`.ci/postgres {verb}` failed (for the store tests set HOLON_TEST_POSTGRES, or install the PostgreSQL 15 \
             server binaries for .ci/postgres): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A fresh database on the server, so each case starts from an empty store.
    fn fresh(&self, name: &str) -> String {
        let mut admin = postgres::Client::connect(&self.url, postgres::NoTls).unwrap();
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name}")).unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let (base, _) = self.url.rsplit_once('/').unwrap();
        format!("{base}/{name}")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.started {
            let _ = std::process::Command::new("bash")
                .args([".ci/postgres", "stop"])
                .env("HOLON_PG_STATE", &self.state)
                .status();
        }
    }
}

fn ask(node: &str, want: u64) -> GrantRequest {
    GrantRequest {
        node: node.into(),
        mandate: "m".into(),
        day: None,
        want_micros: want,
        min_micros: 1,
        ttl_s: 30,
        now_unix: 0,
    }
}

/// One test, so one server for every case (cargo runs tests of a binary in parallel).
#[test]
fn the_postgres_store() {
    let server = Server::get();
    the_model_holds(&server);
    three_connections_share_one_budget(&server);
    a_lease_renewed_while_a_reconcile_waits_is_left_alone(&server);
    bad_urls_and_newer_schemas_are_clear_errors(&server);
    one_handle_holds_at_most_its_pool(&server);
    reconciled_and_closed_leases_are_kept(&PostgresStore::connect(&server.fresh("holon_kept")).unwrap());
    held_calls_are_taken_once(&server);
}

/// Held calls on PostgreSQL: the shared checks, then eight handles race to take one held
/// call: exactly one gets it (a `DELETE … RETURNING` in one transaction).
fn held_calls_are_taken_once(server: &Server) {
    let url = server.fresh("holon_held");
    common::held::held_calls_are_taken_once_and_expire(&PostgresStore::connect(&url).unwrap());
    common::held::idempotency_keys_are_claimed_once_and_replayed(
        &PostgresStore::connect(&url).unwrap(),
        &PostgresStore::connect(&url).unwrap(),
    );
    keys_claimed_at_once_by_eight_handles_go_to_one(&url);
    PostgresStore::connect(&url).unwrap().hold(&common::held::call("n1:9", "m0", i64::MAX)).unwrap();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let takers: Vec<_> = (0..8)
        .map(|_| {
            let (url, barrier) = (url.clone(), std::sync::Arc::clone(&barrier));
            std::thread::spawn(move || {
                let store = PostgresStore::connect(&url).unwrap();
                barrier.wait();
                store.take_held("n1:9", 0).unwrap().is_some()
            })
        })
        .collect();
    let took = takers.into_iter().map(|t| t.join().unwrap()).filter(|took| *took).count();
    assert_eq!(took, 1, "a held call is taken exactly once");
}

/// The server stops under a live store handle: steps fail `Unavailable` within the pool's
/// wait and write nothing; the server starts again, and the same handle (not reopened)
/// works. With one connection per handle and no reconnect, the handle stayed dead.
#[test]
fn a_store_handle_outlives_a_server_restart() {
    let server = Server::own(&format!(".ci/.postgres-state-restart-{}", std::process::id()));
    let store = PostgresStore::connect(&server.fresh("holon_restart")).unwrap();
    store.publish_limits("m", StoreLimits { total_micros: 1_000_000, per_day_micros: None }, false).unwrap();
    let first = store.grant(&ask("a", 100)).unwrap().unwrap();

    server.ci_postgres("pause");
    // The pooled connection fails its step; the next step finds no server to connect to.
    match store.grant(&ask("b", 100)) {
        Err(StoreError::Unavailable(_)) => {}
        other => panic!("a grant with the server down: {other:?}"),
    }
    let started = std::time::Instant::now();
    match store.grant(&ask("b", 100)) {
        Err(StoreError::Unavailable(message)) => assert!(message.contains("reconnects by itself"), "{message}"),
        other => panic!("a grant with the server down: {other:?}"),
    }
    let waited = started.elapsed();
    // It gives up (bounded); generous above the pool's wait, for a loaded machine.
    assert!(waited < std::time::Duration::from_millis(POOL_WAIT_MS + 30_000), "waited {waited:?}");
    assert!(matches!(store.status(None), Err(StoreError::Unavailable(_))));

    server.ci_postgres("resume");
    // A connection from before the restart fails its first step (nothing written) and is
    // discarded; the same handle's next step connects afresh.
    let second = match store.grant(&ask("b", 100)) {
        Err(StoreError::Unavailable(_)) => store.grant(&ask("b", 100)),
        other => other,
    }
    .unwrap()
    .expect("a grant once the server is back");
    let s = &store.status(Some("m")).unwrap()[0];
    // The grants refused while the server was down left nothing behind.
    assert_eq!((s.spent_micros, s.leased_micros), (0, first.amount_micros + second.amount_micros));
    assert_eq!(s.nodes.len(), 2, "{s:?}");
    let entry = |lease: u64| FlushEntry { lease, settle_micros: 100, close: true, ..FlushEntry::default() };
    store.flush("a", &[entry(first.id)], 0).unwrap();
    store.flush("b", &[entry(second.id)], 0).unwrap();
    assert_eq!(store.status(Some("m")).unwrap()[0].spent_micros, 200);
}

/// Eight threads share one handle: it never holds more than `POOL_CONNECTIONS_MAX`
/// connections (threads beyond it wait their turn), and every settlement counts.
fn one_handle_holds_at_most_its_pool(server: &Server) {
    const THREADS: usize = 8;
    const ROUNDS: u64 = 25;
    let url = server.fresh("holon_pool");
    let store = PostgresStore::connect(&url).unwrap();
    let mut admin = postgres::Client::connect(&server.url, postgres::NoTls).unwrap();
    // The connection `connect` used for the schema is closed before the pool opens any
    // (waited for: the server notes the close a moment later, later on a loaded machine;
    // and before the first step, whose pooled connection stays open idle).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while admin
        .query_one("SELECT count(*) FROM pg_stat_activity WHERE datname = 'holon_pool'", &[])
        .unwrap()
        .get::<_, i64>(0)
        > 0
    {
        assert!(std::time::Instant::now() < deadline, "the schema's connection stayed open");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    store.publish_limits("m", StoreLimits { total_micros: 1_000_000_000, per_day_micros: None }, false).unwrap();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let mut most = 0i64;
    std::thread::scope(|s| {
        for n in 0..THREADS {
            let (store, done) = (&store, &done);
            s.spawn(move || {
                let node = format!("node-{n}");
                for _ in 0..ROUNDS {
                    let lease = store.grant(&ask(&node, 10)).unwrap().unwrap();
                    let entry = FlushEntry {
                        lease: lease.id,
                        settle_micros: lease.amount_micros,
                        close: true,
                        ..FlushEntry::default()
                    };
                    store.flush(&node, &[entry], 0).unwrap();
                }
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
        while done.load(std::sync::atomic::Ordering::SeqCst) < THREADS {
            let open: i64 = admin
                .query_one("SELECT count(*) FROM pg_stat_activity WHERE datname = 'holon_pool'", &[])
                .unwrap()
                .get(0);
            most = most.max(open);
        }
    });
    assert!((1..=i64::from(POOL_CONNECTIONS_MAX)).contains(&most), "{most} connections at once");
    let s = &store.status(Some("m")).unwrap()[0];
    assert_eq!((s.spent_micros, s.leased_micros), (THREADS as u64 * ROUNDS * 10, 0));
}

/// The state machine of tests/store_model.rs, each case on a fresh database.
fn the_model_holds(server: &Server) {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = proptest::collection::vec(op(), 1..60);
    for case in 0..12 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let url = server.fresh(&format!("holon_model_{case}"));
        let store = PostgresStore::connect(&url).unwrap();
        // The day rows as committed, read through a connection of the test's own.
        let mut reader = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let mut days = || {
            reader
                .query("SELECT mandate, day, spent, leased FROM holon_days ORDER BY mandate, day", &[])
                .unwrap()
                .iter()
                .map(|r| {
                    let (m, d, s, l): (String, i64, i64, i64) = (r.get(0), r.get(1), r.get(2), r.get(3));
                    (m, u64::try_from(d).unwrap(), u64::try_from(s).unwrap(), u64::try_from(l).unwrap())
                })
                .collect()
        };
        assert_eq!(run(&store, &mut days, &ops).map(|_| ()), Ok(()), "case {case}: {ops:?}");
    }
}

/// Three connections (as three nodes would hold) take leases and settle on one hot
/// mandate at once; sampled throughout, spent + leased never passes the limit, and at the
/// end spent is exactly what they settled, to the micro-unit.
fn three_connections_share_one_budget(server: &Server) {
    let url = server.fresh("holon_shared");
    PostgresStore::connect(&url)
        .unwrap()
        .publish_limits("m", StoreLimits { total_micros: 90_000, per_day_micros: None }, false)
        .unwrap();
    let settled = share_one_budget(3, 700, usize::MAX, || PostgresStore::connect(&url).unwrap());
    let store = PostgresStore::connect(&url).unwrap();
    let s = &store.status(Some("m")).unwrap()[0];
    assert_eq!((s.spent_micros, s.leased_micros), (settled, 0));
    assert!(s.spent_micros >= 90_000 - 700, "the budget ran down to less than one lease: {s:?}");
}

fn bad_urls_and_newer_schemas_are_clear_errors(server: &Server) {
    for url in ["postgres://", "not a url", "postgres://postgres@127.0.0.1:1/postgres"] {
        match PostgresStore::connect(url) {
            Err(StoreError::Unavailable(message)) => assert!(!message.is_empty()),
            other => panic!("{url}: {other:?}"),
        }
    }
    let url = server.fresh("holon_newer");
    drop(PostgresStore::connect(&url).unwrap());
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client.execute("INSERT INTO holon_schema (version) VALUES (99)", &[]).unwrap();
    let tables_before: i64 = client
        .query_one("SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'holon_%'", &[])
        .unwrap()
        .get(0);
    let err = PostgresStore::connect(&url).unwrap_err().to_string();
    assert!(err.contains("newer holon") && err.contains("upgrade"), "{err}");
    let tables_after: i64 = client
        .query_one("SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'holon_%'", &[])
        .unwrap()
        .get(0);
    assert_eq!(tables_before, tables_after);
}

/// Found by review: `reconcile(expired_only)` chose the expired leases before it held the
/// mandates' locks and never looked again, so a lease its node renewed in that gap was
/// reconciled all the same. Another session holds the mandate's lock, the reconcile waits
/// on it, the node renews its lease, and the reconcile must then leave the lease alone.
fn a_lease_renewed_while_a_reconcile_waits_is_left_alone(server: &Server) {
    let url = server.fresh("holon_race");
    let store = PostgresStore::connect(&url).unwrap();
    store.publish_limits("m", StoreLimits { total_micros: 1_000, per_day_micros: None }, false).unwrap();
    let mut request = ask("a", 10);
    request.now_unix = 1_000;
    request.ttl_s = 10;
    request.min_micros = 10;
    let lease = store.grant(&request).unwrap().unwrap();
    assert_eq!(lease.expires_unix, 1_010);
    let mut holder = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = holder.transaction().unwrap();
    tx.query("SELECT id FROM holon_mandates WHERE id = 'm' FOR UPDATE", &[]).unwrap();
    let reconciled = std::thread::scope(|s| {
        let waiting = s.spawn(|| PostgresStore::connect(&url).unwrap().reconcile("a", 1_010, true).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(500));
        // The node's flush renews the lease (as the holder of the lock, it commits first).
        tx.execute("UPDATE holon_leases SET expires = 1070 WHERE id = $1", &[&i64::try_from(lease.id).unwrap()])
            .unwrap();
        tx.commit().unwrap();
        waiting.join().unwrap()
    });
    assert_eq!(reconciled.counted_micros, 0, "{reconciled:?}");
    let entry = FlushEntry { lease: lease.id, settle_micros: 1, ..FlushEntry::default() };
    assert_eq!(store.flush("a", &[entry], 1_020).unwrap()[0].state, holon::store::LeaseState::Open);
}

/// Gateway nodes on PostgreSQL (a cluster of this test's own, so stopping it disturbs no
/// other test): three `holon loadtest` processes share one hot mandate to the micro-unit;
/// 50 `kill -9` trials count each dead node's leases exactly once; the same with a parent and
/// two sub-mandates (10 trials); and the server stopped
/// under a running node: it admits within the leases it holds, then denies
/// `store_unavailable`, and recovers by itself when the server returns.
#[cfg(feature = "cli")]
#[test]
fn gateway_nodes_on_postgres() {
    let server = Server::own(&format!(".ci/.postgres-state-nodes-{}", std::process::id()));
    let url = server.fresh("holon_three");
    let store = PostgresStore::connect(&url).unwrap();
    common::cluster::three_nodes_share_one_budget(&url, &store, "20", 20_000_000);

    let url = server.fresh("holon_kill");
    let store = PostgresStore::connect(&url).unwrap();
    common::cluster::kill_nine_trials(&url, &store, 50);

    // A parent and two sub-mandates on one hot parent budget (issue #28).
    let url = server.fresh("holon_three_children");
    let store = PostgresStore::connect(&url).unwrap();
    common::cluster::three_nodes_sharing(&url, &store, ("20", 20_000_000), 2);
    let url = server.fresh("holon_kill_children");
    let store = PostgresStore::connect(&url).unwrap();
    common::cluster::kill_nine_trials_with(&url, &store, 10, 2);

    store_down_under_a_node(&server, &server.fresh("holon_down"));
}

#[cfg(feature = "cli")]
fn store_down_under_a_node(server: &Server, url: &str) {
    use holon::admission::Code;
    use holon::engine::{Admission, Call, Engine, EngineConfig, synthetic};
    use holon::money::Amount;
    use holon::node::{Node, NodeConfig};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let net =
        synthetic::network(&synthetic::Shape { agents: 4, mandates: 1, total: Amount::from_micros(1_000_000_000) })
            .unwrap();
    let engine = Arc::new(Engine::new(EngineConfig { store_backed: true, ..EngineConfig::default() }));
    engine.publish(&net.input).unwrap();
    let call = Call::new(engine.mandate_ix("m0").unwrap(), engine.agent_ix("syn/a1").unwrap(), net.at);
    let node_store = Box::new(PostgresStore::connect(url).unwrap());
    let config = NodeConfig { flush_ms: 20, ..NodeConfig::new("down") };
    let node = Node::start(Arc::clone(&engine), node_store, config).unwrap();
    let mut settled = 0u64;
    let mut admit = |until: &dyn Fn(&[Code]) -> bool, deadline: Duration| -> (u64, Vec<Code>) {
        let started = Instant::now();
        let mut admitted = 0;
        loop {
            let codes: Vec<Code> = match engine.admit(&call) {
                Admission::Allowed(r) => {
                    settled += r.settle(Amount::from_micros(900), call.at).unwrap().kept.micros();
                    admitted += 1;
                    Vec::new()
                }
                Admission::Denied(d) => d.codes.iter().collect(),
                Admission::Held(_) => panic!("a leaf call is never held"),
            };
            if until(&codes) || started.elapsed() > deadline {
                return (admitted, codes);
            }
            if !codes.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    };
    // Warm: the node admits (waited for, not a window).
    let (warm, _) = admit(&|codes| codes.is_empty(), Duration::from_secs(60));
    assert!(warm > 0);
    server.ci_postgres("pause");
    // Within the leases held the node goes on; then it fails closed.
    let (during, codes) = admit(&|codes| codes == [Code::StoreUnavailable], Duration::from_secs(120));
    assert_eq!(codes, [Code::StoreUnavailable], "the node never said store_unavailable");
    assert!(during > 0, "the node admitted nothing within the leases it held");
    server.ci_postgres("resume");
    let (after, _) = admit(&|codes| codes.is_empty(), Duration::from_secs(120));
    assert!(after > 0, "the node did not recover by itself");
    let stats = node.drain().unwrap();
    assert!(stats.store_errors > 0);
    let s = PostgresStore::connect(url).unwrap().status(Some("m0")).unwrap().remove(0);
    assert_eq!(s.spent_micros, settled, "everything settled while the server was away was flushed");
    assert_eq!(s.leased_micros, 0);
}

/// Eight handles (eight nodes) claim one new key at once: exactly one gets it, the others
/// find it in flight (the insert waits for the first claim's commit, then does nothing).
fn keys_claimed_at_once_by_eight_handles_go_to_one(url: &str) {
    use holon::store::{KeyClaim, KeyState};
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let claims: Vec<_> = (0..8)
        .map(|n| {
            let (url, barrier) = (url.to_owned(), std::sync::Arc::clone(&barrier));
            std::thread::spawn(move || {
                let store = PostgresStore::connect(&url).unwrap();
                barrier.wait();
                let node = format!("n{n}");
                let claim = KeyClaim {
                    scope: "gateway",
                    key: "race",
                    digest: "d",
                    node: &node,
                    now_unix: 1,
                    keep_s: 60,
                    keys_max: u64::MAX,
                };
                store.claim_key(&claim).unwrap()
            })
        })
        .collect();
    let states: Vec<KeyState> = claims.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(states.iter().filter(|s| **s == KeyState::Claimed).count(), 1, "{states:?}");
    assert_eq!(states.iter().filter(|s| **s == KeyState::InFlight).count(), 7, "{states:?}");
}

/// A peer that accepts the connection and never greets (a hung server, a port that is not
/// PostgreSQL's) is an error within the connect timeout. Before, the client's timeout
/// covered the socket only and the store's open waited for ever (found through the Python
/// package's GIL probe, bindings/python/tests/test_concurrency.py).
#[test]
fn a_server_that_never_answers_is_an_error_not_a_hang() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let err = PostgresStore::connect(&format!("postgres://holon@127.0.0.1:{port}/holon")).unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("did not answer within 5 s"), "{err}");
    drop(listener);
}
