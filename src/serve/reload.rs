//! Reloading the documents and the tokens file, and the reaper of expired reservations
//! and held calls.

use std::sync::Arc;
use std::time::Duration;

use holon::time::Timestamp;

use super::loader::{self, LoadFailure};
use super::service::{LATE_SETTLE_S, RECLAIMED_KEPT_MAX, Service};

impl Service {
    /// Validates and compiles every document and the tokens file, then publishes them
    /// atomically; on any error the old snapshot and tokens keep serving and the error is
    /// reported (`/v1/status`, the log, `holon_reload_failures_total`).
    pub(crate) fn reload(&self) -> Result<u64, LoadFailure> {
        let _one = self.reload_lock.lock();
        let result = loader::load(&self.documents, &self.trust_files).and_then(|loaded| {
            let tokens = loader::tokens(&self.tokens_path)?;
            let published = self.engine.publish(&loaded.input);
            let generation = published.map_err(|e| loader::whole(&self.documents, &e.to_string()))?;
            super::warn_untrusted(self.engine);
            *self.last_input.lock() = Some(loaded.input);
            self.tokens.store(Arc::new(tokens));
            self.status.lock().ignored_files = loaded.ignored;
            Ok(generation)
        });
        let mut status = self.status.lock();
        match &result {
            Ok(generation) => {
                status.reloads += 1;
                status.last_error = None;
                status.last_error_at = None;
                self.metrics.reloads.inc();
                self.node.wake();
                tracing::info!(generation, "reloaded the documents");
            }
            Err(failure) => {
                // Withdrawals still go through: the last good documents with the trust
                // files read again (a bad file must not freeze a revocation).
                let mut last = self.last_input.lock();
                if let Some(input) = last.as_ref().and_then(|l| loader::trust_only(l, &self.trust_files).ok())
                    && self.engine.publish(&input).is_ok()
                {
                    tracing::warn!("the keys and revocations were applied to the documents that last loaded");
                    *last = Some(input);
                }
                status.failures += 1;
                status.last_error = Some(failure.clone());
                status.last_error_at = Some(Timestamp::now().to_string());
                self.metrics.reload_failures.inc();
                tracing::error!(file = %failure.file, pointer = %failure.pointer, message = %failure.message, "reload refused; the old snapshot keeps serving");
            }
        }
        result
    }

    /// The reaper: reclaims reservations past their callee's timeout plus the grace (their
    /// worst case stays spent) and forgets them here; drops expired held calls.
    pub(crate) fn reap(&self) -> usize {
        let now = Timestamp::now();
        let reclaimed = self.engine.reclaim_expired(now);
        self.engine.expire_pending(now);
        // A reclaimed reservation stays for its late settle, within LATE_SETTLE_S and
        // RECLAIMED_KEPT_MAX; dropped unsettled, it keeps its worst case spent.
        let (clock, window) = (std::time::Instant::now(), Duration::from_secs(LATE_SETTLE_S));
        let mut kept = 0_usize;
        self.open.retain(|_, open| {
            if open.reservation.is_active() {
                return true;
            }
            let since = *open.reclaimed_at.get_or_insert(clock);
            if clock.duration_since(since) >= window {
                return false;
            }
            kept += 1;
            kept <= RECLAIMED_KEPT_MAX
        });
        reclaimed
    }
}
