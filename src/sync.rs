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

/// A per-thread number, unique for the life of the process, a per-thread cursor and lease
/// shard. Receipt ids, reservation-slot searches and ledger leases use these so that
/// threads never write a shared counter. One `Cell` per field: each accessor touches only
/// its field (the hot path reads the shard, the cursor and the sequence every call).
struct ThreadState {
    /// 0 until the first use, which draws the number and sets the fields below.
    number: Cell<u64>,
    sequence: Cell<u64>,
    cursor: Cell<usize>,
    /// The ledgers' lease shard this thread uses (`engine/ledger.rs`).
    shard: Cell<usize>,
}

use std::cell::Cell;

static THREAD_NUMBERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl ThreadState {
    const fn new() -> Self {
        ThreadState { number: Cell::new(0), sequence: Cell::new(0), cursor: Cell::new(0), shard: Cell::new(0) }
    }

    /// The fields, drawn on first use.
    #[inline]
    fn ready(&self) -> &Self {
        if self.number.get() == 0 {
            self.start();
        }
        self
    }

    #[cold]
    fn start(&self) {
        // Relaxed: the counter only has to hand out distinct numbers (single-location
        // RMW); it orders nothing else. A plain std atomic even under loom: it is not part
        // of the protocol, and loom atomics cannot live in a `static`.
        let number = THREAD_NUMBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.number.set(number);
        // Spread the threads' starting points over the slot table (a large odd stride),
        // and give consecutive threads different lease shards. loom replays each
        // interleaving and needs the same atomics touched every time, while the thread
        // numbers keep counting across its iterations: there every thread starts at slot
        // 0 and on shard 0 (the most contended case; a model can pin another shard).
        if cfg!(not(holon_loom)) {
            self.cursor.set((number as usize).wrapping_mul(0x9E37_79B9));
            self.shard.set(number as usize);
        }
    }
}

#[cfg(not(holon_loom))]
std::thread_local! {
    static THREAD: ThreadState = const { ThreadState::new() };
}
#[cfg(holon_loom)]
loom::thread_local! {
    static THREAD: ThreadState = ThreadState::new();
}

#[inline]
fn with_thread<R>(f: impl FnOnce(&ThreadState) -> R) -> R {
    THREAD.with(|t| f(t.ready()))
}

/// Bits of a receipt id that count within one thread (the rest number the thread).
pub(crate) const SEQUENCE_BITS: u32 = 40;

/// A process-unique id: the thread's number above [`SEQUENCE_BITS`], its own count below.
#[inline]
pub(crate) fn next_id() -> u64 {
    with_thread(|t| {
        let sequence = t.sequence.get().wrapping_add(1) & ((1 << SEQUENCE_BITS) - 1);
        t.sequence.set(sequence);
        (t.number.get() << SEQUENCE_BITS) | sequence
    })
}

/// This thread's process-unique number (from 1).
#[inline]
pub(crate) fn thread_number() -> u64 {
    with_thread(|t| t.number.get())
}

/// Where this thread should start looking for a free reservation slot.
#[inline]
pub(crate) fn cursor() -> usize {
    with_thread(|t| t.cursor.get())
}

/// Remembers where this thread's next search starts.
#[inline]
pub(crate) fn set_cursor(next: usize) {
    with_thread(|t| t.cursor.set(next))
}

/// This thread's lease shard (reduced modulo the ledger's shard count by the ledger).
#[inline]
pub(crate) fn lease_shard() -> usize {
    with_thread(|t| t.shard.get())
}

/// Pins this thread to a lease shard (loom models play threads on chosen shards).
#[cfg(holon_loom)]
pub fn pin_lease_shard(shard: usize) {
    with_thread(|t| t.shard.set(shard))
}
