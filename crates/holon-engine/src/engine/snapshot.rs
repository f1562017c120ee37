//! The compiled, immutable snapshot: mandates and agents with interned ids and patterns
//! turned into sorted integer sets, so that the fit of an agent under a mandate is lookups
//! and integer compares ([`fit_codes`], the only implementation of those rules; `judge`
//! adds the per-call ones). `tests/admission_reference.rs` holds them to an independent
//! reference on random mandates and agents.

use std::collections::HashMap;

use smallvec::SmallVec;

use super::ledger::{Ledger, LedgerLimits};
use super::registry::LedgerKey;
use crate::admission::{BudgetLimits, Code, CodeSet};
use crate::lookup::{AgentLookup, newest_in_range};
use crate::mandate::Mandate;
use crate::manifest::Manifest;
use crate::money::{Amount, Currency, FxRate};
use crate::pattern::AgentId;
use crate::record::AgentRecord;
use crate::sync::Arc;

mod chain;
mod compile;
mod matchers;

pub(super) use chain::resolve as resolve_chains;
pub use chain::{CHAIN_MANDATES_MAX, SUB_MANDATES_PER_PARENT_MAX};

pub use compile::SnapshotInput;
pub(super) use compile::{compile, compile_agent, compile_mandate};

pub(super) use matchers::{AgentMatcher, ClassMatcher, ClassSet};

/// A mandate's number in the engine (stable across snapshots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MandateIx(pub u32);
/// An agent's number in the engine (stable across snapshots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentIx(pub u32);

/// Measured thresholds in millionths (or runs).
#[derive(Debug, Clone, Copy, Default)]
struct Thresholds {
    any: bool,
    min_success: Option<u64>,
    min_eval: Option<u64>,
    max_latency: Option<u64>,
    min_runs: Option<u64>,
}

/// A mandate ready for admission. `Clone` for a delegated run's copy of its template
/// (`run.rs`): no allocation while its sets fit inline.
#[derive(Debug, Clone)]
pub struct CompiledMandate {
    pub(crate) ix: MandateIx,
    pub(crate) source: Arc<Mandate>,
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) ledger_key: LedgerKey,
    pub(crate) limits: BudgetLimits,
    pub(crate) ledger_limits: LedgerLimits,
    pub(crate) currency: Currency,
    from: i64,
    until: i64,
    fx: SmallVec<[(Currency, FxRate); 4]>,
    issuer_ns: u32,
    deny: AgentMatcher,
    allow_agents: AgentMatcher,
    allow_classes: ClassMatcher,
    allow_published: bool,
    pub(crate) max_depth: u32,
    require_charge_on_success: bool,
    runtimes: Option<u8>,
    max_retention_s: Option<u64>,
    forbid_training: bool,
    forbid_egress: bool,
    thresholds: Thresholds,
    /// Why no call is admitted under it (`mandate_revoked`, `mandate_untrusted`,
    /// `sub_mandate_chain_broken`), if so. Compiled with `from` past every time, so the
    /// validity check (on the hot path anyway) refuses every call and only the denial
    /// asks which code it is.
    pub(crate) barred: Option<Code>,
    /// A published sub-mandate's ancestors in this snapshot, parent first and root last
    /// (empty for a root mandate and a delegated run's): a call under it is judged and
    /// reserved on each of them too (`Engine::decide`'s chain step).
    pub(crate) ancestors: Box<[MandateIx]>,
    /// Why its chain does not hold (`sub_mandate_chain_broken`), for the sentence.
    pub(crate) chain_error: Option<Arc<str>>,
    /// The digest of its chain's root document (a run's sub-calls stop when the root is
    /// replaced by another document with the same id).
    pub(crate) root_digest: Option<crate::trust::Digest>,
    /// The root mandate of its chain: itself for a published mandate, the root call's
    /// mandate for a delegated run's (a run's sub-calls stop when the root is revoked).
    pub(crate) root: MandateIx,
}

/// A declared downstream agent, resolved against the snapshot at compile time.
#[derive(Debug, Clone)]
struct CallTarget {
    id: u32,
    ns: u32,
    /// Classes of the newest known manifest in the declared range (empty if none).
    classes: ClassSet,
}

/// An agent ready for admission.
#[derive(Debug)]
pub struct CompiledAgent {
    pub(crate) ix: AgentIx,
    pub(crate) source: Arc<Manifest>,
    pub(crate) record: Option<Arc<AgentRecord>>,
    ns: u32,
    classes: ClassSet,
    charges_on_attempt: bool,
    runtime_bit: u8,
    retention_none: bool,
    retention_max_s: u64,
    training: bool,
    egress: bool,
    currency: Option<Currency>,
    ceiling_micros: u64,
    cap_micros: u64,
    pub(crate) has_calls: bool,
    call_classes: Box<[ClassSet]>,
    call_agents: Box<[CallTarget]>,
    record_applies: bool,
    success: Option<u64>,
    eval: Option<u64>,
    latency: Option<u64>,
    runs: Option<u64>,
    /// `runtime.limits.timeout_s`: how long before a reservation may be reclaimed.
    pub(crate) timeout_s: u64,
    /// Signatures are required and its publisher's provenance signature does not verify.
    pub(crate) unverified: bool,
    /// `has_calls || unverified`: whether `fit_codes` has more than the common checks.
    rare_checks: bool,
}

// The compiled forms are read-only outside this crate: their fields are the engine's (a
// ledger among them), so a gateway reads them through these accessors.
impl CompiledMandate {
    /// On the published revocation list, itself or through its chain.
    pub fn revoked(&self) -> bool {
        self.barred == Some(Code::MandateRevoked)
    }

    /// Its index in the snapshot.
    pub fn ix(&self) -> MandateIx {
        self.ix
    }

    /// The document it was compiled from.
    pub fn source(&self) -> &Mandate {
        &self.source
    }

    /// A published sub-mandate's ancestors, parent first and root last (empty for a root
    /// mandate): a call under it is judged and reserved on each of them too.
    pub fn ancestors(&self) -> &[MandateIx] {
        &self.ancestors
    }

    /// The limits its ledger enforces (the engine's inside, under `internals`).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn ledger_limits(&self) -> LedgerLimits {
        self.ledger_limits
    }

    /// Its ledger (the engine's inside, under `internals`).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }
}

impl CompiledAgent {
    /// Its index in the snapshot.
    pub fn ix(&self) -> AgentIx {
        self.ix
    }

    /// The manifest it was compiled from.
    pub fn source(&self) -> &Manifest {
        &self.source
    }

    /// Its record (measured behaviour), if one was published.
    pub fn record(&self) -> Option<&AgentRecord> {
        self.record.as_deref()
    }

    /// Whether the agent has `class` (an interned word).
    pub fn has_class(&self, class: u32) -> bool {
        self.classes.has(class)
    }
}

/// What the fit of one agent under one mandate comes to, in the mandate's currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FitFacts {
    pub codes: CodeSet,
    pub own_ceiling: Amount,
    pub passthrough_cap: Amount,
}

/// The rules that depend only on the mandate and the agent (docs/admission.md), on
/// compiled forms: no allocation, no strings, no decimals.
/// `by_capability` adds `published_not_allowed` where it applies.
///
/// `inline(always)`: `decide` calls it once per call; when `decide` grew (ids that cannot
/// collide, the clock-bounded day) LLVM stopped inlining it, which cost 43 instructions per
/// allowed admit+settle in the bench gate (1,059 against 1,016 inlined; 1,011 before).
#[inline(always)]
pub(super) fn fit_codes(m: &CompiledMandate, a: &CompiledAgent, by_capability: bool) -> FitFacts {
    let mut codes = CodeSet::EMPTY;
    let id = a.ix.0;
    if m.deny.matches(id, a.ns) {
        codes.insert(Code::AgentDenied);
    }
    if !(m.allow_agents.matches(id, a.ns) || m.allow_classes.matches(&a.classes)) {
        codes.insert(Code::NotAllowed);
    }
    // One branch for the rare checks, so a leaf agent with a valid provenance pays one.
    if a.rare_checks {
        if a.unverified {
            codes.insert(Code::ProvenanceUnverified);
        }
        delegation_codes(m, a, &mut codes);
    }
    if m.require_charge_on_success && a.charges_on_attempt {
        codes.insert(Code::ChargeOnSuccessRequired);
    }
    if m.runtimes.is_some_and(|mask| mask & a.runtime_bit == 0) {
        codes.insert(Code::RuntimeNotAllowed);
    }
    if m.max_retention_s.is_some_and(|limit| !a.retention_none && a.retention_max_s > limit) {
        codes.insert(Code::RetentionTooLong);
    }
    if m.forbid_training && a.training {
        codes.insert(Code::TrainingUseNotAllowed);
    }
    if m.forbid_egress && a.egress {
        codes.insert(Code::EgressNotAllowed);
    }
    let t = &m.thresholds;
    if t.any {
        if !a.record_applies {
            codes.insert(Code::RecordMissing);
        } else {
            let below = |min: Option<u64>, got: Option<u64>| min.is_some_and(|min| got.is_none_or(|v| v < min));
            if below(t.min_success, a.success) {
                codes.insert(Code::SuccessRateBelowMin);
            }
            if below(t.min_eval, a.eval) {
                codes.insert(Code::EvalScoreBelowMin);
            }
            if t.max_latency.is_some_and(|max| a.latency.is_none_or(|v| v > max)) {
                codes.insert(Code::LatencyP95AboveMax);
            }
            if below(t.min_runs, a.runs) {
                codes.insert(Code::RunsBelowMin);
            }
        }
    }
    let (own_ceiling, passthrough_cap) = convert_prices(m, a, &mut codes);
    if own_ceiling.checked_add(passthrough_cap).is_err() {
        codes.insert(Code::AmountOverflow);
    }
    if by_capability && !m.allow_published && a.ns != m.issuer_ns {
        codes.insert(Code::PublishedNotAllowed);
    }
    FitFacts { codes, own_ceiling, passthrough_cap }
}

#[inline]
fn convert_prices(m: &CompiledMandate, a: &CompiledAgent, codes: &mut CodeSet) -> (Amount, Amount) {
    if a.ceiling_micros == 0 && a.cap_micros == 0 {
        return (Amount::ZERO, Amount::ZERO);
    }
    let rate = match a.currency {
        Some(c) if c == m.currency => Some(FxRate::ONE),
        Some(c) => m.fx.iter().find(|(k, _)| *k == c).map(|(_, r)| *r),
        None => None,
    };
    let Some(rate) = rate else {
        codes.insert(Code::CurrencyWithoutRate);
        return (Amount::ZERO, Amount::ZERO);
    };
    match (Amount::from_micros(a.ceiling_micros).convert(rate), Amount::from_micros(a.cap_micros).convert(rate)) {
        (Ok(c), Ok(k)) => (c, k),
        _ => {
            codes.insert(Code::AmountOverflow);
            (Amount::ZERO, Amount::ZERO)
        }
    }
}

/// `from <= at <= until`.
#[inline]
pub(super) fn window_codes(m: &CompiledMandate, at: i64) -> CodeSet {
    if at < m.from {
        before_window(m)
    } else if at > m.until {
        CodeSet::EMPTY.with(Code::MandateExpired)
    } else {
        CodeSet::EMPTY
    }
}

/// A call before the validity window: not yet valid, or barred (revoked, untrusted, a
/// sub-mandate whose chain does not hold, compiled with `from` past every time). Off the allowed path.
#[cold]
#[inline(never)]
fn before_window(m: &CompiledMandate) -> CodeSet {
    CodeSet::EMPTY.with(m.barred.unwrap_or(Code::MandateNotYetValid))
}

/// The fit rules for an agent that declares downstream calls.
#[inline(always)]
fn delegation_codes(m: &CompiledMandate, a: &CompiledAgent, codes: &mut CodeSet) {
    if a.has_calls {
        if m.max_depth < 1 {
            codes.insert(Code::DelegationDepthExceeded);
        }
        let class_refused = a.call_classes.iter().any(|c| !m.allow_classes.matches(c));
        // A declared agent with no known manifest in its range has no class, so even
        // `allow.capabilities: ["*"]` does not admit it (fail closed).
        let agent_refused = a.call_agents.iter().any(|t| {
            m.deny.matches(t.id, t.ns)
                || !(m.allow_agents.matches(t.id, t.ns)
                    || (!t.classes.is_empty() && m.allow_classes.matches(&t.classes)))
        });
        if class_refused || agent_refused {
            codes.insert(Code::DownstreamNotAllowed);
        }
    }
}

/// Why an orchestrator's run could not be opened (its call is denied before it runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunRefused {
    /// The derived sub-mandate would widen its parent (`sub_mandate_widens`).
    Widens,
    /// The engine could not compile it (names exhausted, a limit out of range):
    /// `internal_error`.
    Engine,
}

/// A delegated run's derived sub-mandate with its parent's figures, compiled once per
/// snapshot (`run.rs`), or why there is none.
pub(crate) type RunTemplate = Result<CompiledMandate, RunRefused>;

/// The immutable compiled state admission runs against.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Counts publishes (1 for the first published snapshot).
    pub generation: u64,
    mandates: Vec<Option<CompiledMandate>>,
    agents: Vec<Option<CompiledAgent>>,
    /// For the slow paths (delegation): agents by id.
    by_id: HashMap<AgentId, AgentIx>,
    /// Every version of every agent, for declared-call lookups (delegation's slow path).
    versions: HashMap<AgentId, Vec<Arc<Manifest>>>,
    /// With signatures required: the mandates whose chain does not hold, and why (they
    /// are barred, `mandate_untrusted`).
    untrusted: Vec<(String, String)>,
    /// Delegated runs' derived sub-mandates, compiled on each (published mandate,
    /// orchestrator) pair's first call (`run.rs`; at most `RUN_TEMPLATES_MAX`).
    pub(super) run_templates: dashmap::DashMap<(MandateIx, AgentIx), RunTemplate>,
}

impl Snapshot {
    /// The mandates barred as untrusted by this publish, and why.
    pub fn untrusted(&self) -> &[(String, String)] {
        &self.untrusted
    }

    #[inline]
    pub fn mandate(&self, ix: MandateIx) -> Option<&CompiledMandate> {
        self.mandates.get(ix.0 as usize).and_then(Option::as_ref)
    }
    #[inline]
    pub fn agent(&self, ix: AgentIx) -> Option<&CompiledAgent> {
        self.agents.get(ix.0 as usize).and_then(Option::as_ref)
    }
    pub fn agent_by_id(&self, id: &AgentId) -> Option<&CompiledAgent> {
        self.by_id.get(id).and_then(|ix| self.agent(*ix))
    }
    pub fn mandates(&self) -> impl Iterator<Item = &CompiledMandate> {
        self.mandates.iter().flatten()
    }
    pub fn agents(&self) -> impl Iterator<Item = &CompiledAgent> {
        self.agents.iter().flatten()
    }
    pub fn mandate_count(&self) -> usize {
        self.mandates().count()
    }
    pub fn agent_count(&self) -> usize {
        self.agents().count()
    }
}

impl AgentLookup for Snapshot {
    fn find(&self, id: &AgentId, range: &semver::VersionReq) -> Option<&Manifest> {
        newest_in_range(self.versions.get(id).into_iter().flatten().map(|m| &**m), id, range)
    }
}
