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
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[cfg(holon_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

/// A per-thread number, a per-thread cursor and lease shard, and the thread's current block
/// of ids. Reservation-slot searches, ledger leases and receipt shards use the number only
/// to spread threads (two threads sharing one is harmless); ids come from blocks of a
/// process-wide counter, so they are unique whatever the number of threads, and threads
/// still write no shared counter on the hot path (one RMW per [`ID_BLOCK`] ids). One `Cell`
/// per field: each accessor touches only its field.
struct ThreadState {
    /// 0 until the first use, which draws the number and sets the fields below.
    number: Cell<u64>,
    /// The next id of this thread's block, and the end of the block (exclusive).
    next_id: Cell<u64>,
    id_end: Cell<u64>,
    cursor: Cell<usize>,
    /// The ledgers' lease shard this thread uses (`engine/ledger.rs`).
    shard: Cell<usize>,
}

use std::cell::Cell;

static THREAD_NUMBERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl ThreadState {
    const fn new() -> Self {
        ThreadState {
            number: Cell::new(0),
            next_id: Cell::new(0),
            id_end: Cell::new(0),
            cursor: Cell::new(0),
            shard: Cell::new(0),
        }
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
        // Relaxed: the counter only spreads threads (single-location RMW); it orders
        // nothing else, and after 2^64 threads it wraps harmlessly (numbers are not ids). A plain std atomic even under loom: it is not part
        // of the protocol, and loom atomics cannot live in a `static`.
        let number = THREAD_NUMBERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.number.set(number);
        // Spread the threads' starting points over the slot table (a large odd stride),
        // and give consecutive threads different lease shards. loom replays each
        // interleaving and needs the same atomics touched every time, while the thread
        // numbers keep counting across its iterations: there every thread starts at slot
        // 0 and on shard 0 (the most contended case; a model can pin another shard).
        if cfg!(not(holon_loom)) {
            // Only a starting point and a shard choice: on a 32-bit target a thread number
            // past 2^32 wraps to another start, which is as good.
            #[allow(clippy::cast_possible_truncation)]
            let spread = number as usize;
            self.cursor.set(spread.wrapping_mul(0x9E37_79B9));
            self.shard.set(spread);
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

/// Ids a thread takes from the process-wide counter at once.
pub(crate) const ID_BLOCK: u64 = 1 << 16;
/// The largest id ever handed out: ids stay below 2^63 (at 10^9 ids a second, 292 years),
/// so the counter can never wrap and an id never collides; past it, [`next_id`] says
/// `None` and the engine denies (`internal_error`).
pub(crate) const ID_MAX: u64 = (1 << 63) - 1;
const _: () = assert!(ID_MAX % ID_BLOCK == ID_BLOCK - 1, "blocks tile the id space up to ID_MAX");

/// The start of the next free block of ids; ids start at 1 (0 means "none": no parent).
static NEXT_ID_BLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Takes the block `[start, start + ID_BLOCK)` from `counter`, or `None` when it would pass
/// [`ID_MAX`] (the counter then stays where it is: exhaustion is permanent, never a wrap).
fn take_id_block(counter: &std::sync::atomic::AtomicU64) -> Option<u64> {
    // Relaxed: the counter only has to hand out disjoint blocks (a single-location RMW);
    // it orders nothing else. A plain std atomic even under loom, like THREAD_NUMBERS.
    counter
        .fetch_update(std::sync::atomic::Ordering::Relaxed, std::sync::atomic::Ordering::Relaxed, |start| {
            start.checked_add(ID_BLOCK).filter(|end| *end - 1 <= ID_MAX)
        })
        .ok()
}

/// A process-unique id (receipts, pending approvals), from the thread's block; `None` once
/// the id space is exhausted (the caller denies: never a wrapped, colliding id).
#[inline]
pub(crate) fn next_id() -> Option<u64> {
    with_thread(|t| {
        let id = t.next_id.get();
        if id != 0 && id < t.id_end.get() {
            debug_assert!(id <= ID_MAX);
            t.next_id.set(id + 1);
            return Some(id);
        }
        next_id_block(t)
    })
}

#[cold]
fn next_id_block(t: &ThreadState) -> Option<u64> {
    let start = take_id_block(&NEXT_ID_BLOCK)?;
    debug_assert!(start >= 1 && start + ID_BLOCK - 1 <= ID_MAX);
    t.next_id.set(start + 1);
    t.id_end.set(start + ID_BLOCK);
    Some(start)
}

/// This thread's number (from 1), to spread threads over shards: not unique after 2^64.
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

#[cfg(all(test, not(holon_loom)))]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_threads_and_blocks() {
        let ids: Vec<u64> = (0..4)
            .map(|_| std::thread::spawn(|| (0..ID_BLOCK + 10).map(|_| next_id().unwrap()).collect::<Vec<_>>()))
            .flat_map(|h| h.join().unwrap())
            .collect();
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "no id twice");
        assert!(ids.iter().all(|id| (1..=ID_MAX).contains(id)));
    }

    #[test]
    fn the_id_space_ends_in_a_refusal_never_a_wrap() {
        let counter = std::sync::atomic::AtomicU64::new(ID_MAX - 2 * ID_BLOCK + 1);
        assert_eq!(take_id_block(&counter), Some(ID_MAX - 2 * ID_BLOCK + 1));
        assert_eq!(take_id_block(&counter), Some(ID_MAX - ID_BLOCK + 1), "the last block ends at ID_MAX");
        assert_eq!(take_id_block(&counter), None);
        assert_eq!(take_id_block(&counter), None, "exhausted for good");
        // Relaxed: one thread reads back its own writes.
        assert_eq!(counter.load(std::sync::atomic::Ordering::Relaxed), ID_MAX + 1);
    }
}
