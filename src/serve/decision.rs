//! Decisions into response bodies: the reservation kept open, the held call's id in the
//! store, and one sentence per code from the documents (`holon::admission::explain`).

use holon::admission::{self, Code, CodeSet, Reason};
use holon::engine::{Admission, AgentIx, Call, CompiledAgent, MandateIx, Reservation};
use holon::money::Amount;
use holon::time::Timestamp;

use super::metrics::DecisionLabels;
use super::service::{Open, Service};
use super::wire::{DecisionBody, ReasonBody};

impl Service {
    pub(super) fn decision(
        &self,
        admission: Admission<'static>,
        mandate: MandateIx,
        agent: AgentIx,
        call: Option<Call>,
        run: Option<(&Reservation<'static>, AgentIx)>,
    ) -> (DecisionBody, Option<(u64, Open)>) {
        let currency = self.currency(mandate, run.map(|(r, _)| r));
        let at = call.map_or_else(Timestamp::now, |c| c.at);
        match admission {
            Admission::Allowed(r) => {
                let body = DecisionBody {
                    decision: "allowed",
                    reservation: Some(r.receipt_id().to_string()),
                    pending: None,
                    agent: self.agent_name(agent),
                    worst_case: r.worst_case().to_string(),
                    sub_budget: r.is_delegated_run().then(|| r.sub_budget().to_string()),
                    currency,
                    codes: Vec::new(),
                    reasons: Vec::new(),
                };
                self.count("allowed", CodeSet::EMPTY);
                // Kept by the caller once it holds no guard on the table (a DashMap guard
                // held across an insert into the same shard deadlocks).
                (body, Some((r.receipt_id(), Open { reservation: r, agent, reclaimed_at: None })))
            }
            Admission::Held(p) => {
                let codes = CodeSet::EMPTY.with(Code::ApprovalRequired);
                let mut body = self.denied_body(codes, p.worst_case, agent, call, run, at);
                body.decision = "held";
                body.pending = Some(self.node.held_id(p.id));
                (body, None)
            }
            Admission::Denied(d) => (self.denied_body(d.codes, d.worst_case, agent, call, run, at), None),
        }
    }

    pub(super) fn denied_body(
        &self,
        codes: CodeSet,
        worst: Amount,
        agent: AgentIx,
        call: Option<Call>,
        run: Option<(&Reservation<'static>, AgentIx)>,
        at: Timestamp,
    ) -> DecisionBody {
        let decision = if codes.contains(Code::ApprovalRequired) && codes.len() == 1 { "held" } else { "denied" };
        if decision == "denied" {
            self.count("denied", codes);
        } else {
            self.count("held", codes);
        }
        let mandate = call.map(|c| c.mandate);
        DecisionBody {
            decision,
            reservation: None,
            pending: None,
            agent: self.agent_name(agent),
            worst_case: worst.to_string(),
            sub_budget: None,
            currency: self.currency(mandate.unwrap_or(MandateIx(u32::MAX)), run.map(|(r, _)| r)),
            codes: codes.iter().map(Code::as_str).collect(),
            reasons: self.reasons(codes, worst, agent, call, run, at),
        }
    }

    /// One sentence per code, from the documents (`holon::admission::explain`).
    fn reasons(
        &self,
        codes: CodeSet,
        worst: Amount,
        agent: AgentIx,
        call: Option<Call>,
        run: Option<(&Reservation<'static>, AgentIx)>,
        at: Timestamp,
    ) -> Vec<ReasonBody> {
        let snap = self.engine.snapshot();
        let callee: Option<&CompiledAgent> = snap.agent(agent);
        let root = call.and_then(|c| snap.mandate(c.mandate)).map(|m| &*m.source);
        let orchestrator = run.and_then(|(_, a)| snap.agent(a)).map(|a| &*a.source);
        let mandate = run.and_then(|(r, _)| r.sub_mandate()).or(root);
        let reasons: Vec<Reason> = match (mandate, callee) {
            (Some(mandate), Some(callee)) => {
                let ledger = call.and_then(|c| self.engine.ledger(c.mandate));
                let ctx = admission::CallContext {
                    at,
                    max_cost: call.and_then(|c| c.max_cost),
                    spent_total: Amount::from_micros(ledger.as_ref().map_or(0, |l| l.spent_micros())),
                    spent_today: Amount::ZERO,
                    by_capability: call.is_some_and(|c| c.by_capability),
                    delegated: run.is_some(),
                };
                let docs = admission::explain::Documents {
                    mandate,
                    agent: &callee.source,
                    record: callee.record.as_deref(),
                    lookup: &*snap,
                    orchestrator,
                };
                let own = callee.source.pricing.ceiling().unwrap_or(Amount::ZERO);
                admission::explain::reasons(codes, &docs, &ctx, admission::explain::Figures { worst, own_ceiling: own })
            }
            _ => codes.iter().map(|c| Reason::new(c, fallback_sentence(c))).collect(),
        };
        reasons.into_iter().map(|r| ReasonBody { code: r.code.as_str(), message: r.message }).collect()
    }

    pub(super) fn unknown(&self, code: Code, name: &str, mandate: Option<MandateIx>) -> DecisionBody {
        let codes = CodeSet::EMPTY.with(code);
        self.count("denied", codes);
        let what = if code == Code::UnknownMandate { "mandate" } else { "agent" };
        DecisionBody {
            decision: "denied",
            reservation: None,
            pending: None,
            agent: None,
            worst_case: Amount::ZERO.to_string(),
            sub_budget: None,
            currency: self.currency(mandate.unwrap_or(MandateIx(u32::MAX)), None),
            codes: vec![code.as_str()],
            reasons: vec![ReasonBody {
                code: code.as_str(),
                message: format!("no {what} `{name}` in the documents this server holds"),
            }],
        }
    }

    fn count(&self, decision: &'static str, codes: CodeSet) {
        if codes.is_empty() {
            self.metrics.admissions.get_or_create(&DecisionLabels { decision, code: "none" }).inc();
        }
        for code in codes.iter() {
            self.metrics.admissions.get_or_create(&DecisionLabels { decision, code: code.as_str() }).inc();
        }
    }

    fn currency(&self, mandate: MandateIx, run: Option<&Reservation<'static>>) -> String {
        if let Some(m) = run.and_then(|r| r.sub_mandate()) {
            return m.budget.currency.to_string();
        }
        let snap = self.engine.snapshot();
        snap.mandate(mandate).map(|m| m.source.budget.currency.to_string()).unwrap_or_default()
    }

    fn agent_name(&self, agent: AgentIx) -> Option<String> {
        self.engine.snapshot().agent(agent).map(|a| a.source.id.to_string())
    }
}

fn fallback_sentence(code: Code) -> String {
    format!("`{}`: see docs/admission.md for this code", code.as_str())
}
