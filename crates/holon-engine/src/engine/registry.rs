//! The engine's root ledgers: one per mandate symbol, created on first use and kept for
//! the engine's life (a mandate that is removed and added back keeps its spend), in an
//! append-only arena so that a reservation can hold `&'e Ledger` instead of an `Arc`: two
//! fewer atomic RMWs on a hot mandate per call.
//!
//! A compiled mandate names its ledger by a [`LedgerKey`]: a root ledger's index in the
//! arena, or [`LedgerKey::Run`] for a delegated run's ledger, which lives only as long as
//! the `Arc`s of the run and its reservations (nothing looks it up: the reaper touches no
//! ledger).

use dashmap::DashMap;

use super::ledger::Ledger;
use crate::sync::Arc;

/// A root ledger's index in the registry's arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RootIx(usize);

/// Where a compiled mandate's ledger lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LedgerKey {
    /// A mandate's root ledger, kept by the [`LedgerRegistry`] for the engine's life.
    Root(RootIx),
    /// A delegated run's ledger, held by `Arc` by the run and its reservations.
    Run,
}

/// The root ledgers: the arena, and the map from mandate symbols to their ledgers.
#[derive(Default)]
pub(crate) struct LedgerRegistry {
    /// New root ledgers admit only what a store grants ([`Ledger::new_store_backed`]).
    store_backed: bool,
    /// Root ledgers in creation order, never removed: a [`RootIx`] stays valid (and
    /// `&Ledger` borrowed from here lives) as long as the registry.
    roots: boxcar::Vec<Arc<Ledger>>,
    /// Mandate symbol → (index, ledger) of its root ledger. Slow paths only.
    by_mandate: DashMap<u32, (RootIx, Arc<Ledger>)>,
}

impl LedgerRegistry {
    pub(crate) fn new(store_backed: bool) -> Self {
        LedgerRegistry { store_backed, ..LedgerRegistry::default() }
    }

    /// The root ledger of a mandate symbol and its key, created on first use.
    pub(crate) fn root_ledger(&self, sym: u32) -> (Arc<Ledger>, LedgerKey) {
        let entry = self.by_mandate.entry(sym).or_insert_with(|| {
            let ledger = Arc::new(if self.store_backed { Ledger::new_store_backed() } else { Ledger::new() });
            (RootIx(self.roots.push(Arc::clone(&ledger))), ledger)
        });
        let (ix, ledger) = entry.value();
        (Arc::clone(ledger), LedgerKey::Root(*ix))
    }

    /// A root ledger by index, borrowed for the registry's life (the hot path: no
    /// reference count touched).
    #[inline]
    pub(crate) fn root(&self, ix: RootIx) -> Option<&Ledger> {
        self.roots.get(ix.0).map(|ledger| &**ledger)
    }

    /// The root ledger of a mandate symbol, if it has one.
    pub(crate) fn get(&self, sym: u32) -> Option<Arc<Ledger>> {
        self.by_mandate.get(&sym).map(|e| Arc::clone(&e.value().1))
    }

    /// Every mandate symbol with its root ledger (in no particular order).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, Arc<Ledger>)> + '_ {
        self.by_mandate.iter().map(|e| (*e.key(), Arc::clone(&e.value().1)))
    }
}

#[cfg(all(test, not(holon_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_keeps_one_root_ledger_and_its_key_finds_it() {
        let registry = LedgerRegistry::default();
        let (a, key_a) = registry.root_ledger(7);
        let (again, key_again) = registry.root_ledger(7);
        let (b, key_b) = registry.root_ledger(3);
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(key_a, key_again);
        assert_ne!(key_a, key_b);
        let (LedgerKey::Root(ix_a), LedgerKey::Root(ix_b)) = (key_a, key_b) else { panic!("root keys") };
        assert!(registry.root(ix_a).is_some_and(|l| std::ptr::eq(l, &*a)));
        assert!(registry.root(ix_b).is_some_and(|l| std::ptr::eq(l, &*b)));
        assert!(registry.get(7).is_some_and(|l| Arc::ptr_eq(&l, &a)));
        assert!(registry.get(8).is_none());
        let mut syms: Vec<u32> = registry.iter().map(|(sym, _)| sym).collect();
        syms.sort_unstable();
        assert_eq!(syms, [3, 7]);
    }
}
