//! The one module that imports atomics, thread-locals and the snapshot cell.
//!
//! Under a normal build these are `std`'s atomics and an [`arc_swap::ArcSwap`]. Under the
//! loom build (`RUSTFLAGS="--cfg holon_loom"`, see `loom-tests/`) they are loom's, so the
//! model checker sees every atomic step of the *real* ledger, reservation table and
//! snapshot publish. loom cannot see inside arc-swap, so there the cell is a loom mutex
//! around an `Arc`: the same interface, with every access visible to the model.
//!
//! `Arc` itself stays `std`'s in both builds: its reference counts are not part of the
//! protocol we prove, and `ArcSwap` needs `std::sync::Arc`.

#[cfg(not(holon_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(holon_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};

pub(crate) use std::sync::Arc;

/// Holds the live value; readers take a cheap guard, a writer publishes a whole new value.
pub(crate) struct SnapshotCell<T> {
    #[cfg(not(holon_loom))]
    inner: arc_swap::ArcSwap<T>,
    #[cfg(holon_loom)]
    inner: loom::sync::Mutex<Arc<T>>,
}

/// What [`SnapshotCell::load`] returns: derefs to the `Arc<T>` that was live at load time.
#[cfg(not(holon_loom))]
pub(crate) type SnapshotGuard<T> = arc_swap::Guard<Arc<T>>;
#[cfg(holon_loom)]
pub(crate) type SnapshotGuard<T> = Arc<T>;

impl<T> SnapshotCell<T> {
    pub(crate) fn new(value: Arc<T>) -> Self {
        #[cfg(not(holon_loom))]
        let inner = arc_swap::ArcSwap::new(value);
        #[cfg(holon_loom)]
        let inner = loom::sync::Mutex::new(value);
        SnapshotCell { inner }
    }

    /// The live value. Under std this is arc-swap's wait-free fast path: no reference
    /// count is touched unless the thread holds many guards at once.
    #[inline]
    pub(crate) fn load(&self) -> SnapshotGuard<T> {
        #[cfg(not(holon_loom))]
        return self.inner.load();
        #[cfg(holon_loom)]
        return match self.inner.lock() {
            Ok(g) => Arc::clone(&g),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        };
    }

    /// Publishes `value` in one atomic step; readers that loaded the old value keep it.
    pub(crate) fn store(&self, value: Arc<T>) {
        #[cfg(not(holon_loom))]
        self.inner.store(value);
        #[cfg(holon_loom)]
        match self.inner.lock() {
            Ok(mut g) => *g = value,
            Err(poisoned) => *poisoned.into_inner() = value,
        }
    }
}

/// A per-thread number, unique for the life of the process, and a per-thread cursor.
/// Receipt ids and reservation-slot searches use these so that threads on different
/// mandates never write a shared counter.
#[derive(Clone, Copy)]
struct ThreadState {
    number: u64,
    sequence: u64,
    cursor: usize,
    /// The ledgers' lease shard this thread uses (`engine/ledger.rs`).
    shard: usize,
}

static THREAD_NUMBERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn fresh_thread_state() -> ThreadState {
    // Relaxed: the counter only has to hand out distinct numbers (single-location RMW);
    // it orders nothing else. A plain std atomic even under loom: it is not part of the
    // protocol, and loom atomics cannot live in a `static`.
    let number = THREAD_NUMBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Spread the threads' starting points over the slot table (a large odd stride).
    #[cfg(not(holon_loom))]
    let cursor = (number as usize).wrapping_mul(0x9E37_79B9);
    // loom replays each interleaving and needs the same atomics touched every time; the
    // thread numbers keep counting across its iterations, so start every thread at 0.
    #[cfg(holon_loom)]
    let cursor = 0;
    // Consecutive threads get different shards. Under loom every thread starts on shard 0
    // (deterministic, and the most contended case); a model can pin another.
    #[cfg(not(holon_loom))]
    let shard = number as usize;
    #[cfg(holon_loom)]
    let shard = 0;
    ThreadState { number, sequence: 0, cursor, shard }
}

#[cfg(not(holon_loom))]
std::thread_local! {
    static THREAD: std::cell::Cell<Option<ThreadState>> = const { std::cell::Cell::new(None) };
}
#[cfg(holon_loom)]
loom::thread_local! {
    static THREAD: std::cell::Cell<Option<ThreadState>> = std::cell::Cell::new(None);
}

fn with_thread<R>(f: impl FnOnce(&mut ThreadState) -> R) -> R {
    THREAD.with(|cell| {
        let mut state = cell.get().unwrap_or_else(fresh_thread_state);
        let out = f(&mut state);
        cell.set(Some(state));
        out
    })
}

/// Bits of a receipt id that count within one thread (the rest number the thread).
pub(crate) const SEQUENCE_BITS: u32 = 40;

/// A process-unique id: the thread's number above [`SEQUENCE_BITS`], its own count below.
pub(crate) fn next_id() -> u64 {
    with_thread(|t| {
        t.sequence = t.sequence.wrapping_add(1) & ((1 << SEQUENCE_BITS) - 1);
        (t.number << SEQUENCE_BITS) | t.sequence
    })
}

/// This thread's process-unique number (from 1).
#[inline]
pub(crate) fn thread_number() -> u64 {
    with_thread(|t| t.number)
}

/// Where this thread should start looking for a free reservation slot.
pub(crate) fn cursor() -> usize {
    with_thread(|t| t.cursor)
}

/// Remembers where this thread's next search starts.
pub(crate) fn set_cursor(next: usize) {
    with_thread(|t| t.cursor = next)
}

/// This thread's lease shard (reduced modulo the ledger's shard count by the ledger).
#[inline]
pub(crate) fn lease_shard() -> usize {
    with_thread(|t| t.shard)
}

/// Pins this thread to a lease shard (loom models play threads on chosen shards).
#[cfg(holon_loom)]
pub fn pin_lease_shard(shard: usize) {
    with_thread(|t| t.shard = shard)
}
