//! The batch sink (`engine::batch`): every receipt reaches the receiving end exactly once,
//! in order within a thread, batches still open included; what it drops it counts; the
//! lossless mode loses nothing with callers outrunning the drain; and the drain ends once
//! the sink is gone, with nothing left behind. No verdict depends on timing: the drain's
//! pace only changes how many receipts a burst finds.

use std::collections::BTreeMap;
use std::sync::Arc;

use holon::admission::{CodeSet, Verdict};
use holon::engine::receipt::{self, RECEIPT_BATCH};
use holon::engine::{AgentIx, BatchSink, End, MandateIx, Outcome, Receipt, ReceiptSink};
use holon::money::Amount;
use holon::time::Timestamp;

/// Receipt `seq` of thread `thread` (its id says both).
fn receipt(thread: u64, seq: u64) -> Receipt {
    let at = Timestamp::from_unix(1_800_000_000);
    Receipt {
        id: thread << 32 | seq,
        parent: 0,
        mandate: MandateIx(0),
        agent: AgentIx(0),
        decision: Verdict::Allowed,
        end: End::Settled,
        codes: CodeSet::EMPTY,
        worst_case: Amount::from_micros(seq),
        actual: Amount::from_micros(seq),
        at,
        ended_at: at,
        outcome: Outcome::Unreported,
        latency_ms: 0,
        shadow: false,
    }
}

/// Each thread's receipts in the order received must be 0, 1, 2, … with none missing.
fn check_per_thread(received: &[Receipt], threads: u64, each: u64) {
    let mut next: BTreeMap<u64, u64> = BTreeMap::new();
    for r in received {
        let (thread, seq) = (r.id >> 32, r.id & 0xffff_ffff);
        let want = next.entry(thread).or_insert(0);
        assert_eq!(seq, *want, "thread {thread}: receipt {seq} came where {want} was due");
        *want += 1;
    }
    assert_eq!(next.len() as u64, threads, "{next:?}");
    assert!(next.values().all(|&n| n == each), "{next:?}");
}

/// A drain thread that keeps every receipt, until the sink is gone: (how many, which).
fn drain_all(rx: receipt::ReceiptReceiver) -> std::thread::JoinHandle<(u64, Vec<Receipt>)> {
    std::thread::spawn(move || {
        let mut got = Vec::new();
        let seen = receipt::drain(
            &rx,
            |r| {
                got.push(*r);
                Ok::<_, std::convert::Infallible>(())
            },
            || Ok(()),
        )
        .unwrap();
        (seen, got)
    })
}

/// `each` receipts from each of `threads` threads at once (thread `t`'s numbered 0, 1, …).
fn submit_from_threads(sink: &Arc<BatchSink>, threads: u64, each: u64) {
    std::thread::scope(|s| {
        for t in 0..threads {
            let sink = Arc::clone(sink);
            s.spawn(move || (0..each).for_each(|seq| sink.submit(&receipt(t, seq))));
        }
    });
}

#[test]
fn one_thread_gets_every_receipt_in_order_open_batch_included() {
    let (sink, rx) = BatchSink::new(1 << 16);
    // Three full batches and a part of one, still open.
    let n = 3 * RECEIPT_BATCH as u64 + 5;
    for seq in 0..n {
        sink.submit(&receipt(1, seq));
    }
    assert_eq!(rx.len() as u64, n);
    let got: Vec<Receipt> = rx.try_iter().collect();
    check_per_thread(&got, 1, n);
    assert!(rx.is_empty() && rx.try_iter().next().is_none(), "taken once");
    assert_eq!(sink.dropped(), 0);
}

#[test]
fn a_full_sink_drops_and_counts_and_never_blocks() {
    // Room for two batches (the least), besides the lane's open one.
    let (sink, rx) = BatchSink::new(1);
    let n = 10 * RECEIPT_BATCH as u64;
    for seq in 0..n {
        sink.submit(&receipt(1, seq));
    }
    let got: Vec<Receipt> = rx.try_iter().collect();
    assert_eq!(got.len() as u64 + sink.dropped(), n, "every receipt received or counted as dropped");
    assert_eq!(got.len(), 3 * RECEIPT_BATCH, "the two batches handed over and the open one");
    // The first ones are kept, the later ones dropped; and taking them frees the lane.
    assert!(got.iter().enumerate().all(|(i, r)| r.id & 0xffff_ffff == i as u64));
    sink.submit(&receipt(1, n));
    assert_eq!(rx.try_iter().map(|r| r.id & 0xffff_ffff).collect::<Vec<_>>(), [n]);
}

/// Four callers outrun a drain that writes nothing: lossless, every receipt arrives once,
/// in order per thread, and the drain returns once the sink is dropped.
#[test]
fn lossless_callers_lose_nothing_and_the_drain_ends_with_the_sink() {
    const THREADS: u64 = 4;
    const EACH: u64 = 50_000;
    // Small: the callers wait for the drain often.
    let (sink, rx) = BatchSink::lossless(8 * RECEIPT_BATCH);
    let sink = Arc::new(sink);
    let drain = drain_all(rx);
    submit_from_threads(&sink, THREADS, EACH);
    assert_eq!(sink.dropped(), 0);
    drop(sink);
    let (seen, got) = drain.join().unwrap();
    assert_eq!(seen, THREADS * EACH);
    check_per_thread(&got, THREADS, EACH);
}

/// The same with the dropping sink: what arrives is in order per thread, and received plus
/// dropped is everything submitted.
#[test]
fn dropping_callers_account_for_every_receipt() {
    const THREADS: u64 = 2;
    const EACH: u64 = 100_000;
    let (sink, rx) = BatchSink::new(4 * RECEIPT_BATCH);
    let sink = Arc::new(sink);
    let drain = drain_all(rx);
    submit_from_threads(&sink, THREADS, EACH);
    let dropped = sink.dropped();
    drop(sink);
    let (_, got) = drain.join().unwrap();
    assert_eq!(got.len() as u64 + dropped, THREADS * EACH);
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    for r in &got {
        let (thread, seq) = (r.id >> 32, r.id & 0xffff_ffff);
        if let Some(&before) = last.get(&thread) {
            assert!(seq > before, "thread {thread}: {seq} after {before}");
        }
        last.insert(thread, seq);
    }
}

/// A lossless caller waiting for room stops waiting (and counts the receipt lost) once the
/// receiving end is gone, instead of waiting for ever.
#[test]
fn a_lossless_caller_stops_waiting_when_the_receiver_is_gone() {
    let (sink, rx) = BatchSink::lossless(1);
    drop(rx);
    let n = 5 * RECEIPT_BATCH as u64;
    for seq in 0..n {
        sink.submit(&receipt(1, seq));
    }
    // The two batches handed over and the open one hold the first 192; the rest are lost.
    assert_eq!(sink.dropped(), n - 3 * RECEIPT_BATCH as u64);
}

/// `try_iter` waits for a lane whose lossless caller holds its lock while it waits for an
/// empty batch; the empties it needs sit in a later lane's full batches, which `try_iter`
/// must recycle while it waits, or neither ever moves (found by review: it only recycled
/// the lane it waited for). A thread's lane is its number (given at its first receipt)
/// modulo 8, so the waiter takes its number first and the filler the next; of three rounds
/// at least two have the filler's lane after the waiter's. A hang is caught by a bound far
/// above any machine's pace; a round where the waiter was not yet waiting passes without
/// the wait, never fails for it.
#[test]
fn try_iter_frees_a_lossless_caller_waiting_for_room() {
    for round in 0..3u64 {
        // Two batches in the pool.
        let (sink, rx) = BatchSink::lossless(1);
        let sink = Arc::new(sink);
        let (first_tx, first) = std::sync::mpsc::channel();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let waiter = Arc::clone(&sink);
        let waiting = std::thread::spawn(move || {
            waiter.submit(&receipt(2, 0));
            first_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            // Fills its open batch, then waits for an empty one, holding its lane's lock.
            (1..=RECEIPT_BATCH as u64).for_each(|seq| waiter.submit(&receipt(2, seq)));
        });
        first.recv().unwrap();
        // The filler (the next thread number) takes both pooled batches into its lane.
        let filler = Arc::clone(&sink);
        std::thread::spawn(move || (0..2 * RECEIPT_BATCH as u64).for_each(|seq| filler.submit(&receipt(1, seq))))
            .join()
            .unwrap();
        go.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (tx, got) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let n = rx.try_iter().count();
            let _ = tx.send((n, rx));
        });
        let (n, rx) = got
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("round {round}: try_iter never returned: a deadlock"));
        waiting.join().unwrap();
        assert_eq!(n + rx.try_iter().count(), 3 * RECEIPT_BATCH + 1, "round {round}");
        assert_eq!(sink.dropped(), 0);
    }
}
