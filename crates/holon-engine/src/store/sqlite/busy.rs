//! Waiting for another process's write lock on the SQLite file. SQLite's own busy handler
//! waits [`BUSY_TIMEOUT_MS`] per try; when another process holds the lock longer than that
//! (a slow disk under another node's `fsync`, several nodes taking turns), the whole step
//! is tried again after a pause that doubles from [`BUSY_BACKOFF_MS_MIN`] to
//! [`BUSY_BACKOFF_MS_MAX`], for at most [`BUSY_WAIT_MS_MAX`] in all. Only then does the
//! step fail `Unavailable`, saying how long it waited; nothing is written either way (a
//! try that met a busy lock rolled back).

use std::time::{Duration, Instant};

use super::StoreError;

/// SQLite's busy wait for the write lock within one try, in milliseconds.
pub const BUSY_TIMEOUT_MS: u64 = 1_000;
/// The longest a step waits for the write lock in all, its tries together, in milliseconds.
pub const BUSY_WAIT_MS_MAX: u64 = 60_000;
/// The first pause between two tries, in milliseconds; it doubles after each busy try.
pub const BUSY_BACKOFF_MS_MIN: u64 = 5;
/// The longest pause between two tries, in milliseconds.
pub const BUSY_BACKOFF_MS_MAX: u64 = 500;

/// Whether SQLite refused for want of the lock (the file's, or a table's in shared cache).
pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// How long one step has waited for the lock, and whether it may wait more.
pub(super) struct Patience {
    started: Instant,
    max: Duration,
    backoff_ms: u64,
    tries: u32,
}

impl Patience {
    /// A step's patience: at most `max_ms` for its tries together.
    pub(super) fn new(max_ms: u64) -> Self {
        Patience {
            started: Instant::now(),
            max: Duration::from_millis(max_ms),
            backoff_ms: BUSY_BACKOFF_MS_MIN,
            tries: 0,
        }
    }

    /// After a try that found the lock busy (`e`): pauses and returns `Ok` to try again, or,
    /// past the bound, the error that says how long the step waited.
    pub(super) fn busy(&mut self, e: &rusqlite::Error) -> Result<(), StoreError> {
        self.tries = self.tries.saturating_add(1);
        let waited = self.started.elapsed();
        let pause = Duration::from_millis(self.backoff_ms);
        if waited.saturating_add(pause) > self.max {
            return Err(StoreError::Unavailable(format!(
                "another process held the store file's write lock for {} ms ({} tries: SQLite waits {BUSY_TIMEOUT_MS} ms a try, and holon tries again for up to {} ms in all); nothing was written: {e}",
                waited.as_millis(),
                self.tries,
                self.max.as_millis()
            )));
        }
        std::thread::sleep(pause);
        self.backoff_ms = self.backoff_ms.saturating_mul(2).min(BUSY_BACKOFF_MS_MAX);
        Ok(())
    }
}
