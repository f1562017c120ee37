//! Compilation: documents into the snapshot's integer forms (interned ids, sorted sets,
//! money in micro-units), the trust checks a publish makes (signature chains when required,
//! revocation), and the snapshot assembled from them.

use std::collections::HashMap;

use super::{
    AgentIx, AgentMatcher, CallTarget, ClassMatcher, ClassSet, CompiledAgent, CompiledMandate, MandateIx, Snapshot,
    Thresholds,
};
use crate::admission::{BudgetLimits, Code};
use crate::engine::EngineError;
use crate::engine::ledger::{Ledger, LedgerLimits};
use crate::engine::registry::LedgerKey;
use crate::engine::symbols::Names;
use crate::lookup::{AgentLookup, newest_in_range};
use crate::mandate::Mandate;
use crate::manifest::{ChargeOn, Manifest, PricingModel, RuntimeKind};
use crate::money::Amount;
use crate::pattern::AgentId;
use crate::record::AgentRecord;
use crate::sync::Arc;
use crate::trust::{Digest, Revocations, TrustedKeys, chain, provenance};

fn runtime_bit(kind: RuntimeKind) -> u8 {
    match kind {
        RuntimeKind::Container => 1,
        RuntimeKind::Mcp => 2,
        RuntimeKind::A2a => 4,
    }
}

/// Compiles one mandate. `ledger` is the mandate's ledger (carried over across snapshots).
pub(in crate::engine) fn compile_mandate(
    ix: MandateIx,
    source: Arc<Mandate>,
    ledger: Arc<Ledger>,
    ledger_key: LedgerKey,
    names: &Names,
    barred: Option<Code>,
) -> Result<CompiledMandate, EngineError> {
    let m = &*source;
    // The bounds of `mandate::limits`, the table `validate` refuses from too.
    if let Some(v) = crate::mandate::limits::figure_violations(m).into_iter().next() {
        return Err(EngineError::Compile { mandate: m.id.clone(), message: format!("{}: {}", v.path, v.message) });
    }
    let req = &m.require;
    let milli = |v: Option<crate::money::Fixed6>| v.map(|f| f.millionths());
    let compiled = CompiledMandate {
        ix,
        limits: BudgetLimits::of(m),
        ledger_limits: ledger_limits(&ledger, m.budget.total, m.budget.per_day),
        currency: m.budget.currency,
        from: if barred.is_some() { i64::MAX } else { m.valid.from.unix() },
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
        barred,
        ancestors: Box::new([]),
        chain_error: None,
        root: ix,
        root_digest: m.digest(),
        ledger,
        ledger_key,
        source,
    };
    Ok(compiled)
}

/// What `ledger` enforces of a mandate's `total` and `per_day`: a store-backed ledger is
/// checked against its allowance caps (the store enforces the mandate's own limits on the
/// leases it grants).
fn ledger_limits(ledger: &Ledger, total: Amount, per_day: Option<Amount>) -> LedgerLimits {
    let (total_micros, day_micros_max) = ledger.enforced(total.micros(), per_day.map(|d| d.micros()));
    LedgerLimits { total_micros, day_micros_max, epoch: ledger.epoch_for(total_micros, day_micros_max) }
}

impl CompiledMandate {
    /// A delegated run's copy of its template (whose figures are the parent's) with the
    /// call's own figures, on the run's ledger.
    pub(in crate::engine) fn put_run_figures(&mut self, figures: crate::delegation::RunFigures) {
        debug_assert!(figures.total <= self.limits.total, "a run's figures only lower the parent's");
        self.limits.total = figures.total;
        self.limits.per_call = figures.per_call;
        self.limits.per_day = figures.per_day;
        self.ledger_limits = ledger_limits(&self.ledger, figures.total, figures.per_day);
    }
}

/// Compiles one agent; `lookup` resolves its declared downstream agents.
pub(in crate::engine) fn compile_agent(
    ix: AgentIx,
    source: Arc<Manifest>,
    record: Option<Arc<AgentRecord>>,
    lookup: &dyn AgentLookup,
    names: &Names,
    unverified: bool,
) -> Result<CompiledAgent, EngineError> {
    let a = &*source;
    let words = &names.words;
    // A record given for another agent or version does not apply (the one rule of `lookup`).
    let rec = record.as_deref().filter(|r| crate::lookup::record_applies(r, a));
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
        unverified,
        rare_checks: unverified || !a.calls.is_empty(),
        record,
        source,
    };
    Ok(compiled)
}

/// The documents a snapshot is compiled from.
#[derive(Debug, Clone, Default)]
pub struct SnapshotInput {
    pub mandates: Vec<Arc<Mandate>>,
    /// Agents with their records. With several versions of one id, calls to the agent use
    /// the newest; a declared call resolves to the newest version in its range.
    pub agents: Vec<(Arc<Manifest>, Option<Arc<AgentRecord>>)>,
    /// The keys trusted to sign mandates and provenance; read when the engine requires
    /// signatures ([`EngineConfig::require_signatures`](super::EngineConfig)).
    pub keys: TrustedKeys,
    /// Mandates revoked: no call is admitted under them, or under any mandate chained to
    /// them, once this snapshot is published.
    pub revocations: Revocations,
}

/// Every version of every agent by id: what compilation resolves declared downstream calls
/// against, with [`newest_in_range`], the lookup of the CLI's `Catalog` too.
pub(in crate::engine) struct AgentVersions<'a>(HashMap<&'a AgentId, Vec<&'a Manifest>>);

impl<'a> AgentVersions<'a> {
    pub(in crate::engine) fn of(agents: impl Iterator<Item = &'a Manifest>) -> Self {
        let mut map: HashMap<&AgentId, Vec<&Manifest>> = HashMap::new();
        for m in agents {
            map.entry(&m.id).or_default().push(m);
        }
        AgentVersions(map)
    }

    /// The newest version of `id` (the one a call naming the agent is admitted against).
    pub(in crate::engine) fn newest(&self, id: &AgentId) -> Option<&'a Manifest> {
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
pub(in crate::engine) fn compile(
    input: &SnapshotInput,
    generation: u64,
    require_signatures: bool,
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
        let unverified = require_signatures && provenance::verify(manifest, record.as_deref(), &input.keys).is_err();
        let agent = compile_agent(ix, Arc::clone(manifest), record.clone(), &versions, names, unverified)?;
        put(&mut snapshot.agents, ix.0, agent);
        snapshot.by_id.insert(manifest.id.clone(), ix);
    }
    let sources: Vec<&Mandate> = input.mandates.iter().map(|m| &**m).collect();
    let untrusted = if require_signatures { untrusted(&sources, &input.keys, &versions) } else { Vec::new() };
    let revoked = input.revocations.apply(&sources);
    let chains = super::chain::resolve(&input.mandates, &versions);
    for (mandate, chain) in input.mandates.iter().zip(&chains) {
        let sym = names.mandates.intern(&mandate.id)?;
        if snapshot.mandate(MandateIx(sym)).is_some() {
            return Err(EngineError::Compile {
                mandate: mandate.id.clone(),
                message: "two mandates have this id; ids must be unique in one snapshot".into(),
            });
        }
        let (ledger, key) = ledger_of(sym);
        // Fail closed per mandate, never per publish: a bad chain or a sub-mandate bars that
        // mandate, and the rest of the publish (its revocations above all) takes effect.
        let barred = if revoked.contains_key(mandate.id.as_str()) {
            Some(Code::MandateRevoked)
        } else if untrusted.iter().any(|(id, _)| id == &mandate.id) {
            Some(Code::MandateUntrusted)
        } else if chain.is_err() {
            Some(Code::SubMandateChainBroken)
        } else {
            None
        };
        let mut compiled = compile_mandate(MandateIx(sym), Arc::clone(mandate), ledger, key, names, barred)?;
        match chain {
            Ok(ancestors) => {
                let ids = ancestors.iter().filter_map(|&j| input.mandates.get(j));
                compiled.ancestors =
                    ids.map(|m| names.mandates.intern(&m.id).map(MandateIx)).collect::<Result<_, _>>()?;
            }
            Err(why) => compiled.chain_error = Some(why.as_str().into()),
        }
        put(&mut snapshot.mandates, sym, compiled);
    }
    snapshot.untrusted = untrusted;
    Ok(snapshot)
}

/// The mandates whose chain does not hold (signed by a key trusted for its issuer, each
/// parent among `mandates` by digest, each child narrowing its parent), with why.
fn untrusted(mandates: &[&Mandate], keys: &TrustedKeys, agents: &AgentVersions<'_>) -> Vec<(String, String)> {
    let by_digest: HashMap<Digest, &Mandate> = mandates.iter().filter_map(|m| m.digest().map(|d| (d, *m))).collect();
    mandates
        .iter()
        .filter_map(|m| {
            chain::verify_chain(m, &|d| by_digest.get(d).copied(), keys, agents)
                .err()
                .map(|e| (m.id.clone(), e.to_string()))
        })
        .collect()
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
