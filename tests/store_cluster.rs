//! Many gateway nodes, as separate processes, on one SQLite ledger store file: a hot
//! mandate shared to the micro-unit, and `kill -9` trials (tests/common/cluster.rs). The
//! same runs against PostgreSQL are in tests/store_postgres.rs.
#![cfg(feature = "cli")]

mod common;
use common::cluster;
use holon::store::sqlite::SqliteStore;
use std::sync::Arc;

fn temp(tag: &str) -> (tempfile::TempDir, String, SqliteStore) {
    let dir = tempfile::Builder::new().prefix(&format!("holon-cluster-{tag}")).tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let store = SqliteStore::open(&path).unwrap();
    (dir, format!("sqlite:{}", path.display()), store)
}

#[test]
fn three_processes_share_one_hot_mandate_on_sqlite() {
    let (_dir, url, store) = temp("three");
    cluster::three_nodes_share_one_budget(&url, &store, "20", 20_000_000);
}

#[test]
fn fifty_kill_nine_trials_on_sqlite() {
    let (_dir, url, store) = temp("kill");
    cluster::kill_nine_trials(&url, &store, 50);
}

/// The same with two sub-mandates of the hot mandate (calls round the parent and its two
/// children, all on the parent's budget): every row sampled within its limit.
#[test]
fn three_processes_share_a_parent_and_two_children_on_sqlite() {
    let (_dir, url, store) = temp("three-children");
    cluster::three_nodes_sharing(&url, &store, ("20", 20_000_000), 2);
}

#[test]
fn kill_nine_trials_with_a_parent_and_two_children_on_sqlite() {
    let (_dir, url, store) = temp("kill-children");
    cluster::kill_nine_trials_with(&url, &store, 10, 2);
}

/// A node opening a fresh SQLite file while another process's connection reads it waits
/// for the reader (SQLite's busy wait, then tries again) instead of failing. (Two `loadtest` nodes
/// starting together on a fresh file once failed "database is locked" in
/// `.ci/store-bench`; neither this test nor the next reproduced it, see `sqlite::wal`.)
#[test]
fn a_fresh_file_read_by_another_connection_is_still_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let reader = rusqlite::Connection::open(&path).unwrap();
    reader.execute_batch("CREATE TABLE other (x INTEGER); BEGIN; SELECT count(*) FROM other;").unwrap();
    let opener = std::thread::spawn(move || SqliteStore::open(&path).map(|_| ()));
    std::thread::sleep(std::time::Duration::from_millis(300));
    reader.execute_batch("COMMIT").unwrap();
    opener.join().unwrap().expect("the store waits for the reader, then opens");
}

/// Holds the file's write lock (`BEGIN IMMEDIATE` on a connection of its own) until the
/// returned sender is used or dropped; `held` says when it has the lock.
fn hold_the_write_lock(path: &std::path::Path) -> (std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let (held_tx, held) = std::sync::mpsc::channel::<()>();
    let path = path.to_owned();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE; UPDATE mandates SET spent = spent WHERE 0;").unwrap();
        held_tx.send(()).unwrap();
        let _ = wait.recv();
        conn.execute_batch("COMMIT").unwrap();
    });
    held.recv().unwrap();
    (release, holder)
}

/// Another node holds the SQLite write lock for longer than SQLite's busy wait: a node's
/// start and every store step wait for it (bounded retries with a backoff) and then go
/// through, instead of failing "database is locked" (two cluster runs failed so on a
/// loaded machine: `cannot compare the limits of mandate 'm0' with the store's`).
#[test]
fn a_node_starts_and_every_step_goes_through_while_another_process_holds_the_lock_past_the_busy_wait() {
    use holon::engine::{Engine, EngineConfig, synthetic};
    use holon::node::{Node, NodeConfig};
    use holon::store::sqlite::BUSY_TIMEOUT_MS;
    use holon::store::{FlushEntry, GrantRequest, HeldCall, LedgerStore, StoreLimits};
    use std::time::{Duration, Instant};

    let (_dir, _url, store) = temp("busy");
    let path = _dir.path().join("ledger.db");
    let limits = StoreLimits { total_micros: 10_000_000, per_day_micros: None };
    store.publish_limits("m1", limits, false).unwrap();
    let now = synthetic::AT_UNIX;
    let request = |node: &str| GrantRequest {
        node: node.to_owned(),
        mandate: "m1".to_owned(),
        day: None,
        want_micros: 1_000,
        min_micros: 1,
        ttl_s: 60,
        now_unix: now,
    };
    let lease = store.grant(&request("steps")).unwrap().unwrap();
    let held = HeldCall {
        id: "steps:1:1".to_owned(),
        mandate: "m1".to_owned(),
        agent: "syn/a1".to_owned(),
        at_unix: now,
        max_cost_micros: None,
        by_capability: false,
        worst_micros: 1,
        expires_unix: now + 600,
    };
    let hold_for = Duration::from_millis(BUSY_TIMEOUT_MS + 1_500);
    let (release, holder) = hold_the_write_lock(&path);
    let started = Instant::now();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(hold_for);
        release.send(()).unwrap();
    });
    // Each step on a handle of its own, all waiting for the lock at once.
    type Step<'a> = (&'static str, Box<dyn Fn(&SqliteStore) -> Result<(), String> + Send + Sync + 'a>);
    let flush = FlushEntry {
        lease: lease.id,
        settle_micros: 10,
        expect_outstanding_micros: Some(1_000),
        ..FlushEntry::default()
    };
    let steps: Vec<Step<'_>> = vec![
        ("publish_limits", Box::new(|s| s.publish_limits("m1", limits, false).map(|_| ()).map_err(|e| e.to_string()))),
        ("grant", Box::new(|s| s.grant(&request("steps")).map(|_| ()).map_err(|e| e.to_string()))),
        ("flush", Box::new(|s| s.flush("steps", &[flush], now).map(|_| ()).map_err(|e| e.to_string()))),
        ("status", Box::new(|s| s.status(None).map(|_| ()).map_err(|e| e.to_string()))),
        ("hold", Box::new(|s| s.hold(&held).map_err(|e| e.to_string()))),
        ("held_calls", Box::new(|s| s.held_calls(None, now).map(|_| ()).map_err(|e| e.to_string()))),
        ("take_held", Box::new(|s| s.take_held("steps:1:0", now).map(|_| ()).map_err(|e| e.to_string()))),
        ("release_held", Box::new(|s| s.release_held("steps:1:0").map_err(|e| e.to_string()))),
        ("reconcile", Box::new(|s| s.reconcile("gone", now, true).map(|_| ()).map_err(|e| e.to_string()))),
    ];
    let results = std::thread::scope(|s| {
        let node = s.spawn(|| {
            let started = Instant::now();
            let net = synthetic::network(&synthetic::Shape { agents: 4, mandates: 1, ..Default::default() }).unwrap();
            let engine = Arc::new(Engine::new(EngineConfig { store_backed: true, ..EngineConfig::default() }));
            engine.publish(&net.input).unwrap();
            let store = Box::new(SqliteStore::open(&path).unwrap());
            let result = Node::start(engine, store, NodeConfig::new("starting")).map(|n| n.drain().map(|_| ()));
            ("Node::start", started.elapsed(), format!("{result:?}"), matches!(result, Ok(Ok(()))))
        });
        let handles: Vec<_> = steps
            .iter()
            .map(|(name, step)| {
                let path = &path;
                s.spawn(move || {
                    let started = Instant::now();
                    let result = SqliteStore::open(path).map_err(|e| e.to_string()).and_then(|store| step(&store));
                    (*name, started.elapsed(), format!("{result:?}"), result.is_ok())
                })
            })
            .collect();
        let mut results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        results.push(node.join().unwrap());
        results
    });
    releaser.join().unwrap();
    holder.join().unwrap();
    for (step, waited, result, ok) in results {
        assert!(ok, "{step} failed while another process held the lock: {result}");
        assert!(waited >= Duration::from_millis(BUSY_TIMEOUT_MS), "{step} did not wait for the lock ({waited:?})");
    }
    assert!(started.elapsed() >= hold_for);
}

/// Past its patience a step fails, saying how long another process held the lock.
#[test]
fn a_step_that_waits_past_its_bound_says_how_long_it_waited() {
    let (dir, _url, _store) = temp("patience");
    let path = dir.path().join("ledger.db");
    let store = SqliteStore::open_with_busy_wait(&path, 1_500).unwrap();
    let (release, holder) = hold_the_write_lock(&path);
    let started = std::time::Instant::now();
    let err = holon::store::LedgerStore::status(&store, None).unwrap_err().to_string();
    let waited = started.elapsed();
    release.send(()).unwrap();
    holder.join().unwrap();
    assert!(waited >= std::time::Duration::from_millis(1_000), "it gave up after {waited:?}");
    assert!(err.contains("held the store file's write lock for") && err.contains("nothing was written"), "{err}");
    assert!(holon::store::LedgerStore::status(&store, None).is_ok(), "free again, the same handle works");
}
