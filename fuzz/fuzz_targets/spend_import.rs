//! The engine's spend-state import on hostile bytes: never a panic, and the engine still
//! admits afterwards. The first byte picks the input: 0 = the bytes as they are; else the
//! engine's own export with the rest of the bytes as (position, xor) edits and a cut,
//! which reaches deep into a well-formed encoding.
#![no_main]

use std::sync::LazyLock;

use holon::engine::{Admission, Call, Engine, EngineConfig, synthetic};
use holon::money::Amount;
use libfuzzer_sys::fuzz_target;

struct Setup {
    net: synthetic::Network,
    export: Vec<u8>,
}

static SETUP: LazyLock<Setup> = LazyLock::new(|| {
    let net = synthetic::network(&synthetic::Shape { agents: 10, mandates: 4, total: Amount::from_micros(50_000_000) })
        .expect("the synthetic network");
    let engine = Engine::new(EngineConfig::default());
    engine.publish(&net.input).expect("publish");
    // Some spend to export: one settled call per mandate.
    for m in 0..4 {
        let (Some(mi), Some(ai)) = (engine.mandate_ix(&format!("m{m}")), engine.agent_ix("syn/a1")) else { continue };
        if let Admission::Allowed(r) = engine.admit(&Call::new(mi, ai, net.at)) {
            let _ = r.settle(Amount::from_micros(700), net.at);
        }
    }
    let export = engine.export_spend().expect("export");
    Setup { net, export }
});

fuzz_target!(|data: &[u8]| {
    let setup = &*SETUP;
    let bytes = match data.split_first() {
        None => return,
        Some((0, rest)) => rest.to_vec(),
        Some((_, rest)) => {
            let mut b = setup.export.clone();
            let mut edits = rest.chunks_exact(3);
            for e in &mut edits {
                if let ([hi, lo, x], false) = (e, b.is_empty()) {
                    let at = usize::from(u16::from_be_bytes([*hi, *lo])) % b.len();
                    if let Some(byte) = b.get_mut(at) {
                        *byte ^= x;
                    }
                }
            }
            if let [cut] = edits.remainder() {
                b.truncate(b.len().saturating_sub(usize::from(*cut)));
            }
            b
        }
    };
    // A small reservation table: a fresh engine per input must stay cheap.
    let engine = Engine::new(EngineConfig { in_flight_max: 64, pending_max: 16, ..EngineConfig::default() });
    if engine.publish(&setup.net.input).is_err() {
        return;
    }
    let _ = engine.import_spend(&bytes);
    if let (Some(mi), Some(ai)) = (engine.mandate_ix("m0"), engine.agent_ix("syn/a1")) {
        let _ = engine.admit(&Call::new(mi, ai, setup.net.at));
    }
});
