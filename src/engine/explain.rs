//! `Engine::explain`: the live decision with every reason as a sentence, from the documents
//! and the live spend, judged by the same code as `admit` (the slow path: for logs, CLIs
//! and people).

use super::{Call, Engine, Snapshot, assess, judge};
use crate::admission;
use crate::money::Amount;

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
        let ctx = admission::CallContext {
            at: call.at,
            max_cost: call.max_cost,
            spent_total: Amount::from_micros(m.ledger.spent_micros()),
            spent_today: Amount::from_micros(m.ledger.spent_day_micros(today)),
            by_capability: call.by_capability,
            delegated: false,
        };
        let facts = judge::CallFacts {
            at: call.at,
            max_cost: call.max_cost,
            by_capability: call.by_capability,
            approved: false,
            sub_call: None,
        };
        let docs = admission::explain::Documents {
            mandate: &m.source,
            agent: &a.source,
            record: a.record.as_deref(),
            lookup: snap,
            orchestrator: None,
        };
        Some(assess::judged(m, a, &facts, &ctx, &docs))
    }
}
