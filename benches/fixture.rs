//! The fixture of the admission bench (`benches/admission.rs`) and of the CI gate's quick
//! bench (`benches/gate/quick.rs`): one engine shape and one allowed path, measured by both.

use std::hint::black_box;
use std::sync::Arc;

use holon::engine::{Admission, BatchSink, Call, ChannelSink, Engine, EngineConfig, ReceiptSink, synthetic};
use holon::money::Amount;

pub(crate) struct Fixture {
    pub(crate) engine: Engine,
    pub(crate) net: synthetic::Network,
    _drain: std::thread::JoinHandle<()>,
}

/// An engine over a synthetic network whose receipts go through the default channel sink,
/// drained by a thread (as in a gateway).
pub(crate) fn fixture(agents: usize, mandates: usize) -> Fixture {
    fixture_with(agents, mandates, false)
}

/// The same, receipts through the batch sink (`receipt::BatchSink`, the load test's room)
/// when `batched`.
pub(crate) fn fixture_with(agents: usize, mandates: usize, batched: bool) -> Fixture {
    let net = synthetic::network(&synthetic::Shape { agents, mandates, ..Default::default() }).unwrap();
    let (sink, rx): (Arc<dyn ReceiptSink>, _) = if batched {
        let (sink, rx) = BatchSink::new(1 << 18);
        (Arc::new(sink), rx)
    } else {
        let (sink, rx) = ChannelSink::new(holon::engine::receipt::RECEIPT_QUEUE_MAX);
        (Arc::new(sink), rx)
    };
    let engine = Engine::with_sink(EngineConfig::default(), sink);
    engine.publish(&net.input).unwrap();
    let drain = std::thread::spawn(move || {
        let _ = holon::engine::receipt::drain(
            &rx,
            |r| {
                black_box(r);
                Ok::<_, ()>(())
            },
            || Ok(()),
        );
    });
    Fixture { engine, net, _drain: drain }
}

pub(crate) fn call(f: &Fixture, mandate: usize, agent: usize) -> Call {
    Call::new(
        f.engine.mandate_ix(&format!("m{mandate}")).unwrap(),
        f.engine.agent_ix(&format!("syn/a{agent}")).unwrap(),
        f.net.at,
    )
}

#[inline]
pub(crate) fn admit_settle(engine: &Engine, c: &Call) {
    match engine.admit(c) {
        Admission::Allowed(r) => {
            let _ = black_box(r.settle(Amount::ZERO, c.at));
        }
        other => panic!("expected allowed: {other:?}"),
    }
}
