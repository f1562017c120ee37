//! The compiled, immutable snapshot: mandates and agents with interned ids and patterns
//! turned into sorted integer sets, so that the fit of an agent under a mandate is lookups
//! and integer compares ([`fit_codes`], the only implementation of those rules; `judge`
//! adds the per-call ones). `tests/admission_reference.rs` holds them to an independent
//! reference on random mandates and agents.

use std::collections::HashMap;

use smallvec::SmallVec;

use super::EngineError;
use super::ledger::{DAY_MICROS_MAX, Ledger, LedgerLimits};
use super::registry::LedgerKey;
use super::symbols::Names;
use crate::admission::{BudgetLimits, Code, CodeSet};
use crate::lookup::{AgentLookup, newest_in_range};
use crate::mandate::Mandate;
use crate::manifest::{ChargeOn, Manifest, PricingModel, RuntimeKind};
use crate::money::{Amount, Currency, FxRate};
use crate::pattern::AgentId;
use crate::record::AgentRecord;
use crate::sync::Arc;

mod matchers;

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

/// A mandate ready for admission.
#[derive(Debug)]
pub struct CompiledMandate {
    pub ix: MandateIx,
    pub source: Arc<Mandate>,
    pub ledger: Arc<Ledger>,
    pub ledger_key: LedgerKey,
    pub limits: BudgetLimits,
    pub ledger_limits: LedgerLimits,
    pub currency: Currency,
    from: i64,
    until: i64,
    fx: SmallVec<[(Currency, FxRate); 4]>,
    issuer_ns: u32,
    deny: AgentMatcher,
    allow_agents: AgentMatcher,
    allow_classes: ClassMatcher,
    allow_published: bool,
    pub max_depth: u32,
    require_charge_on_success: bool,
    runtimes: Option<u8>,
    max_retention_s: Option<u64>,
    forbid_training: bool,
    forbid_egress: bool,
    thresholds: Thresholds,
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
    pub ix: AgentIx,
    pub source: Arc<Manifest>,
    pub record: Option<Arc<AgentRecord>>,
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
    pub has_calls: bool,
    call_classes: Box<[ClassSet]>,
    call_agents: Box<[CallTarget]>,
    record_applies: bool,
    success: Option<u64>,
    eval: Option<u64>,
    latency: Option<u64>,
    runs: Option<u64>,
    /// `runtime.limits.timeout_s`: how long before a reservation may be reclaimed.
    pub timeout_s: u64,
}

impl CompiledAgent {
    /// Whether the agent has `class` (an interned word).
    pub fn has_class(&self, class: u32) -> bool {
        self.classes.has(class)
    }
}

fn runtime_bit(kind: RuntimeKind) -> u8 {
    match kind {
        RuntimeKind::Container => 1,
        RuntimeKind::Mcp => 2,
        RuntimeKind::A2a => 4,
    }
}

/// Compiles one mandate. `ledger` is the mandate's ledger (carried over across snapshots).
pub(super) fn compile_mandate(
    ix: MandateIx,
    source: Arc<Mandate>,
    ledger: Arc<Ledger>,
    ledger_key: LedgerKey,
    names: &Names,
) -> Result<CompiledMandate, EngineError> {
    let m = &*source;
    if let Some(day) = m.budget.per_day
        && day.micros() > DAY_MICROS_MAX
    {
        return Err(EngineError::Compile {
            mandate: m.id.clone(),
            message: format!(
                "per_day {day} is above the engine's per-day maximum {}",
                Amount::from_micros(DAY_MICROS_MAX)
            ),
        });
    }
    let req = &m.require;
    let milli = |v: Option<crate::money::Fixed6>| v.map(|f| f.millionths());
    // A store-backed ledger is checked against its allowance caps: the store enforces the
    // mandate's own limits on the leases it grants.
    let (total_micros, day_micros_max) = ledger.enforced(m.budget.total.micros(), m.budget.per_day.map(|d| d.micros()));
    let compiled = CompiledMandate {
        ix,
        limits: BudgetLimits::of(m),
        ledger_limits: LedgerLimits {
            total_micros,
            day_micros_max,
            epoch: ledger.epoch_for(total_micros, day_micros_max),
        },
        currency: m.budget.currency,
        from: m.valid.from.unix(),
        until: m.valid.until.unix(),
        fx: m.budget.fx.iter().map(|(c, r)| (*c, *r)).collect(),
        issuer_ns: names.words.intern(m.issuer.namespace())?,
        deny: AgentMatcher::of(&m.deny.agents, names)?,
        allow_agents: AgentMatcher::of(&m.allow.agents, names)?,
        allow_classes: ClassMatcher::of(&m.allow.capabilities, &names.words)?,
        allow_published: m.allow.published,
        max_depth: m.delegation.max_depth,
        require_charge_on_success: req.charge_on_success,
        runtimes: req.runtimes.as_ref().map(|rs| rs.iter().fold(0, |mask, r| mask | runtime_bit(*r))),
        max_retention_s: m.data.max_retention.as_ref().map(|r| r.seconds_min()),
        forbid_training: m.data.forbids_training(),
        forbid_egress: m.data.forbids_egress(),
        thresholds: Thresholds {
            any: req.has_thresholds(),
            min_success: milli(req.min_success_rate),
            min_eval: milli(req.min_eval_score),
            max_latency: milli(req.max_latency_p95_s),
            min_runs: req.min_runs_30d,
        },
        ledger,
        ledger_key,
        source,
    };
    Ok(compiled)
}

/// Compiles one agent; `lookup` resolves its declared downstream agents.
pub(super) fn compile_agent(
    ix: AgentIx,
    source: Arc<Manifest>,
    record: Option<Arc<AgentRecord>>,
    lookup: &dyn AgentLookup,
    names: &Names,
) -> Result<CompiledAgent, EngineError> {
    let a = &*source;
    let words = &names.words;
    let rec = record.as_deref().filter(|r| r.agent == a.id && r.version.as_ref().is_none_or(|v| v == &a.version));
    let mut call_classes = Vec::new();
    let mut call_agents = Vec::new();
    for call in &a.calls {
        if let Some(class) = &call.capability {
            call_classes.push(ClassSet::of(std::iter::once(class.as_str()), words)?);
        }
        if let Some(target) = &call.agent {
            let classes = match lookup.find(&target.id, &target.range) {
                Some(m) => ClassSet::of(m.classes().map(|c| c.as_str()), words)?,
                None => ClassSet::default(),
            };
            call_agents.push(CallTarget {
                id: names.agents.intern(target.id.as_str())?,
                ns: words.intern(target.id.namespace())?,
                classes,
            });
        }
    }
    let pricing = &a.pricing;
    let compiled = CompiledAgent {
        ix,
        ns: words.intern(a.id.namespace())?,
        classes: ClassSet::of(a.classes().map(|c| c.as_str()), words)?,
        charges_on_attempt: pricing.model != PricingModel::Free && pricing.charge_on() != ChargeOn::Success,
        runtime_bit: runtime_bit(a.runtime.kind),
        retention_none: a.data.retention.is_none(),
        retention_max_s: a.data.retention.seconds_max(),
        training: a.data.training_use,
        egress: !a.data.egress.is_empty(),
        currency: pricing.currency,
        ceiling_micros: pricing.ceiling().unwrap_or(Amount::ZERO).micros(),
        cap_micros: pricing.passthrough_cap().unwrap_or(Amount::ZERO).micros(),
        has_calls: !a.calls.is_empty(),
        call_classes: call_classes.into_boxed_slice(),
        call_agents: call_agents.into_boxed_slice(),
        record_applies: rec.is_some(),
        success: rec.and_then(|r| r.effective_success_rate()).map(|f| f.millionths()),
        eval: rec.and_then(|r| r.eval_score).map(|f| f.millionths()),
        latency: rec.and_then(|r| r.latency_p95_s).map(|f| f.millionths()),
        runs: rec.and_then(|r| r.runs_30d),
        timeout_s: a.runtime.limits.timeout_s,
        record,
        source,
    };
    Ok(compiled)
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
        CodeSet::EMPTY.with(Code::MandateNotYetValid)
    } else if at > m.until {
        CodeSet::EMPTY.with(Code::MandateExpired)
    } else {
        CodeSet::EMPTY
    }
}

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
}

impl Snapshot {
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

/// The documents a snapshot is compiled from.
#[derive(Debug, Clone, Default)]
pub struct SnapshotInput {
    pub mandates: Vec<Arc<Mandate>>,
    /// Agents with their records. With several versions of one id, calls to the agent use
    /// the newest; a declared call resolves to the newest version in its range.
    pub agents: Vec<(Arc<Manifest>, Option<Arc<AgentRecord>>)>,
}

/// Every version of every agent by id: what compilation resolves declared downstream calls
/// against, with [`newest_in_range`], the lookup of the CLI's `Catalog` too.
pub(super) struct AgentVersions<'a>(HashMap<&'a AgentId, Vec<&'a Manifest>>);

impl<'a> AgentVersions<'a> {
    pub(super) fn of(agents: impl Iterator<Item = &'a Manifest>) -> Self {
        let mut map: HashMap<&AgentId, Vec<&Manifest>> = HashMap::new();
        for m in agents {
            map.entry(&m.id).or_default().push(m);
        }
        AgentVersions(map)
    }

    /// The newest version of `id` (the one a call naming the agent is admitted against).
    pub(super) fn newest(&self, id: &AgentId) -> Option<&'a Manifest> {
        self.0.get(id).and_then(|v| v.iter().copied().max_by(|a, b| a.version.cmp(&b.version)))
    }
}

impl AgentLookup for AgentVersions<'_> {
    fn find(&self, id: &AgentId, range: &semver::VersionReq) -> Option<&Manifest> {
        newest_in_range(self.0.get(id).into_iter().flatten().copied(), id, range)
    }
}

/// Compiles a snapshot. `ledger_of(mandate symbol)` returns the mandate's ledger and its key
/// (the engine carries ledgers over between snapshots this way).
pub(super) fn compile(
    input: &SnapshotInput,
    generation: u64,
    names: &Names,
    mut ledger_of: impl FnMut(u32) -> (Arc<Ledger>, LedgerKey),
) -> Result<Snapshot, EngineError> {
    let versions = AgentVersions::of(input.agents.iter().map(|(m, _)| &**m));
    let mut snapshot = Snapshot { generation, ..Snapshot::default() };
    for (manifest, _) in &input.agents {
        snapshot.versions.entry(manifest.id.clone()).or_default().push(Arc::clone(manifest));
    }
    for (manifest, record) in &input.agents {
        if versions.newest(&manifest.id).is_some_and(|m| !std::ptr::eq(m, &**manifest)) {
            continue;
        }
        let ix = AgentIx(names.agents.intern(manifest.id.as_str())?);
        let agent = compile_agent(ix, Arc::clone(manifest), record.clone(), &versions, names)?;
        put(&mut snapshot.agents, ix.0, agent);
        snapshot.by_id.insert(manifest.id.clone(), ix);
    }
    for mandate in &input.mandates {
        let sym = names.mandates.intern(&mandate.id)?;
        if snapshot.mandate(MandateIx(sym)).is_some() {
            return Err(EngineError::Compile {
                mandate: mandate.id.clone(),
                message: "two mandates have this id; ids must be unique in one snapshot".into(),
            });
        }
        let (ledger, key) = ledger_of(sym);
        let compiled = compile_mandate(MandateIx(sym), Arc::clone(mandate), ledger, key, names)?;
        put(&mut snapshot.mandates, sym, compiled);
    }
    Ok(snapshot)
}

fn put<T>(v: &mut Vec<Option<T>>, at: u32, value: T) {
    let at = at as usize;
    if v.len() <= at {
        v.resize_with(at + 1, || None);
    }
    if let Some(place) = v.get_mut(at) {
        *place = Some(value);
    }
}
