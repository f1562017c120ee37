//! Reloading the documents and the tokens file, and the reaper of expired reservations
//! and held calls.

use std::sync::Arc;
use std::time::Duration;

use holon::time::Timestamp;

use super::{LATE_SETTLE_S, RECLAIMED_KEPT_MAX, Service, TokensStatus};
use crate::serve::loader::{self, LoadFailure};

impl Service {
    /// Reads the tokens file again, then validates and compiles every document and
    /// publishes them atomically. The two are apart: a bad document never holds up a
    /// token's withdrawal, nor a bad tokens file a document. On a documents error the old
    /// snapshot keeps serving (with the trust files applied, when there are any) and the
    /// error is reported (`/v1/status`, the log, `holon_reload_failures_total`).
    pub(crate) fn reload(&self) -> Result<u64, LoadFailure> {
        let _one = self.reload_lock.lock();
        self.reload_tokens();
        let result = loader::load(&self.documents, &self.trust_files).and_then(|loaded| {
            let published = self.engine.publish(&loaded.input);
            let generation = published.map_err(|e| loader::whole(&self.documents, &e.to_string()))?;
            crate::serve::warn_untrusted(self.engine);
            *self.last_input.lock() = Some(loaded.input);
            self.status.lock().ignored_files = loaded.ignored;
            Ok(generation)
        });
        match &result {
            Ok(generation) => {
                let mut status = self.status.lock();
                status.reloads += 1;
                status.last_error = None;
                status.last_error_at = None;
                self.metrics.reloads.inc();
                self.node.wake();
                tracing::info!(generation, "reloaded the documents");
            }
            Err(failure) => self.reload_refused(failure),
        }
        result
    }

    /// A documents reload that failed: the old snapshot keeps serving; withdrawals still go
    /// through when trust files are configured (the last good documents with the keys and
    /// revocations read again: a bad file must not freeze a revocation).
    fn reload_refused(&self, failure: &LoadFailure) {
        if self.trust_files.paths().next().is_some() {
            let mut last = self.last_input.lock();
            if let Some(input) = last.as_ref().and_then(|l| loader::trust_only(l, &self.trust_files).ok())
                && self.engine.publish(&input).is_ok()
            {
                tracing::warn!("the keys and revocations files were applied to the documents that last loaded");
                *last = Some(input);
            }
        }
        let mut status = self.status.lock();
        status.failures += 1;
        status.last_error = Some(failure.clone());
        status.last_error_at = Some(Timestamp::now().to_string());
        self.metrics.reload_failures.inc();
        tracing::error!(file = %failure.file, pointer = %failure.pointer, message = %failure.message, "reload refused; the old snapshot keeps serving");
    }

    /// Reads the tokens file again. An empty file, or none, withdraws every token (nobody
    /// authenticates until one is added: said loudly, and counted); only a file that
    /// cannot be read or parsed keeps the old tokens, and `/v1/status` says so.
    pub(super) fn reload_tokens(&self) {
        match loader::tokens(&self.tokens_path) {
            Ok(read) => {
                let accepted = read.tokens.len();
                if accepted == 0 {
                    self.metrics.tokens_withdrawn.inc();
                    tracing::error!(
                        file = %self.tokens_path.display(),
                        deleted = read.missing,
                        "every token withdrawn: the tokens file is {}; no client can authenticate until a token is added (`holon token new`)",
                        if read.missing { "gone" } else { "empty" }
                    );
                }
                self.tokens.store(Arc::new(read.tokens));
                self.metrics.tokens.set(crate::serve::metrics::as_gauge(accepted as u64));
                self.status.lock().tokens = TokensStatus::read(accepted, read.missing);
            }
            Err(failure) => {
                let accepted = self.tokens.load().len();
                tracing::error!(file = %failure.file, message = %failure.message, "the tokens file cannot be read; the old tokens keep serving");
                self.metrics.reload_failures.inc();
                self.status.lock().tokens = TokensStatus { accepted, file: "kept_old", error: Some(failure) };
            }
        }
    }
    /// The reaper: reclaims reservations past their callee's timeout plus the grace (their
    /// worst case stays spent) and forgets them here; drops expired held calls.
    pub(crate) fn reap(&self) -> usize {
        let now = Timestamp::now();
        let reclaimed = self.engine.reclaim_expired(now);
        self.ended.prune();
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
