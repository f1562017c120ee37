//! What a store-backed engine offers the node that supplies it (docs/store.md, "The node
//! side"): whether it is store-backed, and the claim that makes a node its only one.

use super::Engine;

impl Engine {
    /// Whether root ledgers admit only what a ledger store granted
    /// ([`EngineConfig::store_backed`]).
    pub fn is_store_backed(&self) -> bool {
        self.config.store_backed
    }

    /// Claims this engine for a node: `false` if one already supplies it.
    pub(crate) fn attach_node(&self) -> bool {
        !std::mem::replace(&mut *self.node_attached.lock(), true)
    }

    /// Releases the claim of [`Engine::attach_node`].
    pub(crate) fn detach_node(&self) {
        *self.node_attached.lock() = false;
    }
}
