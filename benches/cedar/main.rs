//! holon's allowed admit+settle side by side with Cedar deciding the same call.
//!
//! The call: mandate `m0` of the synthetic network (`holon_engine::engine::synthetic`)
//! calling leaf agent `syn/a1`, allowed. Cedar gets the rules of each mandate that decide
//! this call as one `permit` per mandate and one `forbid` (below): the validity window, the class pattern
//! `syn.*`, the per-call limit and the approval threshold on the price, the data rules and
//! a deny pattern. Cedar's request, entities and policies are built before timing, so it
//! is measured deciding only. holon does more in its figure: it also converts the USD
//! price, reserves the worst case on the mandate's ledger, settles it and hands two
//! receipts to its sink.
//!
//! A last argument `mandates=K` gives Cedar's policy set K mandates' permits (default 10,
//! the network's; holon's decision does not depend on how many mandates it holds).
//!
//! - `cedar-side-by-side wall [ROUNDS]`: ROUNDS rounds (default 31), each timing 20,000
//!   holon calls and then 20,000 Cedar decisions; prints the median ns per call of each
//!   and their ratio (the same process, interleaved, so machine load hits both alike).
//! - `cedar-side-by-side count holon|cedar N`: N calls after a warm-up, for callgrind
//!   (`.ci/cedar-side-by-side` runs N = 0 and N = 20,000 and divides the difference).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use cedar_policy::{Authorizer, Context, Decision, Entities, EntityUid, PolicySet, Request};
use holon_documents::money::Amount;
use holon_engine::engine::{Admission, Call, ChannelSink, Engine, EngineConfig, synthetic};

const WARM_UP: u64 = 1_000;
const PER_ROUND: u64 = 20_000;
/// The most calls one run makes: the receipt sink is sized for it whatever N is.
const CALLS_MAX: u64 = 1_000_000;

/// Mandate `mJ`'s rules for this call as a Cedar `permit`, and the network's deny pattern
/// as a `forbid`: Cedar's policy set holds one such permit for each of the network's
/// mandates, as holon's snapshot holds the mandates themselves.
fn policies(mandates: usize) -> String {
    let mut text = String::from("forbid (principal, action, resource) when { resource.namespace == \"shady\" };\n");
    for j in 0..mandates {
        text.push_str(&format!(
            r#"permit (principal == Mandate::"m{j}", action == Action::"call", resource)
when {{
    context.at >= 1793491200 && context.at <= 1798761599 &&
    resource.class like "syn.*" &&
    resource.price_micros <= 2000000 &&
    resource.price_micros <= 500000 &&
    resource.training_use == false
}};
"#
        ));
    }
    text
}

const ENTITIES: &str = r#"[
  { "uid": { "type": "Agent", "id": "syn/a1" },
    "attrs": { "namespace": "syn", "class": "syn.leaf", "price_micros": 920,
               "training_use": false },
    "parents": [] },
  { "uid": { "type": "Mandate", "id": "m0" }, "attrs": {}, "parents": [] }
]"#;

struct Cedar {
    authorizer: Authorizer,
    policies: PolicySet,
    entities: Entities,
    request: Request,
}

impl Cedar {
    fn new(at: i64, mandates: usize) -> Cedar {
        let policies: PolicySet = policies(mandates).parse().expect("policies");
        let entities = Entities::from_json_str(ENTITIES, None).expect("entities");
        let uid = |s: &str| -> EntityUid { s.parse().expect("uid") };
        let context = Context::from_json_str(&format!(r#"{{ "at": {at} }}"#), None).expect("context");
        let request =
            Request::new(uid(r#"Mandate::"m0""#), uid(r#"Action::"call""#), uid(r#"Agent::"syn/a1""#), context, None)
                .expect("request");
        Cedar { authorizer: Authorizer::new(), policies, entities, request }
    }

    #[inline(never)]
    fn decide(&self) -> bool {
        let answer = self.authorizer.is_authorized(black_box(&self.request), &self.policies, &self.entities);
        answer.decision() == Decision::Allow
    }
}

struct Holon {
    engine: Engine,
    call: Call,
    _receipts: holon_engine::engine::receipt::ReceiptReceiver,
}

impl Holon {
    fn new() -> (Holon, i64) {
        let net = synthetic::network(&synthetic::Shape { agents: 100, mandates: 10, ..Default::default() })
            .expect("synthetic network");
        let room = usize::try_from(WARM_UP + CALLS_MAX).expect("room fits memory");
        let (sink, rx) = ChannelSink::new(room * holon_engine::engine::receipt::SINK_SHARDS);
        let engine = Engine::with_sink(EngineConfig::default(), Arc::new(sink));
        engine.publish(&net.input).expect("publish");
        let call = Call::new(engine.mandate_ix("m0").expect("m0"), engine.agent_ix("syn/a1").expect("a1"), net.at);
        (Holon { engine, call, _receipts: rx }, net.at.unix())
    }

    #[inline(never)]
    fn decide(&self) -> bool {
        match self.engine.admit(black_box(&self.call)) {
            Admission::Allowed(r) => r.settle(Amount::from_micros(920), self.call.at).is_ok(),
            _ => false,
        }
    }
}

fn per_call_ns(calls: u64, f: impl Fn() -> bool) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        assert!(f(), "the call is allowed");
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (holon, at) = Holon::new();
    // The last argument: how many mandates Cedar's policy set holds (holon's snapshot
    // holds the network's ten).
    let mandates: usize =
        args.last().and_then(|a| a.strip_prefix("mandates=")).and_then(|m| m.parse().ok()).unwrap_or(10);
    let cedar = Cedar::new(at, mandates.max(1));
    assert!(holon.decide() && cedar.decide(), "both allow the call");
    match args.first().map(String::as_str) {
        Some("count") => {
            let n: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(0);
            assert!(n <= CALLS_MAX, "at most {CALLS_MAX} calls");
            let which = args.get(1).map(String::as_str);
            for _ in 0..WARM_UP + n {
                let allowed = if which == Some("cedar") { cedar.decide() } else { holon.decide() };
                assert!(allowed);
            }
        }
        _ => {
            let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(31);
            assert!(rounds as u64 * PER_ROUND <= CALLS_MAX, "at most {} rounds", CALLS_MAX / PER_ROUND);
            per_call_ns(WARM_UP, || cedar.decide());
            let (mut h, mut c) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                h.push(per_call_ns(PER_ROUND, || holon.decide()));
                c.push(per_call_ns(PER_ROUND, || cedar.decide()));
            }
            let (h, c) = (median(h), median(c));
            println!("holon admit+settle: median {h:.1} ns per call ({rounds} rounds of {PER_ROUND})");
            println!("cedar decision:     median {c:.1} ns per call ({mandates} mandates as policies)");
            println!("holon / cedar (wall): {:.4}", h / c);
        }
    }
}
