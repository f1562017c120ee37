//! Interned names: every mandate id, agent id, namespace and class gets a dense `u32`
//! that stays the same across snapshots, so a gateway may resolve ids once and keep the
//! numbers, and receipts carry numbers instead of strings.
//!
//! Append-only and bounded: written only while a snapshot is compiled (slow path, behind a
//! lock); read by the receipt writer to print names.

use std::collections::HashMap;

use parking_lot::RwLock;

use super::EngineError;
use crate::sync::Arc;

/// Most names one table holds.
pub(super) const SYMBOLS_MAX: usize = 4_000_000;

#[derive(Debug, Default)]
pub struct Symbols {
    kind: &'static str,
    map: RwLock<HashMap<Arc<str>, u32>>,
    names: RwLock<Vec<Arc<str>>>,
}

impl Symbols {
    pub(crate) fn new(kind: &'static str) -> Self {
        Symbols { kind, ..Symbols::default() }
    }

    /// The number of `name`, giving it the next one if it has none yet.
    pub(crate) fn intern(&self, name: &str) -> Result<u32, EngineError> {
        if let Some(&sym) = self.map.read().get(name) {
            return Ok(sym);
        }
        let mut map = self.map.write();
        if let Some(&sym) = map.get(name) {
            return Ok(sym);
        }
        let mut names = self.names.write();
        if names.len() >= SYMBOLS_MAX {
            return Err(EngineError::TooManyNames { kind: self.kind, max: SYMBOLS_MAX });
        }
        let sym =
            u32::try_from(names.len()).map_err(|_| EngineError::TooManyNames { kind: self.kind, max: SYMBOLS_MAX })?;
        let name: Arc<str> = Arc::from(name);
        names.push(Arc::clone(&name));
        map.insert(name, sym);
        Ok(sym)
    }

    /// The number of `name`, if it has one.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.map.read().get(name).copied()
    }

    /// The name of `sym`.
    pub fn name(&self, sym: u32) -> Option<Arc<str>> {
        self.names.read().get(sym as usize).cloned()
    }

    pub fn len(&self) -> usize {
        self.names.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The three tables of one engine.
#[derive(Debug)]
pub struct Names {
    pub mandates: Symbols,
    pub agents: Symbols,
    /// Namespaces and capability classes (compared only within their kind).
    pub words: Symbols,
}

impl Default for Names {
    fn default() -> Self {
        Names { mandates: Symbols::new("mandate"), agents: Symbols::new("agent"), words: Symbols::new("name") }
    }
}
