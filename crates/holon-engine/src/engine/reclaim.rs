//! The reaper: reservations whose callee's hard timeout plus the grace has passed are
//! reclaimed, each exactly once, and their worst case **stays spent** until the holder's
//! late settle or release reconciles it (docs/engine.md, "Expiry keeps the worst case
//! spent"). The engine has no thread: the gateway calls `reclaim_expired` periodically.

use super::receipt::{End, Outcome, Receipt};
use super::{AgentIx, Engine, MandateIx};
#[cfg(holon_loom)]
use super::{Ledger, ledger};
use crate::admission::{CodeSet, Verdict};
use crate::money::Amount;
use crate::time::Timestamp;

impl Engine {
    /// Reclaims every reservation whose callee's hard timeout plus the grace has passed
    /// by `now`: each exactly once. Its slot is freed, but its **worst case stays spent**
    /// (the call may have run; the spend export counts it the same way) until its holder's
    /// late settle or release reconciles it, once. Returns how many.
    pub fn reclaim_expired(&self, now: Timestamp) -> usize {
        self.slots.reclaim_expired(now.unix(), |r| {
            // `ids` packs the mandate in its high 32 bits and the agent in its low 32:
            // each cast takes exactly one half.
            #[allow(clippy::cast_possible_truncation)]
            self.sink.submit(&Receipt {
                id: r.receipt_id,
                parent: r.parent_id,
                mandate: MandateIx((r.ids >> 32) as u32),
                agent: AgentIx(r.ids as u32),
                decision: Verdict::Allowed,
                end: End::Expired,
                codes: CodeSet::EMPTY,
                worst_case: Amount::from_micros(r.worst_micros),
                actual: Amount::from_micros(r.worst_micros),
                at: Timestamp::from_unix(r.at),
                ended_at: now,
                outcome: Outcome::Unreported,
                latency_ms: 0,
                shadow: r.shadow,
            });
        })
    }

    /// **Deliberately broken** (loom-tests only): the reaper before issue #10, which gave
    /// a reclaimed root reservation's worst case back to its ledger (`root`, charged on
    /// `day`) as if the call had cost nothing. The loom suite must catch it.
    #[cfg(holon_loom)]
    #[doc(hidden)]
    pub fn reclaim_expired_racy(&self, now: Timestamp, root: &Ledger, day: u64) -> usize {
        self.slots.reclaim_expired(now.unix(), |r| {
            if r.parent_id == 0 {
                root.refund(ledger::Charge::exact(r.worst_micros, Some(day)));
            }
        })
    }
}
