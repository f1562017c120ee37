//! The engine's explanations: the sentences of a decision, from the documents and the spend
//! the decision read, judged by the same code as `admit` (the slow path: for logs, CLIs,
//! `holon serve` and people). One construction (`reasons::reasons_for`) serves the live decision
//! ([`Engine::explain_denial`], a delegated run's sub-calls), [`Engine::explain`] and the
//! [`Assessor`](super::Assessor) of the CLI: the same call and spend get the same words.

use super::judge::{self, CallFacts, Spent};
use super::reasons::{ancestor_reasons, reasons_for};
use super::snapshot::{CompiledAgent, CompiledMandate};
use super::{Call, Denial, Engine, Reservation, Snapshot, SubCall, assess};
use crate::admission::explain::{self, Documents};
use crate::admission::{self, CodeSet, Reason};
use crate::money::Amount;

/// Sentences for codes whose documents are not in the snapshot (a mandate or agent it no
/// longer holds): each code named, with where it is explained.
fn without_documents(codes: CodeSet) -> Vec<Reason> {
    codes.iter().map(|c| Reason::new(c, explain::without_documents(c))).collect()
}

impl Engine {
    /// The decision with every reason as a sentence, from the documents and the live
    /// spend (the slow path: for logs, CLIs and people).
    pub fn explain(&self, call: &Call) -> Option<admission::Assessment> {
        let guard = self.cell.load();
        let snap: &Snapshot = &guard;
        let m = snap.mandate(call.mandate)?;
        let a = snap.agent(call.agent)?;
        // The day the reservation would be charged on: a call cannot open a day ahead of
        // the engine's clock, so its "today" is at most the clock's.
        let clock_day = u64::try_from(self.now().utc_day()).unwrap_or(0);
        let today = judge::day_number(call.at).unwrap_or(0).min(clock_day);
        let facts = CallFacts::of_call(call, false);
        let ctx = facts.context(
            Amount::from_micros(m.ledger.spent_micros()),
            Amount::from_micros(m.ledger.spent_day_micros(today)),
        );
        let docs = documents(m, a, snap, None);
        if !m.ancestors.is_empty() {
            // Under a sub-mandate: every level on its own ledger's spend, as `admit` judges.
            let levels: Vec<(&CompiledMandate, judge::KnownSpend)> = m
                .ancestors
                .iter()
                .filter_map(|ix| snap.mandate(*ix))
                .map(|l| {
                    let total = Amount::from_micros(l.ledger.spent_micros());
                    (l, judge::KnownSpend { total, today: Amount::from_micros(l.ledger.spent_day_micros(today)) })
                })
                .collect();
            return Some(assess::judged_in_chain(m, &levels, a, &facts, &ctx, &docs));
        }
        Some(assess::judged(m, a, &facts, &ctx, &docs))
    }

    /// The sentences of a decision this engine made on `call` ([`Engine::admit`]'s
    /// denial), quoting the spend that decision read: the same words `holon mandate check`
    /// gives for the same spend.
    pub fn explain_denial(&self, call: &Call, denial: &Denial) -> Vec<Reason> {
        self.reasons(call, denial.codes, denial.worst_case, denial.spent)
    }

    /// The sentences of `codes` on `call` with a worst case of `worst` and the spend
    /// `spent` (a held call: `approval_required` and its worst case).
    pub fn reasons(&self, call: &Call, codes: CodeSet, worst: Amount, spent: Spent) -> Vec<Reason> {
        let guard = self.cell.load();
        let snap: &Snapshot = &guard;
        match (snap.mandate(call.mandate), snap.agent(call.agent)) {
            (Some(m), Some(a)) => match spent.limited_by.and_then(|ix| snap.mandate(ix)) {
                Some(level) => ancestor_reasons(
                    level,
                    m,
                    a,
                    &CallFacts::of_call(call, false),
                    (codes, worst, spent),
                    &documents(m, a, snap, None),
                ),
                None => reasons_for(
                    m,
                    a,
                    &CallFacts::of_call(call, false),
                    (codes, worst, spent),
                    &documents(m, a, snap, None),
                ),
            },
            _ => without_documents(codes),
        }
    }
}

impl Reservation<'_> {
    /// The sentences of a denial of `call`, a sub-call of this reservation's delegated run
    /// ([`Reservation::sub_call_within`] with `max_cost`), quoting the run's sub-mandate, the
    /// orchestrator's declared calls and the spend the decision read.
    pub fn explain_sub_call(&self, call: &SubCall<'_>, max_cost: Option<Amount>, denial: &Denial) -> Vec<Reason> {
        let guard = self.engine.cell.load();
        let snap: &Snapshot = &guard;
        let (Some(run), Some(callee)) = (self.run(), snap.agent(call.agent)) else {
            return without_documents(denial.codes);
        };
        let facts = call.facts(max_cost, CodeSet::EMPTY);
        // The document with the run's own figures: the compiled copy's `source` has the
        // parent's (`run.rs`).
        let derived = run.derived();
        let docs = Documents { mandate: &derived, ..documents(&run.mandate, callee, snap, Some(&run.orchestrator)) };
        reasons_for(&run.mandate, callee, &facts, (denial.codes, denial.worst_case, denial.spent), &docs)
    }
}

fn documents<'a>(
    m: &'a CompiledMandate,
    a: &'a CompiledAgent,
    snap: &'a Snapshot,
    orchestrator: Option<&'a crate::manifest::Manifest>,
) -> Documents<'a> {
    Documents { mandate: &m.source, agent: &a.source, record: a.record.as_deref(), lookup: snap, orchestrator }
}
