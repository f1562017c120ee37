//! The one construction of a decision's sentences: the codes worded from the documents,
//! quoting the spend the decision read and the figures the rules used. The live decision,
//! [`Engine::explain`](super::Engine::explain) and the CLI's
//! [`Assessor`](super::Assessor) all word their codes here.

use super::judge::{CallFacts, Spent};
use super::snapshot::{CompiledAgent, CompiledMandate};
use crate::admission::explain::{self, Documents, Figures};
use crate::admission::{Code, CodeSet, Reason};
use crate::money::Amount;

/// The sentences for `codes` of a call judged on `mandate` and `agent`, quoting the spend
/// the decision read and the agent's own price ceiling converted into the mandate's
/// currency (`fit_codes`' figure, the one the rules used).
pub(super) fn reasons_for(
    mandate: &CompiledMandate,
    agent: &CompiledAgent,
    facts: &CallFacts,
    (codes, worst, spent): (CodeSet, Amount, Spent),
    docs: &Documents<'_>,
) -> Vec<Reason> {
    let fit = super::snapshot::fit_codes(mandate, agent, facts.by_capability);
    let ctx = facts.context(spent.total, spent.today);
    let mut reasons = explain::reasons(codes, docs, &ctx, Figures { worst, own_ceiling: fit.own_ceiling });
    if let Some(why) = &mandate.chain_error {
        for r in reasons.iter_mut().filter(|r| r.code == Code::SubMandateChainBroken) {
            r.message = format!("{}: {why}", r.message);
        }
    }
    reasons
}

/// The sentences of a call under a sub-mandate (`own`, explained from `docs`) that an
/// ancestor refused: that ancestor's rules and spend, each sentence naming it (the live
/// decision's and the CLI's, one construction).
pub(super) fn ancestor_reasons(
    level: &CompiledMandate,
    own: &CompiledMandate,
    agent: &CompiledAgent,
    facts: &CallFacts,
    judged: (CodeSet, Amount, Spent),
    docs: &Documents<'_>,
) -> Vec<Reason> {
    let docs = Documents { mandate: &level.source, ..*docs };
    let mut reasons = reasons_for(level, agent, facts, judged, &docs);
    for r in &mut reasons {
        r.message = format!("{} (an ancestor of {}): {}", level.source.id, own.source.id, r.message);
    }
    reasons
}
