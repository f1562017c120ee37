//! The instruction-count probe of the CI gate (`.ci/bench-gate`): runs `N` allowed-path
//! admit+settle calls (receipts handed to the default channel sink) after a warm-up.
//! The gate runs it under callgrind with `N = 0` and with `N = 20000`; the difference
//! divided by 20000 is the instructions of one admit+settle, independent of machine load.
//!
//! With a further argument `sub`, the call is under a depth-2 sub-mandate (`m0/s1/s2`:
//! reserved on three ledgers); with `batch`, receipts go to the batch sink
//! (`receipt::BatchSink`) instead; with `orch`, each call is an orchestrator's (`syn/a5`)
//! with one sub-call of its delegated run, both settled: docs/PERFORMANCE.md's figures (the
//! gate counts the root with the channel sink).
//!
//! `cargo build --release -p holon-bench-gate --bin icount && ./target/release/icount 20000`

use std::sync::Arc;

use holon::engine::{Admission, BatchSink, Call, ChannelSink, Engine, EngineConfig, ReceiptSink, SubCall, synthetic};
use holon::money::Amount;

const WARM_UP: u64 = 1_000;
/// The most calls one probe makes after the warm-up. The receipt room is sized for it
/// whatever `N` is, so that both probes build the same sink: a room sized by `N` put the
/// sink's construction (about 20 instructions per slot) into the difference.
const CALLS_MAX: u64 = 20_000;

/// Orchestrator calls, each with one sub-call of its run, both settled (apart from the
/// root loop, so neither changes how the other is compiled).
#[inline(never)]
fn orchestrators(engine: &Engine, mandate: &str, n: u64, net: &synthetic::Network, receipts: impl Fn() -> usize) {
    let call = Call::new(engine.mandate_ix(mandate).expect("mandate"), engine.agent_ix("syn/a5").expect("a5"), net.at);
    let sub = SubCall { agent: engine.agent_ix("syn/a1").expect("a1"), capability: Some("syn.leaf"), at: net.at };
    let mut kept = 0u64;
    for i in 0..WARM_UP + n {
        let Admission::Allowed(r) = engine.admit(std::hint::black_box(&call)) else { panic!("expected allowed") };
        let Admission::Allowed(child) = r.sub_call(std::hint::black_box(&sub)) else { panic!("expected allowed") };
        kept += child.settle(Amount::from_micros(i % 2), call.at).expect("settle").kept.micros();
        kept += r.settle(Amount::from_micros(2_000), call.at).expect("settle").kept.micros();
    }
    println!("{} orchestrator calls, kept {kept} micros, {} receipts", WARM_UP + n, receipts());
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(0);
    let sub = std::env::args().skip(2).any(|a| a == "sub");
    let batch = std::env::args().skip(2).any(|a| a == "batch");
    let orch = std::env::args().skip(2).any(|a| a == "orch");
    let mut net = synthetic::network(&synthetic::Shape { agents: 100, mandates: 10, ..Default::default() })
        .expect("synthetic network");
    let mandate = if sub { synthetic::add_chain(&mut net, 2).expect("chain") } else { "m0".to_owned() };
    // Room for every receipt, so no drop path and no drain thread skew the count.
    // (An orchestrator's call makes two receipts: its own and its sub-call's.)
    assert!(n <= CALLS_MAX, "at most {CALLS_MAX} calls");
    let room = usize::try_from(2 * (WARM_UP + CALLS_MAX)).expect("receipt room fits memory") + 1;
    let (sink, rx): (Arc<dyn ReceiptSink>, _) = if batch {
        let (sink, rx) = BatchSink::new(room);
        (Arc::new(sink), rx)
    } else {
        // A shard per thread: this one thread's shard must hold them all.
        let (sink, rx) = ChannelSink::new(room * holon::engine::receipt::SINK_SHARDS);
        (Arc::new(sink), rx)
    };
    let engine = Engine::with_sink(EngineConfig::default(), sink);
    engine.publish(&net.input).expect("publish");
    if orch {
        return orchestrators(&engine, &mandate, n, &net, || rx.len());
    }
    let call = Call::new(engine.mandate_ix(&mandate).expect("mandate"), engine.agent_ix("syn/a1").expect("a1"), net.at);
    let mut kept = 0u64;
    // The warm-up runs in both probes, so it cancels out of the difference.
    for i in 0..WARM_UP + n {
        match engine.admit(std::hint::black_box(&call)) {
            Admission::Allowed(r) => {
                kept += r.settle(Amount::from_micros(i % 2), call.at).expect("settle").kept.micros()
            }
            other => panic!("expected allowed: {other:?}"),
        }
    }
    println!("{} calls, kept {kept} micros, {} receipts", WARM_UP + n, rx.len());
}
