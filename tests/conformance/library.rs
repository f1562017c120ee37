//! The `library` surface of the conformance suite: the engine with its node on a SQLite
//! store, driven through `holon::gateway`'s calls as a gateway linking the crate would:
//! the protocol's lease wait, key rules, written forms and held-call rebuild.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use holon::admission::{Code, CodeSet, Reason, Verdict};
use holon::engine::{Admission, Call, Denial, Engine, EngineConfig, Reservation, RunReport, Spent, SubCall};
use holon::gateway;
use holon::money::Amount;
use holon::node::{Node, NodeConfig, NodeError};
use holon::store::LedgerStore;
use holon::store::sqlite::SqliteStore;
use holon::time::Timestamp;
use serde_json::{Map, Value, json};

use super::{Answer, Names, Scenario, Step, Surface};

pub(crate) struct Library {
    _dir: tempfile::TempDir,
    engine: &'static Engine,
    node: &'static Node,
    store: SqliteStore,
    open: HashMap<String, Reservation<'static>>,
    ended: HashSet<String>,
    /// key -> (what it was first used for, its answer).
    keys: HashMap<String, (String, Map<String, Value>)>,
}

fn error(kind: &str) -> Answer {
    let mut map = Map::new();
    map.insert("error".to_owned(), json!(kind));
    Some(map)
}

fn money(a: Amount) -> Value {
    json!(a.to_string())
}

/// A decision's normalized answer, and an allowed call's reservation to keep.
type Made = (Map<String, Value>, Option<(String, Reservation<'static>)>);

fn decision(
    node: &Node,
    admission: Admission<'static>,
    explain: impl FnOnce(CodeSet, Amount, Spent) -> Vec<Reason>,
    currency: Option<String>,
    step: &Step,
    names: &mut Names,
) -> Made {
    let mut map = Map::new();
    let mut open = None;
    let (verdict, codes, worst, spent) = match admission {
        Admission::Allowed(r) => {
            let id = r.receipt_id().to_string();
            let name = names.name_of(&id, step.name.as_deref());
            map.insert("reservation".to_owned(), name.clone());
            let worst = r.worst_case();
            open = Some((name.as_str().unwrap().to_owned(), r));
            (Verdict::Allowed, CodeSet::EMPTY, worst, Spent::default())
        }
        Admission::Held(p) => {
            let id = node.held_id(p.id);
            map.insert("pending".to_owned(), names.name_of(&id, step.name.as_deref()));
            (Verdict::Held, CodeSet::EMPTY.with(Code::ApprovalRequired), p.worst_case, Spent::default())
        }
        Admission::Denied(d) => (Verdict::Denied, d.codes, d.worst_case, d.spent),
    };
    let word = match verdict {
        Verdict::Allowed => "allowed",
        Verdict::Held => "held",
        Verdict::Denied => "denied",
    };
    map.insert("decision".to_owned(), json!(word));
    map.insert("codes".to_owned(), json!(codes.iter().map(Code::as_str).collect::<Vec<_>>()));
    let reasons: Vec<String> = if codes.is_empty() {
        Vec::new()
    } else {
        explain(codes, worst, spent).into_iter().map(|r| names.in_text(&r.message)).collect()
    };
    map.insert("reasons".to_owned(), json!(reasons));
    map.insert("worst_case".to_owned(), money(worst));
    if let Some(c) = currency {
        map.insert("currency".to_owned(), json!(c));
    }
    map.insert("keep".to_owned(), json!(gateway::keep_answer(verdict, codes)));
    (map, open)
}

impl Library {
    pub(crate) fn start(scenario: &Scenario) -> Library {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("docs");
        crate::common::copy_tree(std::path::Path::new("examples"), &docs);
        scenario.edit(&docs);
        let loaded = holon::documents::directory::load(&docs, &Default::default()).unwrap();
        let engine: &'static Arc<Engine> =
            Box::leak(Box::new(Arc::new(Engine::new(EngineConfig { store_backed: true, ..EngineConfig::default() }))));
        engine.publish(&loaded.input).unwrap();
        let path = dir.path().join("ledger.db");
        let node: &'static Node = Box::leak(Box::new(
            Node::start(Arc::clone(engine), Box::new(SqliteStore::open(&path).unwrap()), NodeConfig::new("library"))
                .unwrap(),
        ));
        let store = SqliteStore::open(&path).unwrap();
        Library { _dir: dir, engine, node, store, open: HashMap::new(), ended: HashSet::new(), keys: HashMap::new() }
    }

    /// Keeps an allowed call's reservation under its name.
    fn keep(&mut self, (map, open): Made) -> Map<String, Value> {
        if let Some((name, r)) = open {
            self.open.insert(name, r);
        }
        map
    }

    fn unknown(code: Code, what: &str, name: &str, currency: Option<String>) -> Answer {
        let mut map = Map::new();
        map.insert("decision".to_owned(), json!("denied"));
        map.insert("codes".to_owned(), json!([code.as_str()]));
        map.insert("reasons".to_owned(), json!([gateway::unknown_name(what, name)]));
        map.insert("worst_case".to_owned(), money(Amount::ZERO));
        if let Some(c) = currency {
            map.insert("currency".to_owned(), json!(c));
        }
        Some(map)
    }

    fn currency(&self, mandate: holon::engine::MandateIx) -> Option<String> {
        self.engine.snapshot().mandate(mandate).map(|m| m.source().budget.currency.to_string())
    }

    fn admit(&mut self, step: &Step, names: &mut Names) -> Answer {
        let key = step.arg("key");
        if key.is_some_and(|k| gateway::key(k.as_bytes()).is_err()) {
            return error("bad_request");
        }
        let Ok(max_cost) = step.arg("max_cost").map(Amount::parse).transpose() else { return error("bad_request") };
        let fingerprint = format!("{}", step.args);
        if let Some(key) = key
            && let Some((first, kept)) = self.keys.get(key)
        {
            if *first != fingerprint {
                return error("unprocessable");
            }
            return Some(self.replay(kept.clone(), names));
        }
        let answer = self.admit_now(step, max_cost, names)?;
        if let Some(key) = key
            && answer.get("keep") == Some(&json!(true))
        {
            self.keys.insert(key.to_owned(), (fingerprint, answer.clone()));
        }
        Some(answer)
    }

    /// A kept answer as a retry gets it (`gateway::replay_of_allowed`).
    fn replay(&self, kept: Map<String, Value>, names: &Names) -> Map<String, Value> {
        let Some(name) = kept.get("reservation").and_then(Value::as_str) else { return kept };
        let open = self.open.get(name).is_some_and(Reservation::is_active);
        match gateway::replay_of_allowed(open) {
            gateway::Replay::Give => kept,
            gateway::Replay::Ended => {
                let mut map = Map::new();
                map.insert("decision".to_owned(), json!("denied"));
                map.insert("codes".to_owned(), json!([gateway::REPLAY_ENDED.as_str()]));
                let sentence = gateway::replay_ended_sentence(&names.id(name), None);
                map.insert("reasons".to_owned(), json!([names.in_text(&sentence)]));
                map
            }
        }
    }

    fn admit_now(&mut self, step: &Step, max_cost: Option<Amount>, names: &mut Names) -> Answer {
        let (mandate, agent) = (step.arg("mandate").unwrap(), step.arg("agent").unwrap());
        let Some(m) = self.engine.mandate_ix(mandate) else {
            return Self::unknown(Code::UnknownMandate, "mandate", mandate, None);
        };
        let Some(a) = self.engine.agent_ix(agent) else {
            return Self::unknown(Code::UnknownAgent, "agent", agent, self.currency(m));
        };
        if let Some(class) = step.arg("capability")
            && gateway::capability_offered(self.engine, a, class).is_err()
        {
            return error("bad_request");
        }
        let call =
            Call { max_cost, by_capability: step.arg("capability").is_some(), ..Call::new(m, a, Timestamp::now()) };
        let engine = self.engine;
        let admission = gateway::lease_wait_blocking::<()>(Some(self.node), || Ok(engine.admit(&call))).unwrap();
        let currency = self.currency(m);
        let made = decision(self.node, admission, |c, w, s| engine.reasons(&call, c, w, s), currency, step, names);
        Some(self.keep(made))
    }

    /// The held call `id` as the store keeps it (the protocol's wait for one held here).
    fn held(&self, id: &str) -> Option<holon::store::HeldCall> {
        let list = || self.store.held_calls(None, Timestamp::now().unix());
        gateway::find_held_blocking(Some(self.node), id, list).unwrap()
    }

    fn approve(&mut self, step: &Step, names: &mut Names) -> Answer {
        let id = names.id(step.arg("pending").unwrap());
        let Ok(by) = gateway::account(step.arg("by").unwrap()) else { return error("bad_request") };
        let Some(held) = self.held(&id) else { return error("not_found") };
        let Some(call) = gateway::held_call(self.engine, &held, Timestamp::now()) else { return error("conflict") };
        if gateway::check_approver(self.engine, call.mandate, &by).is_err() {
            return error("forbidden");
        }
        let (engine, node) = (self.engine, self.node);
        let admission = match gateway::lease_wait_blocking(Some(node), || node.approve(&id, &by, call.at)) {
            Ok(admission) => admission,
            Err(NodeError::UnknownHeld(_)) => return error("not_found"),
            Err(NodeError::Engine(_)) => return error("forbidden"),
            Err(e) => panic!("approve: {e}"),
        };
        let currency = self.currency(call.mandate);
        let made = decision(node, admission, |c, w, s| engine.reasons(&call, c, w, s), currency, step, names);
        Some(self.keep(made))
    }

    fn refuse(&mut self, step: &Step, names: &mut Names) -> Answer {
        let id = names.id(step.arg("pending").unwrap());
        let Ok(by) = gateway::account(step.arg("by").unwrap()) else { return error("bad_request") };
        let mut map = Map::new();
        let Some(held) = self.held(&id) else {
            map.insert("refused".to_owned(), json!(false));
            return Some(map);
        };
        let m = self.engine.mandate_ix(&held.mandate).unwrap();
        if gateway::check_approver(self.engine, m, &by).is_err() {
            return error("forbidden");
        }
        map.insert("refused".to_owned(), json!(self.node.refuse(&id).unwrap()));
        Some(map)
    }

    fn settle(&mut self, step: &Step) -> Answer {
        let name = step.arg("reservation").unwrap();
        let Ok(actual) = Amount::parse(step.arg("actual").unwrap()) else { return error("bad_request") };
        let Ok(outcome) = gateway::outcome(step.arg("outcome")) else { return error("bad_request") };
        let Ok(latency_ms) = gateway::latency_ms(step.args.get("latency_ms").and_then(Value::as_u64)) else {
            return error("bad_request");
        };
        let Some(r) = self.open.remove(name) else {
            return error(if self.ended.contains(name) { "conflict" } else { "not_found" });
        };
        self.ended.insert(name.to_owned());
        let settled = r.settle_reported(actual, Timestamp::now(), RunReport { outcome, latency_ms }).unwrap();
        let mut map = Map::new();
        map.insert("kept".to_owned(), money(settled.kept));
        map.insert("billed".to_owned(), money(settled.kept));
        map.insert("worst_case".to_owned(), money(settled.worst_case));
        map.insert("clamped".to_owned(), json!(settled.billed > settled.kept));
        Some(map)
    }

    fn release(&mut self, step: &Step) -> Answer {
        let name = step.arg("reservation").unwrap();
        let Some(r) = self.open.remove(name) else {
            return error(if self.ended.contains(name) { "conflict" } else { "not_found" });
        };
        self.ended.insert(name.to_owned());
        r.release(Timestamp::now()).unwrap();
        let mut map = Map::new();
        map.insert("released".to_owned(), json!(true));
        Some(map)
    }

    fn sub_call(&mut self, step: &Step, names: &mut Names) -> Answer {
        let parent = step.arg("reservation").unwrap();
        let Ok(max_cost) = step.arg("max_cost").map(Amount::parse).transpose() else { return error("bad_request") };
        let Some(r) = self.open.get(parent) else {
            return error(if self.ended.contains(parent) { "conflict" } else { "not_found" });
        };
        let at = Timestamp::now();
        let snap = self.engine.snapshot();
        let (agent, capability) = match (step.arg("agent"), step.arg("capability")) {
            (Some(name), None) => (self.engine.agent_ix(name), None),
            (None, Some(class)) => {
                let sub = r.sub_mandate();
                let pick = sub.and_then(|m| holon::engine::cheapest_implementer(&m, &snap, class, at, max_cost).ok());
                (pick.flatten(), Some(class))
            }
            _ => return error("bad_request"),
        };
        let currency = r.run_currency().map(|c| c.to_string());
        let Some(agent) = agent else {
            let label = step.arg("agent").or(step.arg("capability")).unwrap_or_default();
            return Self::unknown(Code::UnknownAgent, "agent", label, currency);
        };
        let call = SubCall { agent, capability, at };
        let admission = r.sub_call_within(&call, max_cost);
        let explained = |codes, worst, spent| {
            let denial = Denial { codes, worst_case: worst, receipt_id: 0, spent };
            r.explain_sub_call(&call, max_cost, &denial)
        };
        let made = decision(self.node, admission, explained, currency, step, names);
        Some(self.keep(made))
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // Open reservations end first (a drop releases them), then the node's thread stops.
        self.open.clear();
        let _ = self.node.drain_in_place();
    }
}

impl Surface for Library {
    fn step(&mut self, step: &Step, names: &mut Names) -> Answer {
        let mut answer = match step.op.as_str() {
            "admit" => self.admit(step, names),
            "approve" => self.approve(step, names),
            "refuse" => self.refuse(step, names),
            "settle" => self.settle(step),
            "release" => self.release(step),
            "sub_call" => self.sub_call(step, names),
            "spend" => {
                let mandate = step.args.as_str().unwrap();
                let Some(ix) = self.engine.mandate_ix(mandate) else { return error("not_found") };
                let view = gateway::spend_view(self.engine, ix, Timestamp::now()).unwrap();
                let mut map = Map::new();
                map.insert("spent".to_owned(), money(view.spent));
                map.insert("today".to_owned(), money(view.today));
                Some(map)
            }
            "flush" => {
                self.node.flush_now().unwrap();
                let mut map = Map::new();
                map.insert("flushed".to_owned(), json!(true));
                Some(map)
            }
            other => panic!("no step `{other}`"),
        };
        if let Some(map) = answer.as_mut() {
            map.remove("keep");
        }
        answer
    }
}
