//! An orchestrator's delegated run (docs/admission.md, "Derived sub-mandates"): its
//! derived sub-mandate, compiled once per snapshot for each (mandate, orchestrator) pair
//! and cached in the snapshot ([`Snapshot::run_template`]); each call puts its own budget
//! figures (`delegation::run_figures`) into a copy on a ledger of its own. The copies and
//! their ledgers come from the engine's pool ([`RunPool`]) and go back to it when the
//! orchestrator's reservation ends, so admitting an orchestrator allocates nothing once
//! the pool is warm (`tests/engine_alloc.rs`).
//!
//! Attenuation is as strict as deriving the whole document per call: the template is the
//! derived document with the parent's own figures, checked by every attenuation rule; the
//! call's figures can only break `total_widened`, which `run_figures` checks per call
//! (`delegation::derive` checks the whole document in one pass, with every reason;
//! `tests/engine_admission.rs` holds each pooled run's document equal to it).

use dashmap::mapref::one::Ref;

use super::Engine;
use super::ledger::Ledger;
use super::registry::LedgerKey;
pub(crate) use super::snapshot::RunRefused;
use super::snapshot::{self, AgentIx, CompiledAgent, CompiledMandate, MandateIx, RunTemplate, Snapshot};
use crate::delegation::{self, RunFigures};
use crate::mandate::Mandate;
use crate::manifest::Manifest;
use crate::money::Amount;
use crate::sync::Arc;

/// The most derived sub-mandates one snapshot keeps compiled (one per (mandate,
/// orchestrator) pair that has called): past it, a run's is compiled for its call alone.
pub const RUN_TEMPLATES_MAX: usize = 65_536;
/// The most ended runs the engine keeps for reuse (each holds its ledger, about a
/// kilobyte): past it, an ended run is freed.
pub const RUNS_POOLED_MAX: usize = 256;

/// An orchestrator's delegated run: its derived, compiled sub-mandate with its own ledger
/// bounded by the downstream budget.
#[derive(Debug)]
pub(crate) struct Run {
    /// The template's copy with this call's figures and ledger. Its `source` is the
    /// template's document, whose budget figures are the parent's: [`Run::derived`] is the
    /// run's own.
    pub mandate: CompiledMandate,
    pub orchestrator: Arc<Manifest>,
}

impl Run {
    /// Opens `orchestrator`'s run under `parent` for a call that left `sub_budget` to its
    /// sub-calls: the snapshot's template (compiled on the pair's first call) with the
    /// call's figures, on a pooled run's ledger.
    // Never inlined: a cold path next to the admission of a leaf, and inlined into
    // `decide` it cost the allowed path's registers (gate: 988 instructions per
    // admit+settle inlined, 984 not).
    #[inline(never)]
    pub(crate) fn open(
        engine: &Engine,
        snap: &Snapshot,
        parent: &CompiledMandate,
        orchestrator: &CompiledAgent,
        sub_budget: Amount,
    ) -> Result<Box<Run>, RunRefused> {
        let figures = delegation::run_figures(&parent.source, sub_budget).map_err(|_| RunRefused::Widens)?;
        let mut run = match snap.run_template(engine, parent, orchestrator) {
            Cached::Kept(template) => engine.runs.take(template.value().as_ref().map_err(|r| *r)?, orchestrator),
            Cached::Alone(template) => engine.runs.take(&(*template)?, orchestrator),
        };
        run.mandate.put_run_figures(figures);
        Ok(run)
    }

    /// The run's derived sub-mandate as a document, with its own figures (allocates: for
    /// the cold paths that explain or show it).
    pub(crate) fn derived(&self) -> Mandate {
        let mut doc = (*self.mandate.source).clone();
        let limits = self.mandate.limits;
        RunFigures { total: limits.total, per_call: limits.per_call, per_day: limits.per_day }
            .put_into(&mut doc.budget);
        doc
    }
}

/// Compiles the template of `orchestrator`'s runs under `parent` against `snap`.
fn compile_template(
    engine: &Engine,
    snap: &Snapshot,
    parent: &CompiledMandate,
    orchestrator: &CompiledAgent,
) -> RunTemplate {
    let derived =
        delegation::derive_template(&parent.source, &orchestrator.source, snap).map_err(|_| RunRefused::Widens)?;
    let ix = MandateIx(engine.names.mandates.intern(&derived.id).map_err(|_| RunRefused::Engine)?);
    // A placeholder: each run gets a ledger of its own (`RunPool::take`).
    let ledger = Arc::new(Ledger::new());
    let mut mandate =
        snapshot::compile_mandate(ix, Arc::new(derived), ledger, LedgerKey::Run, &engine.names, parent.barred)
            .map_err(|_| RunRefused::Engine)?;
    mandate.root = parent.root;
    mandate.root_digest = parent.root_digest;
    Ok(mandate)
}

/// A template from the snapshot's cache, or one compiled for this call alone (a nested
/// run's, or the cache is full).
pub(super) enum Cached<'s> {
    Kept(Ref<'s, (MandateIx, AgentIx), RunTemplate>),
    Alone(Box<RunTemplate>),
}

impl Snapshot {
    /// The template of `orchestrator`'s runs under `parent`: compiled on the pair's first
    /// call and kept while this snapshot is live (a publish compiles anew against the new
    /// documents).
    ///
    /// Kept only for a parent that is this snapshot's own compiled mandate. A nested run's
    /// parent is a run's copy, whose document may be an older snapshot's (the run keeps the
    /// document it opened under) while its number is the same for every version: its
    /// template is compiled for its call alone (found by review; test
    /// `a_nested_run_of_an_older_run_is_not_the_template_of_a_newer_one`).
    pub(super) fn run_template(
        &self,
        engine: &Engine,
        parent: &CompiledMandate,
        orchestrator: &CompiledAgent,
    ) -> Cached<'_> {
        let key = (parent.ix, orchestrator.ix);
        let published = self.mandate(parent.ix).is_some_and(|m| std::ptr::eq(m, parent));
        if !published {
            return Cached::Alone(Box::new(compile_template(engine, self, parent, orchestrator)));
        }
        if let Some(kept) = self.run_templates.get(&key) {
            return Cached::Kept(kept);
        }
        let template = compile_template(engine, self, parent, orchestrator);
        if self.run_templates.len() >= RUN_TEMPLATES_MAX {
            return Cached::Alone(Box::new(template));
        }
        // Two callers may compile the same pair at once: the first insert is kept, and both
        // templates are the same.
        Cached::Kept(self.run_templates.entry(key).or_insert(template).downgrade())
    }
}

/// Ended runs kept for reuse, so that an orchestrator's admission allocates neither its
/// copy of the template nor its ledger.
#[derive(Debug)]
pub(super) struct RunPool {
    // Boxes, not runs: a reservation holds its run by `Box`, handed out and back whole.
    #[allow(clippy::vec_box)]
    runs: parking_lot::Mutex<Vec<Box<Run>>>,
}

impl RunPool {
    pub(super) fn new() -> Self {
        RunPool { runs: parking_lot::Mutex::new(Vec::with_capacity(RUNS_POOLED_MAX)) }
    }

    /// A run with `template`'s rules on a fresh ledger: a pooled one, or a new one.
    fn take(&self, template: &CompiledMandate, orchestrator: &CompiledAgent) -> Box<Run> {
        let pooled = self.runs.lock().pop();
        match pooled {
            Some(mut run) => {
                // Its ledger is fresh (`give_back`): it takes the template placeholder's place.
                let mut mandate = template.clone();
                std::mem::swap(&mut mandate.ledger, &mut run.mandate.ledger);
                run.mandate = mandate;
                run.orchestrator = Arc::clone(&orchestrator.source);
                run
            }
            None => {
                let mut mandate = template.clone();
                mandate.ledger = Arc::new(Ledger::new());
                Box::new(Run { mandate, orchestrator: Arc::clone(&orchestrator.source) })
            }
        }
    }

    /// Keeps an ended run for reuse if nothing else holds its ledger (a sub-call's
    /// reservation may outlive its orchestrator's) and the pool has room; its ledger is
    /// zeroed here, off the next admission's path.
    pub(super) fn give_back(&self, mut run: Box<Run>) {
        let Some(ledger) = Arc::get_mut(&mut run.mandate.ledger) else { return };
        *ledger = Ledger::new();
        let mut runs = self.runs.lock();
        if runs.len() < RUNS_POOLED_MAX {
            runs.push(run);
        }
    }
}
