//! Receipts: one per call. A denied or held call gets its receipt when decided; an allowed
//! call gets one when its reservation ends (settled, released or expired), so the receipt
//! carries both the worst case and the actual cost. Receipts are `Copy` and carry interned
//! ids, so handing one to the sink never allocates.
//!
//! The default sink is a bounded crossbeam channel drained by a writer thread that prints
//! JSON lines. A full channel never blocks admission: the receipt is counted in
//! [`ReceiptSink::dropped`], which the engine reports.

use std::io::Write;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};
use serde_json::json;

mod batch;
use batch::Lanes;
pub use batch::{BatchSink, RECEIPT_BATCH};

use super::snapshot::{AgentIx, MandateIx, Snapshot};
use super::symbols::Names;
use crate::admission::{CodeSet, Verdict};
use crate::mandate::Mandate;
use crate::money::Amount;
use crate::sync::{Arc, AtomicU64, Ordering};
use crate::time::Timestamp;

/// How a call's story ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Denied or held: the decision is the end of this receipt.
    Decided,
    /// The holder settled: `actual` was kept.
    Settled,
    /// The holder gave the reservation back (or dropped it).
    Released,
    /// The engine reclaimed the reservation after its deadline; its worst case stays spent
    /// (`actual` is the worst case) until the holder reconciles it.
    Expired,
    /// The holder settled or released a reservation the engine had reclaimed: `actual` is
    /// what the reclaimed worst case was lowered to (a second receipt with the same id).
    Reconciled,
}

impl End {
    pub fn as_str(self) -> &'static str {
        match self {
            End::Decided => "decided",
            End::Settled => "settled",
            End::Released => "released",
            End::Expired => "expired",
            End::Reconciled => "reconciled",
        }
    }
}

/// How a call that ran went, as its settler reports it (what agent records are built
/// from: `holon records build`, docs/records.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Not said (a plain `settle`, a release, a decision): not a run for records.
    #[default]
    Unreported,
    Success,
    /// Failed, and the failure is the agent's.
    Error,
    /// One of the manifest's declared errors: counted apart, and left out of the success
    /// rate (the manifest document, section 9).
    DeclaredFailure,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Unreported => "unreported",
            Outcome::Success => "success",
            Outcome::Error => "error",
            Outcome::DeclaredFailure => "declared_failure",
        }
    }
}

/// What a settler reports about a call that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunReport {
    pub outcome: Outcome,
    /// How long the call took, in milliseconds (0 when not said).
    pub latency_ms: u32,
}

/// One call's receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    pub id: u64,
    /// The orchestrator's receipt id for a sub-call of a delegated run; 0 otherwise.
    pub parent: u64,
    pub mandate: MandateIx,
    pub agent: AgentIx,
    pub decision: Verdict,
    pub end: End,
    /// Every reason (denied), or `approval_required` (held); empty when allowed.
    pub codes: CodeSet,
    pub worst_case: Amount,
    /// What was kept (0 unless settled).
    pub actual: Amount,
    pub at: Timestamp,
    pub ended_at: Timestamp,
    /// What the settler reported ([`Outcome::Unreported`] unless a settle said). The two
    /// fields sit in the struct's padding: a receipt stays 72 bytes.
    pub outcome: Outcome,
    pub latency_ms: u32,
    /// Decided in shadow mode ([`EngineConfig::shadow`](super::EngineConfig)): a denied or
    /// held receipt says what the engine would have done, and the call was allowed on a
    /// shadow reservation, whose own receipts say so too (its money is in the mandate's
    /// shadow tally, never in its ledger). In the padding too.
    pub shadow: bool,
}

const _: () = assert!(std::mem::size_of::<Receipt>() == 72, "a receipt stays 72 bytes");

/// Where receipts go. Called on the hot path: must not block or allocate.
pub trait ReceiptSink: Send + Sync {
    fn submit(&self, receipt: &Receipt);
    /// Receipts lost because the sink was full.
    fn dropped(&self) -> u64 {
        0
    }
}

/// Discards receipts (benchmarks of the bare decision, tests).
#[derive(Debug, Default)]
pub struct NullSink;
impl ReceiptSink for NullSink {
    fn submit(&self, _: &Receipt) {}
}

/// Bounded channels, one per shard of threads: `try_send`, never block; a full shard
/// counts a drop. Sharded because one channel shared by every thread made its tail a
/// contended cache line: two threads on distinct mandates were slower together than one.
#[derive(Debug)]
pub struct ChannelSink {
    shards: Box<[Sender<Receipt>]>,
    dropped: AtomicU64,
}

/// Most receipts the default channel holds (over all shards) before it counts drops.
pub const RECEIPT_QUEUE_MAX: usize = 65_536;
/// Channels per sink; a thread always uses the same one (its number modulo this).
pub const SINK_SHARDS: usize = 8;

/// The receiving end of a [`ChannelSink`] (every shard), of a [`LosslessSink`], or of a
/// [`BatchSink`] (every lane).
#[derive(Debug)]
pub struct ReceiptReceiver {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Shards(Box<[Receiver<Receipt>]>),
    Lanes(Arc<Lanes>),
}

impl ReceiptReceiver {
    fn batched(lanes: Arc<Lanes>) -> ReceiptReceiver {
        ReceiptReceiver { inner: Inner::Lanes(lanes) }
    }

    /// Every receipt queued now, shard by shard or lane by lane (in order within one
    /// thread), taken at once: the iterator owns them, and one not looked at is gone. For
    /// a batch sink this waits for each lane's lock (a `submit` in progress), recycling
    /// every lane's full batches meanwhile, so that a lossless caller waiting for room can
    /// finish.
    pub fn try_iter(&self) -> impl Iterator<Item = Receipt> + '_ {
        let mut all = Vec::new();
        match &self.inner {
            Inner::Shards(shards) => all.extend(shards.iter().flat_map(|rx| rx.try_iter())),
            Inner::Lanes(lanes) => {
                let _ = lanes.take(true, &mut |r: &Receipt| {
                    all.push(*r);
                    Ok::<(), std::convert::Infallible>(())
                });
            }
        }
        all.into_iter()
    }
    /// Receipts queued now.
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::Shards(shards) => shards.iter().map(|rx| rx.len()).sum(),
            Inner::Lanes(lanes) => lanes.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for ReceiptReceiver {
    fn drop(&mut self) {
        if let Inner::Lanes(lanes) = &self.inner {
            lanes.receiver_dropped();
        }
    }
}

impl ChannelSink {
    /// A sink holding up to `capacity` receipts and its receiving end.
    pub fn new(capacity: usize) -> (ChannelSink, ReceiptReceiver) {
        let per_shard = capacity.div_ceil(SINK_SHARDS).max(1);
        let (tx, rx): (Vec<_>, Vec<_>) = (0..SINK_SHARDS).map(|_| bounded(per_shard)).unzip();
        (
            ChannelSink { shards: tx.into_boxed_slice(), dropped: AtomicU64::new(0) },
            ReceiptReceiver { inner: Inner::Shards(rx.into_boxed_slice()) },
        )
    }
}

impl ReceiptSink for ChannelSink {
    #[inline]
    fn submit(&self, receipt: &Receipt) {
        // Any bits of the thread number pick a shard: on a 32-bit target the high ones are
        // dropped, which changes only which shard a thread writes, not what it writes.
        #[allow(clippy::cast_possible_truncation)]
        let shard = crate::sync::thread_number() as usize % self.shards.len().max(1);
        let sent = self.shards.get(shard).is_some_and(|tx| tx.try_send(*receipt).is_ok());
        if !sent {
            // Relaxed: a statistic, read on its own; orders nothing.
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn dropped(&self) -> u64 {
        // Relaxed: a statistic, as where it is counted.
        self.dropped.load(Ordering::Relaxed)
    }
}

/// A sink that never drops: `submit` waits while its shard is full. For audits and for
/// building records from receipts, where a lost receipt would bias the figures; the
/// calls then go no faster than the receipts are written.
#[derive(Debug)]
pub struct LosslessSink {
    shards: Box<[Sender<Receipt>]>,
    lost: AtomicU64,
}

impl LosslessSink {
    /// A sink holding up to `capacity` receipts before `submit` waits, and its receiving end.
    pub fn new(capacity: usize) -> (LosslessSink, ReceiptReceiver) {
        let (sink, rx) = ChannelSink::new(capacity);
        (LosslessSink { shards: sink.shards, lost: AtomicU64::new(0) }, rx)
    }
}

impl ReceiptSink for LosslessSink {
    fn submit(&self, receipt: &Receipt) {
        #[allow(clippy::cast_possible_truncation)]
        let shard = crate::sync::thread_number() as usize % self.shards.len().max(1);
        // Only a receiver that is gone loses a receipt (`send` waits for room otherwise).
        if self.shards.get(shard).is_none_or(|tx| tx.send(*receipt).is_err()) {
            // Relaxed: a statistic, read on its own.
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn dropped(&self) -> u64 {
        // Relaxed: a statistic.
        self.lost.load(Ordering::Relaxed)
    }
}

/// The JSON object of one receipt, with names resolved.
pub fn receipt_json(r: &Receipt, names: &Names) -> serde_json::Value {
    let name = |table: &super::symbols::Symbols, sym: u32| table.name(sym).map_or_else(String::new, |n| n.to_string());
    let mut v = json!({
        "id": r.id,
        "parent": (r.parent != 0).then_some(r.parent),
        "mandate": name(&names.mandates, r.mandate.0),
        "agent": name(&names.agents, r.agent.0),
        "decision": r.decision.as_str(),
        "end": r.end.as_str(),
        "reasons": r.codes.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "worst_case": r.worst_case.to_string(),
        "actual": r.actual.to_string(),
        "at": r.at.to_string(),
        "ended_at": r.ended_at.to_string(),
        "outcome": (r.outcome != Outcome::Unreported).then_some(r.outcome.as_str()),
        "latency_ms": (r.outcome != Outcome::Unreported).then_some(r.latency_ms),
    });
    // Only where it is so: receipts of an engine that is not shadowed stay as they were.
    if r.shadow
        && let Some(obj) = v.as_object_mut()
    {
        obj.insert("shadow".into(), json!(true));
    }
    v
}

/// [`receipt_json`] with what an agent record needs and the live snapshot knows: the
/// agent's version, the mandate's currency, the paying account (the namespace of the root
/// mandate's issuer), the caller (the mandate's grantee) and whether it is an agent. A
/// sub-call of a delegated run names its run's derived mandate (`ROOT/ns/orchestrator`):
/// the root is the longest prefix the snapshot holds, and the caller the orchestrator.
/// Fields the snapshot cannot say (a mandate or agent since removed) are left out.
pub fn receipt_json_with_facts(r: &Receipt, names: &Names, snap: &Snapshot) -> serde_json::Value {
    let mut v = receipt_json(r, names);
    let Some(obj) = v.as_object_mut() else { return v };
    if let Some(agent) = snap.agent(r.agent) {
        obj.insert("agent_version".into(), json!(agent.source.version.to_string()));
    }
    let name = names.mandates.name(r.mandate.0);
    let facts = name.as_deref().and_then(|name| mandate_facts(name, names, snap));
    if let Some((root, caller, caller_is_agent)) = facts {
        obj.insert("currency".into(), json!(root.budget.currency.to_string()));
        obj.insert("payer".into(), json!(root.issuer.namespace()));
        obj.insert("caller".into(), json!(caller));
        obj.insert("caller_kind".into(), json!(if caller_is_agent { "agent" } else { "person" }));
    }
    v
}

/// The root mandate of mandate `name`, its caller, and whether the caller is an agent.
fn mandate_facts<'s>(name: &str, names: &Names, snap: &'s Snapshot) -> Option<(&'s Mandate, String, bool)> {
    let published = |id: &str| names.mandates.get(id).and_then(|ix| snap.mandate(MandateIx(ix)));
    if let Some(m) = published(name) {
        return Some((&m.source, m.source.grantee.to_string(), m.source.grantee.is_agent()));
    }
    // A derived run mandate: `PARENT/ns/orchestrator`, the parent itself maybe derived.
    let (parent, orchestrator) = split_last_agent(name)?;
    let mut prefix = parent;
    loop {
        if let Some(m) = published(prefix) {
            return Some((&m.source, orchestrator.to_owned(), true));
        }
        prefix = &prefix[..prefix.rfind('/')?];
    }
}

/// `a/b/ns/name` into (`a/b`, `ns/name`).
fn split_last_agent(name: &str) -> Option<(&str, &str)> {
    let last = name.rfind('/')?;
    let before = name.get(..last)?.rfind('/')?;
    Some((name.get(..before)?, name.get(before + 1..)?))
}

/// How long a drain sleeps between bursts. A receiver blocked in `recv` makes every
/// `try_send` wake it (a lock and a futex call, measured at ~300 ns per receipt on the
/// allowed path); a receiver that polls in bursts leaves the senders a plain array write.
pub const DRAIN_INTERVAL_MS: u64 = 1;

/// Calls `f` on every receipt until every sender is gone, polling in bursts (see
/// [`DRAIN_INTERVAL_MS`]); `burst_done` runs after each non-empty burst. Stops at the
/// first error (with a batch sink, the rest of the batch being passed then is lost to a
/// later drain: nothing in holon drains again after an error).
pub fn drain<E>(
    rx: &ReceiptReceiver,
    f: impl FnMut(&Receipt) -> Result<(), E>,
    burst_done: impl FnMut() -> Result<(), E>,
) -> Result<u64, E> {
    match &rx.inner {
        Inner::Shards(shards) => drain_shards(shards, f, burst_done),
        Inner::Lanes(lanes) => drain_lanes(lanes, f, burst_done),
    }
}

/// [`drain`] of a channel's shards: until every sender is gone.
fn drain_shards<E>(
    shards: &[Receiver<Receipt>],
    mut f: impl FnMut(&Receipt) -> Result<(), E>,
    mut burst_done: impl FnMut() -> Result<(), E>,
) -> Result<u64, E> {
    let mut seen = 0u64;
    loop {
        let mut burst = 0u64;
        let mut open = 0usize;
        for shard in shards.iter() {
            loop {
                match shard.try_recv() {
                    Ok(r) => {
                        f(&r)?;
                        burst += 1;
                    }
                    Err(crossbeam_channel::TryRecvError::Empty) => {
                        open += 1;
                        break;
                    }
                    // Every sender is gone and this shard is empty.
                    Err(crossbeam_channel::TryRecvError::Disconnected) => break,
                }
            }
        }
        if burst > 0 || open == 0 {
            burst_done()?;
        }
        seen += burst;
        if open == 0 {
            return Ok(seen);
        }
        std::thread::sleep(std::time::Duration::from_millis(DRAIN_INTERVAL_MS));
    }
}

/// [`drain`] of a batch sink's lanes: until the sink is gone and its lanes are empty.
fn drain_lanes<E>(
    lanes: &Lanes,
    mut f: impl FnMut(&Receipt) -> Result<(), E>,
    mut burst_done: impl FnMut() -> Result<(), E>,
) -> Result<u64, E> {
    let mut seen = 0u64;
    loop {
        // Read first: once the sink is gone, this pass takes everything it submitted (and
        // waits for each lane's lock, which no `submit` can hold any more).
        let gone = lanes.sink_gone();
        let (burst, whole) = lanes.take(gone, &mut f)?;
        if burst > 0 || gone {
            burst_done()?;
        }
        seen += burst;
        if gone && whole {
            return Ok(seen);
        }
        std::thread::sleep(std::time::Duration::from_millis(DRAIN_INTERVAL_MS));
    }
}

/// Drains a receipt channel into JSON lines on `out` until every sender is gone.
/// Returns the number of lines written, or the first write error.
pub fn spawn_json_lines_writer<W: Write + Send + 'static>(
    rx: ReceiptReceiver,
    names: Arc<Names>,
    out: W,
) -> JoinHandle<std::io::Result<u64>> {
    std::thread::spawn(move || {
        let out = std::cell::RefCell::new(out);
        drain(&rx, |r| writeln!(out.borrow_mut(), "{}", receipt_json(r, &names)), || out.borrow_mut().flush())
    })
}
