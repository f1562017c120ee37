//! A memory store whose flush commits but answers "unavailable" (the answer to a commit
//! lost on the way back), as many times as `lose` says: the node store tests and the node
//! model lose flush answers with it.

use holon::store::memory::MemoryStore;
use holon::store::{
    FlushEntry, FlushOutcome, GrantRequest, HeldCall, Lease, LedgerStore, MandateStatus, Reconciled, StoreError,
    StoreLimits,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) struct LostAnswers {
    pub(crate) inner: Arc<MemoryStore>,
    pub(crate) lose: Arc<AtomicU32>,
}

impl LedgerStore for LostAnswers {
    fn publish_limits(&self, mandate: &str, limits: StoreLimits, raise: bool) -> Result<StoreLimits, StoreError> {
        self.inner.publish_limits(mandate, limits, raise)
    }
    fn grant(&self, request: &GrantRequest) -> Result<Option<Lease>, StoreError> {
        self.inner.grant(request)
    }
    fn flush(&self, node: &str, entries: &[FlushEntry], now_unix: i64) -> Result<Vec<FlushOutcome>, StoreError> {
        let outcomes = self.inner.flush(node, entries, now_unix)?;
        let lose = self.lose.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if lose { Err(StoreError::Unavailable("the answer was lost".into())) } else { Ok(outcomes) }
    }
    fn reconcile(&self, node: &str, now_unix: i64, expired_only: bool) -> Result<Reconciled, StoreError> {
        self.inner.reconcile(node, now_unix, expired_only)
    }
    fn status(&self, mandate: Option<&str>) -> Result<Vec<MandateStatus>, StoreError> {
        self.inner.status(mandate)
    }
    fn hold(&self, call: &HeldCall) -> Result<(), StoreError> {
        self.inner.hold(call)
    }
    fn take_held(&self, id: &str, now_unix: i64) -> Result<Option<HeldCall>, StoreError> {
        self.inner.take_held(id, now_unix)
    }
    fn held_calls(&self, mandate: Option<&str>, now_unix: i64) -> Result<Vec<HeldCall>, StoreError> {
        self.inner.held_calls(mandate, now_unix)
    }
    fn release_held(&self, id: &str) -> Result<(), StoreError> {
        self.inner.release_held(id)
    }
}
