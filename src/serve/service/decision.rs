//! Decisions into response bodies: the reservation kept open, the held call's id in the
//! store, and the engine's own sentences for every code (`Engine::explain_denial`,
//! `Reservation::explain_sub_call`: the spend the decision read, the converted price).
//! A shadowed server's answers say `shadow: true` and, for a call it would have denied or
//! held, that decision and its codes beside `"decision": "allowed"`.

use holon::admission::{Code, CodeSet, Reason, Verdict};
use holon::engine::{Admission, AgentIx, Call, Denial, Reservation, Spent, SubCall};
use holon::money::Amount;

use super::{Open, Service};
use crate::serve::metrics::DecisionLabels;
use crate::serve::wire::{DecisionBody, ReasonBody};

/// What a decision was asked about: a root call, or a sub-call of an open run.
pub(super) enum Asked<'a> {
    Root(Call),
    Sub { run: &'a Reservation<'static>, call: SubCall<'a>, max_cost: Option<Amount> },
}

impl Asked<'_> {
    fn agent(&self) -> AgentIx {
        match self {
            Asked::Root(call) => call.agent,
            Asked::Sub { call, .. } => call.agent,
        }
    }
}

impl Service {
    /// The answer to a decision, and the reservation to keep open when allowed.
    pub(super) fn decision(
        &self,
        admission: Admission<'static>,
        asked: &Asked<'_>,
    ) -> (DecisionBody, Option<(u64, Open)>) {
        match admission {
            Admission::Allowed(r) => {
                let mut body = self.body("allowed", asked, r.worst_case());
                body.reservation = Some(r.receipt_id().to_string());
                body.node = Some(self.node_name.clone());
                body.sub_budget = r.is_delegated_run().then(|| r.sub_budget().to_string());
                match r.shadow() {
                    Some(real) => {
                        let verdict = if real.verdict == Verdict::Held { "held" } else { "denied" };
                        body.shadow_decision = Some(verdict);
                        body.codes = real.codes.iter().map(Code::as_str).collect();
                        body.reasons = self.reasons(asked, real.codes, r.worst_case(), real.spent);
                        body.limited_by = self.limited_by(real.spent);
                        self.count_shadow(verdict, real.codes);
                        tracing::info!(decision = verdict, codes = ?body.codes, reservation = r.receipt_id(), "shadow: allowed a call the rules would have {verdict}");
                    }
                    None => {
                        body.shadow_decision = self.shadow.then_some("allowed");
                        self.count("allowed", CodeSet::EMPTY);
                        if self.shadow {
                            self.count_shadow("allowed", CodeSet::EMPTY);
                        }
                    }
                }
                // Kept by the caller once it holds no guard on the table (a DashMap guard
                // held across an insert into the same shard deadlocks).
                let open = Open { reservation: r, reclaimed_at: None, key: None };
                (body, Some((open.reservation.receipt_id(), open)))
            }
            Admission::Held(p) => {
                let codes = CodeSet::EMPTY.with(Code::ApprovalRequired);
                let mut body = self.refusal_body(Verdict::Held, asked, codes, p.worst_case, Spent::default());
                body.pending = Some(self.node.held_id(p.id));
                (body, None)
            }
            Admission::Denied(d) => (self.refusal_body(Verdict::Denied, asked, d.codes, d.worst_case, d.spent), None),
        }
    }

    /// A held or denied call's body, with the engine's sentences for its codes.
    fn refusal_body(
        &self,
        verdict: Verdict,
        asked: &Asked<'_>,
        codes: CodeSet,
        worst: Amount,
        spent: Spent,
    ) -> DecisionBody {
        let decision = verdict.as_str();
        self.count(decision, codes);
        let mut body = self.body(decision, asked, worst);
        body.keep = holon::gateway::keep_answer(verdict, codes);
        body.codes = codes.iter().map(Code::as_str).collect();
        body.reasons = self.reasons(asked, codes, worst, spent);
        body.limited_by = self.limited_by(spent);
        body
    }

    /// The ancestor a call under a sub-mandate was refused by, by id.
    fn limited_by(&self, spent: Spent) -> Option<String> {
        let ix = spent.limited_by?;
        self.engine.snapshot().mandate(ix).map(|m| m.source().id.clone())
    }

    fn body(&self, decision: &'static str, asked: &Asked<'_>, worst: Amount) -> DecisionBody {
        DecisionBody {
            decision,
            reservation: None,
            pending: None,
            node: None,
            agent: self.agent_name(asked.agent()),
            worst_case: worst.to_string(),
            sub_budget: None,
            currency: self.currency(asked),
            codes: Vec::new(),
            reasons: Vec::new(),
            limited_by: None,
            shadow: self.shadow.then_some(true),
            shadow_decision: self.shadow.then_some(decision),
            keep: true,
        }
    }

    /// The engine's sentences for `codes` of this decision.
    fn reasons(&self, asked: &Asked<'_>, codes: CodeSet, worst: Amount, spent: Spent) -> Vec<ReasonBody> {
        let reasons: Vec<Reason> = match asked {
            Asked::Root(call) => self.engine.reasons(call, codes, worst, spent),
            Asked::Sub { run, call, max_cost } => {
                let denial = Denial { codes, worst_case: worst, receipt_id: 0, spent };
                run.explain_sub_call(call, *max_cost, &denial)
            }
        };
        reasons.into_iter().map(|r| ReasonBody { code: r.code.as_str(), message: r.message }).collect()
    }

    /// A call naming a mandate or agent the documents do not hold: decided here, without
    /// the engine (it has no such id).
    pub(super) fn unknown(&self, code: Code, name: &str, currency: Option<String>) -> DecisionBody {
        let codes = CodeSet::EMPTY.with(code);
        self.count("denied", codes);
        let what = if code == Code::UnknownMandate { "mandate" } else { "agent" };
        DecisionBody {
            decision: "denied",
            reservation: None,
            pending: None,
            node: None,
            agent: None,
            worst_case: Amount::ZERO.to_string(),
            sub_budget: None,
            currency,
            codes: vec![code.as_str()],
            reasons: vec![ReasonBody { code: code.as_str(), message: holon::gateway::unknown_name(what, name) }],
            limited_by: None,
            shadow: self.shadow.then_some(true),
            shadow_decision: self.shadow.then_some("denied"),
            keep: true,
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

    /// `holon_shadow_decisions_total`: what a shadowed server would have decided.
    fn count_shadow(&self, decision: &'static str, codes: CodeSet) {
        let family = &self.metrics.shadow_decisions;
        if codes.is_empty() {
            family.get_or_create(&DecisionLabels { decision, code: "none" }).inc();
        }
        for code in codes.iter() {
            family.get_or_create(&DecisionLabels { decision, code: code.as_str() }).inc();
        }
    }

    /// The currency of the decision's mandate (a run's sub-mandate for a sub-call).
    fn currency(&self, asked: &Asked<'_>) -> Option<String> {
        match asked {
            Asked::Sub { run, .. } => run.run_currency().map(|c| c.to_string()),
            Asked::Root(call) => self.mandate_currency(call.mandate),
        }
    }

    pub(super) fn mandate_currency(&self, mandate: holon::engine::MandateIx) -> Option<String> {
        self.engine.snapshot().mandate(mandate).map(|m| m.source().budget.currency.to_string())
    }

    fn agent_name(&self, agent: AgentIx) -> Option<String> {
        self.engine.snapshot().agent(agent).map(|a| a.source().id.to_string())
    }
}
