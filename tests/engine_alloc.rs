//! The allowed path (admit + settle, receipt handed to the channel sink), the denied path
//! and an orchestrator's call with a sub-call of its delegated run allocate nothing once
//! warm (the run's derived sub-mandate compiled once per snapshot, its copy and ledger from
//! the engine's pool): a counting global allocator proves it.
#![allow(unsafe_code)] // a counting global allocator is an `unsafe impl GlobalAlloc`

use holon::engine::{Admission, BatchSink, Call, ChannelSink, Engine, EngineConfig, SubCall, synthetic};
use holon::money::Amount;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn count<R>(f: impl FnOnce() -> R) -> (R, u64) {
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    let out = f();
    COUNTING.store(false, Ordering::Relaxed);
    (out, ALLOCATIONS.load(Ordering::Relaxed))
}

/// One test, so no other test thread allocates while counting.
#[test]
fn allowed_and_denied_paths_do_not_allocate() {
    let net = synthetic::network(&synthetic::Shape { agents: 10, mandates: 2, ..Default::default() }).unwrap();
    let (sink, rx) = ChannelSink::new(1 << 16);
    let engine = Engine::with_sink(EngineConfig::default(), Arc::new(sink));
    engine.publish(&net.input).unwrap();
    let m = engine.mandate_ix("m0").unwrap();
    let leaf = Call::new(m, engine.agent_ix("syn/a1").unwrap(), net.at);
    let denied = Call::new(m, engine.agent_ix("syn/a8").unwrap(), net.at);
    // Warm up: thread-locals, arc-swap's per-thread debt slots, the channel's blocks.
    for _ in 0..100 {
        if let Admission::Allowed(r) = engine.admit(&leaf) {
            r.settle(Amount::from_micros(1), net.at).unwrap();
        }
        let _ = engine.admit(&denied);
    }
    rx.try_iter().count();

    let (allowed, n) = count(|| {
        let mut allowed = 0;
        for _ in 0..1000 {
            if let Admission::Allowed(r) = engine.admit(&leaf) {
                r.settle(Amount::from_micros(1), net.at).unwrap();
                allowed += 1;
            }
        }
        allowed
    });
    assert_eq!(allowed, 1000);
    assert_eq!(n, 0, "the allowed path allocated {n} times in 1000 calls");

    let (denials, n) = count(|| (0..1000).filter(|_| matches!(engine.admit(&denied), Admission::Denied(_))).count());
    assert_eq!(denials, 1000);
    assert_eq!(n, 0, "the denied path allocated {n} times in 1000 calls");

    // The counter itself works: the held path allocates (it stores the pending call).
    let held = Call::new(m, engine.agent_ix("syn/a9").unwrap(), net.at);
    let (verdict, n) = count(|| engine.admit(&held).verdict());
    assert_eq!(verdict, holon::admission::Verdict::Held);
    assert!(n > 0, "the counting allocator counts");
    assert_eq!(rx.try_iter().count(), 2001, "every decision handed a receipt to the sink");

    // The batch sink: its batches are allocated up front and recycled, so handing over a
    // full one (every 64 receipts here) allocates nothing either.
    let (sink, rx) = BatchSink::new(1 << 16);
    let engine = Engine::with_sink(EngineConfig::default(), Arc::new(sink));
    engine.publish(&net.input).unwrap();
    let leaf = Call::new(engine.mandate_ix("m0").unwrap(), engine.agent_ix("syn/a1").unwrap(), net.at);
    for _ in 0..100 {
        if let Admission::Allowed(r) = engine.admit(&leaf) {
            r.settle(Amount::from_micros(1), net.at).unwrap();
        }
    }
    rx.try_iter().count();
    let (allowed, n) = count(|| {
        (0..1000)
            .filter(|_| match engine.admit(&leaf) {
                Admission::Allowed(r) => r.settle(Amount::from_micros(1), net.at).is_ok(),
                _ => false,
            })
            .count()
    });
    assert_eq!(allowed, 1000);
    assert_eq!(n, 0, "the allowed path with the batch sink allocated {n} times in 1000 calls");
    assert_eq!(rx.try_iter().count(), 1000, "every call's receipt reached the receiving end");

    orchestrator_calls_do_not_allocate(&engine, &net);
}

/// An orchestrator's admission, one sub-call of its run and the settle of both: the first
/// call compiles the pair's template and fills the pool; none after allocates.
fn orchestrator_calls_do_not_allocate(engine: &Engine, net: &synthetic::Network) {
    let orchestrator = Call::new(engine.mandate_ix("m0").unwrap(), engine.agent_ix("syn/a5").unwrap(), net.at);
    let leaf = engine.agent_ix("syn/a1").unwrap();
    let run_once = || match engine.admit(&orchestrator) {
        Admission::Allowed(r) => {
            assert!(r.is_delegated_run());
            let sub = SubCall { agent: leaf, capability: Some("syn.leaf"), at: net.at };
            let sub_ok = match r.sub_call(&sub) {
                Admission::Allowed(child) => child.settle(Amount::from_micros(1), net.at).is_ok(),
                _ => false,
            };
            sub_ok && r.settle(Amount::from_micros(2_000), net.at).is_ok()
        }
        _ => false,
    };
    for _ in 0..100 {
        assert!(run_once());
    }
    let (ran, n) = count(|| (0..1000).filter(|_| run_once()).count());
    assert_eq!(ran, 1000);
    assert_eq!(n, 0, "an orchestrator's call with a sub-call allocated {n} times in 1000 calls");
}
