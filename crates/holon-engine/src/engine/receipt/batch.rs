//! Receipts handed over in batches ([`BatchSink`]): each thread writes its receipts into the
//! open batch of its lane (its thread number modulo [`SINK_SHARDS`]: in practice a lane of
//! its own), an array of [`RECEIPT_BATCH`] receipts, and hands a full batch over whole.
//!
//! Why: with one channel slot per receipt the drain thread paid a cache miss and a
//! compare-and-swap for every receipt and fell behind two callers on two cores (12–19% of
//! the receipts dropped in the two-thread load test). Here the drain reads whole batches,
//! contiguous memory, and the caller's path has no shared write per receipt: its lane's
//! lock is taken by the drain only once per burst, to collect a batch still open.
//!
//! The rules are those of the other sinks: `submit` never allocates (every batch is
//! allocated up front and recycled) and never blocks (a lane with no empty batch left drops
//! the receipt and counts it), but in the lossless mode, where `submit` waits for an empty
//! batch, as [`LosslessSink`](super::LosslessSink) waits for room. Within a lane
//! the drain sees receipts in the order they were submitted, batches handed over before a
//! batch still open.

use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use super::{Receipt, ReceiptReceiver, ReceiptSink, SINK_SHARDS};
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};

/// Receipts in one batch (4,608 bytes): what a caller gathers before it hands them over.
pub const RECEIPT_BATCH: usize = 64;

/// How long a lossless `submit` waits for an empty batch before it looks again whether the
/// receiving end is still there.
const LOSSLESS_WAIT_MS: u64 = 10;

/// A sink that hands receipts over a batch at a time (see the module's text).
#[derive(Debug)]
pub struct BatchSink {
    lanes: Arc<Lanes>,
    lossless: bool,
    dropped: AtomicU64,
}

/// The lanes, shared by the sink and its receiving end.
#[derive(Debug)]
pub(super) struct Lanes {
    lanes: Box<[CachePadded<Lane>]>,
    /// Empty batches, back from the drain: one pool for every lane, so that one busy
    /// thread can use the sink's whole room.
    empty_tx: Sender<Vec<Receipt>>,
    empty_rx: Receiver<Vec<Receipt>>,
    /// Cleared when the sink is dropped: nothing more will be submitted.
    sink_alive: AtomicBool,
    /// Cleared when the receiving end is dropped: a lossless `submit` then stops waiting.
    receiver_alive: AtomicBool,
}

#[derive(Debug)]
struct Lane {
    /// The batch being filled (never more than `RECEIPT_BATCH`, so it never reallocates).
    open: Mutex<Vec<Receipt>>,
    /// Full batches, for the drain; room for every batch of the sink, so a send never fails.
    full_tx: Sender<Vec<Receipt>>,
    full_rx: Receiver<Vec<Receipt>>,
}

impl BatchSink {
    /// A sink holding up to about `capacity` receipts (in batches of [`RECEIPT_BATCH`],
    /// at least two, besides one open batch per lane) before it counts drops, and its
    /// receiving end.
    pub fn new(capacity: usize) -> (BatchSink, ReceiptReceiver) {
        Self::build(capacity, false)
    }

    /// The same, but `submit` waits for room instead of dropping (audits, records).
    pub fn lossless(capacity: usize) -> (BatchSink, ReceiptReceiver) {
        Self::build(capacity, true)
    }

    fn build(capacity: usize, lossless: bool) -> (BatchSink, ReceiptReceiver) {
        let batches = capacity.div_ceil(RECEIPT_BATCH).max(2);
        let (empty_tx, empty_rx) = bounded(batches);
        for _ in 0..batches {
            let _ = empty_tx.try_send(Vec::with_capacity(RECEIPT_BATCH));
        }
        let lanes = Arc::new(Lanes {
            lanes: (0..SINK_SHARDS).map(|_| CachePadded::new(Lane::new(batches))).collect(),
            empty_tx,
            empty_rx,
            sink_alive: AtomicBool::new(true),
            receiver_alive: AtomicBool::new(true),
        });
        let sink = BatchSink { lanes: Arc::clone(&lanes), lossless, dropped: AtomicU64::new(0) };
        (sink, ReceiptReceiver::batched(lanes))
    }

    /// Hands the lane's open batch over and opens an empty one; false when none is free
    /// (the lossless mode waits for one, unless the receiving end is gone).
    fn hand_over(&self, lane: &Lane, open: &mut Vec<Receipt>) -> bool {
        let empty = if self.lossless {
            loop {
                if let Ok(empty) = self.lanes.empty_rx.try_recv() {
                    break Some(empty);
                }
                // Acquire: pairs with the receiving end's Release as it is dropped. Looked at
                // before waiting, so that once it is gone a submit counts its loss at once.
                if !self.lanes.receiver_alive.load(Ordering::Acquire) {
                    break None;
                }
                if let Ok(empty) = self.lanes.empty_rx.recv_timeout(Duration::from_millis(LOSSLESS_WAIT_MS)) {
                    break Some(empty);
                }
            }
        } else {
            self.lanes.empty_rx.try_recv().ok()
        };
        let Some(empty) = empty else { return false };
        debug_assert!(empty.is_empty() && empty.capacity() >= RECEIPT_BATCH);
        let full = std::mem::replace(open, empty);
        // The channel has room for every batch of the lane: this send cannot fail.
        let sent = lane.full_tx.try_send(full).is_ok();
        debug_assert!(sent, "a lane's full batches exceed its batches");
        true
    }
}

impl Lane {
    fn new(batches: usize) -> Lane {
        let (full_tx, full_rx) = bounded(batches);
        Lane { open: Mutex::new(Vec::with_capacity(RECEIPT_BATCH)), full_tx, full_rx }
    }
}

impl ReceiptSink for BatchSink {
    #[inline]
    fn submit(&self, receipt: &Receipt) {
        // Any bits of the thread number pick a lane (as `ChannelSink` picks a shard).
        #[allow(clippy::cast_possible_truncation)]
        let lane = crate::sync::thread_number() as usize % self.lanes.lanes.len().max(1);
        let Some(lane) = self.lanes.lanes.get(lane) else { return };
        let mut open = lane.open.lock();
        // Full still: an earlier hand-over found no empty batch.
        if open.len() >= RECEIPT_BATCH && !self.hand_over(lane, &mut open) {
            // Relaxed: a statistic, read on its own.
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        open.push(*receipt);
        if open.len() == RECEIPT_BATCH {
            // No empty batch: this one stays open and full, and the next receipt retries.
            let _ = self.hand_over(lane, &mut open);
        }
    }

    fn dropped(&self) -> u64 {
        // Relaxed: a statistic.
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for BatchSink {
    fn drop(&mut self) {
        // Release: every receipt submitted before is in the lanes for whoever sees this.
        self.lanes.sink_alive.store(false, Ordering::Release);
    }
}

impl Lanes {
    /// Whether the sink is gone (nothing more will come).
    pub(super) fn sink_gone(&self) -> bool {
        // Acquire: pairs with the sink's Release as it is dropped.
        !self.sink_alive.load(Ordering::Acquire)
    }

    /// The receiving end is gone: a lossless sink stops waiting.
    pub(super) fn receiver_dropped(&self) {
        self.receiver_alive.store(false, Ordering::Release);
    }

    /// Receipts waiting now, about: a lane whose lock is held (a `submit` in progress, or a
    /// lossless one waiting with its full batch) counts none for its open batch, and a
    /// hand-over between the two reads can be missed.
    pub(super) fn len(&self) -> usize {
        let lanes = self.lanes.iter();
        lanes.map(|l| l.full_rx.len() * RECEIPT_BATCH + l.open.try_lock().map_or(0, |o| o.len())).sum()
    }

    /// Calls `f` on every receipt waiting now, lane by lane, in each lane's order; returns
    /// how many, and whether every lane's open batch could be looked at (one whose caller
    /// is inside `submit` is looked at next time). `wait`: wait for such a lane's lock
    /// (returning empty batches meanwhile, so that a lossless caller can go on).
    pub(super) fn take<E>(&self, wait: bool, f: &mut impl FnMut(&Receipt) -> Result<(), E>) -> Result<(u64, bool), E> {
        let (mut seen, mut whole) = (0u64, true);
        let mut handed = Vec::new();
        let mut still_open = Vec::with_capacity(RECEIPT_BATCH);
        for lane in self.lanes.iter() {
            seen += self.pass_full(lane, f)?;
            let open = loop {
                if let Some(open) = lane.open.try_lock_for(Duration::from_millis(1)) {
                    break Some(open);
                }
                if !wait {
                    break None;
                }
                // The lane's caller may be a lossless one waiting for an empty batch, and
                // the empties may sit in any lane's full batches: recycle them all.
                for any in self.lanes.iter() {
                    seen += self.pass_full(any, f)?;
                }
            };
            let Some(mut open) = open else {
                whole = false;
                continue;
            };
            // Batches handed over since `pass_full` came before what is still open.
            handed.extend(lane.full_rx.try_iter());
            still_open.append(&mut open);
            drop(open);
            // Every batch goes back to the pool even after an error (the pool never
            // shrinks); the receipts after the error are lost to later passes.
            let mut done = Ok(());
            for batch in handed.drain(..) {
                match done {
                    Ok(()) => done = self.pass(batch, f).map(|n| seen += n),
                    Err(_) => self.recycle(batch),
                }
            }
            done?;
            seen += still_open.len() as u64;
            still_open.drain(..).try_for_each(|r| f(&r))?;
        }
        Ok((seen, whole))
    }

    /// Every full batch waiting in `lane`, through `f`, each batch then back to the pool.
    fn pass_full<E>(&self, lane: &Lane, f: &mut impl FnMut(&Receipt) -> Result<(), E>) -> Result<u64, E> {
        let mut seen = 0u64;
        while let Ok(batch) = lane.full_rx.try_recv() {
            seen += self.pass(batch, f)?;
        }
        Ok(seen)
    }

    /// One batch through `f`, then back to the pool whatever `f` said; how many it held.
    fn pass<E>(&self, batch: Vec<Receipt>, f: &mut impl FnMut(&Receipt) -> Result<(), E>) -> Result<u64, E> {
        let (held, done) = (batch.len() as u64, batch.iter().try_for_each(&mut *f));
        self.recycle(batch);
        done.map(|()| held)
    }

    /// A batch emptied and back in the pool (which has room for every batch of the sink).
    fn recycle(&self, mut batch: Vec<Receipt>) {
        batch.clear();
        let _ = self.empty_tx.try_send(batch);
    }
}
