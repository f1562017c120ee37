//! What a reservation holds, apart from what it does (`reservation.rs`): its charge on its
//! own ledger ([`Held`]), what few reservations carry besides, boxed ([`Extra`]: an
//! orchestrator's delegated [`Run`], a sub-mandate call's [`AncestorCharges`]) and a shadow
//! reservation's real decision ([`Shadowed`]). The admission paths that fill them in
//! (`chain.rs`, `shadow.rs`, `Engine::decide`) and the reservation that ends them all
//! import these types from here, so none of them imports another in a circle.

use smallvec::SmallVec;

use super::judge::Spent;
use super::ledger::{Charge, Ledger};
use super::slots::Ticket;
use super::snapshot::{AgentIx, MandateIx};
use crate::admission::{CodeSet, Verdict};
use crate::money::Amount;
use crate::sync::Arc;
use crate::time::Timestamp;

/// The ledger a reservation holds: a root ledger by reference into the engine's arena,
/// a delegated run's by `Arc` (the run may end before its sub-calls do).
pub(crate) enum HeldLedger<'e> {
    Root(&'e Ledger),
    Run(Arc<Ledger>),
}

impl std::ops::Deref for HeldLedger<'_> {
    type Target = Ledger;
    fn deref(&self) -> &Ledger {
        match self {
            HeldLedger::Root(ledger) => ledger,
            HeldLedger::Run(ledger) => ledger,
        }
    }
}

/// The parts of a reservation the engine fills in.
pub(crate) struct Held<'e> {
    pub ledger: HeldLedger<'e>,
    pub ticket: Ticket,
    pub charge: Charge,
    pub receipt_id: u64,
    pub parent: u64,
    pub mandate: MandateIx,
    pub agent: AgentIx,
    pub at: Timestamp,
    pub worst_case: Amount,
    pub sub_budget: Amount,
}

/// What few reservations carry, boxed so that a leaf call under a root mandate moves one
/// pointer for both (an inline field for the ancestors' charges cost the root path 14
/// instructions per admit+settle in the bench gate).
pub(crate) struct Extra<'e> {
    /// A call under a published sub-mandate: its worst case held on every ancestor's
    /// ledger too (`chain.rs`), settled and released with the own charge, exactly once.
    pub ancestors: Option<AncestorCharges<'e>>,
    /// A shadow reservation's real decision (`EngineConfig::shadow`); `None` for every
    /// reservation the ledgers hold. Here rather than in `Held`: inline, it made every
    /// reservation 168 bytes, moved by `memcpy` twice per admission (58 instructions per
    /// leaf admit+settle in the gate).
    pub shadow: Option<Shadowed>,
}

/// The charges a call under a sub-mandate holds on its ancestors' ledgers (root first),
/// inside the reservation's one boxed `Extra`: two inline (a chain of three), more spilled
/// (an inline array of `CHAIN_MANDATES_MAX` was zeroed and copied on every call: about 200
/// instructions more per call in `icount 20000 sub`).
pub(crate) struct AncestorCharges<'e> {
    pub(super) charges: SmallVec<[(&'e Ledger, Charge); 2]>,
}

impl AncestorCharges<'_> {
    /// Keeps `billed` (at most the worst case) on every ancestor; `kept` is what the
    /// sub-mandate's own ledger kept, which every level keeps too (one worst case for all).
    pub(crate) fn settle(&self, billed_micros: u64, kept_micros: u64) {
        for (ledger, charge) in &*self.charges {
            let kept = ledger.settle(*charge, billed_micros);
            debug_assert_eq!(kept, kept_micros, "every level keeps the same amount");
        }
    }

    /// Gives the whole worst case back on every ancestor.
    pub(crate) fn refund(&self) {
        for (ledger, charge) in &*self.charges {
            ledger.refund(*charge);
        }
    }
}

/// What a shadow reservation stands for: the decision the engine would have made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shadowed {
    /// `Denied` or `Held`.
    pub verdict: Verdict,
    pub codes: CodeSet,
    /// The spend the decision read.
    pub spent: Spent,
}
