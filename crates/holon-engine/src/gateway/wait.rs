//! The waits, once: a store-backed node denies a call `lease_pending` while a grant is on
//! its way, and copies a call it held to the store at its next poll; the gateway asks
//! again, waking the node, for at most [`LEASE_WAIT_MS`] ([`lease_wait`], [`find_held`]).
//! Each loop is one `async fn`, generic over how it pauses: `holon serve` pauses on tokio's
//! timer, the Python binding and other threads on [`std::thread::sleep`] through
//! [`lease_wait_blocking`] (the same loop, polled to its end in place).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::admission::{Code, CodeSet};
use crate::engine::Admission;
use crate::node::Node;
use crate::store::HeldCall;

/// The longest a request waits for a lease on its way (`lease_pending`), in ms. A node
/// refills within a poll or two; on a loaded machine (or a store far away) that can take
/// much longer than a poll.
pub const LEASE_WAIT_MS: u64 = 2_000;
/// The pause between two asks while waiting, in ms.
const LEASE_PAUSE_MS: u64 = 1;

/// Whether a denial is only for want of a lease or of the store: nothing was decided about
/// the call itself, so the same request (the same idempotency key) may ask again, and a
/// held call stays held.
pub fn only_for_want_of_lease_or_store(codes: CodeSet) -> bool {
    codes.only_for_want_of_lease_or_store()
}

fn waits(admission: &Admission<'_>) -> bool {
    matches!(admission, Admission::Denied(d) if !d.codes.is_empty() && d.codes.iter().all(|c| c == Code::LeasePending))
}

/// Asks `ask` again while the only reason to refuse is a lease on its way, for up to
/// [`LEASE_WAIT_MS`], waking `node` before each pause (`pause`); without a node, once.
pub async fn lease_wait<'e, E, A, P>(
    node: Option<&Node>,
    mut ask: impl FnMut() -> A,
    pause: impl Fn(Duration) -> P,
) -> Result<Admission<'e>, E>
where
    A: Future<Output = Result<Admission<'e>, E>>,
    P: Future<Output = ()>,
{
    let deadline = Instant::now() + Duration::from_millis(LEASE_WAIT_MS);
    loop {
        let mut admission = ask().await?;
        if let (Some(node), Admission::Denied(d)) = (node, &mut admission)
            && d.codes.only_for_want_of_lease_or_store()
            && !node.is_running()
        {
            // Nothing will supply this engine again: say so, not "retry". (Its receipt, written
            // by the engine, says `lease_pending`: the engine cannot see its node.)
            d.codes = CodeSet::EMPTY.with(Code::NodeStopped);
            return Ok(admission);
        }
        let Some(node) = node.filter(|_| waits(&admission) && Instant::now() < deadline) else {
            return Ok(admission);
        };
        drop(admission);
        node.wake();
        pause(Duration::from_millis(LEASE_PAUSE_MS)).await;
    }
}

/// [`lease_wait`] on this thread: each pause a [`std::thread::sleep`].
pub fn lease_wait_blocking<'e, E>(
    node: Option<&Node>,
    mut ask: impl FnMut() -> Result<Admission<'e>, E>,
) -> Result<Admission<'e>, E> {
    in_place(lease_wait(node, || std::future::ready(ask()), sleeping))
}

/// The pause of the blocking forms: this thread sleeps.
fn sleeping(pause: Duration) -> std::future::Ready<()> {
    std::thread::sleep(pause);
    std::future::ready(())
}

/// Runs a future whose every await is ready at once (the blocking forms': their asks and
/// pauses happen in place) to its end on this thread.
fn in_place<T>(future: impl Future<Output = T>) -> T {
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return out;
        }
    }
}

/// The pause between two looks for a held call on its way to the store, in ms.
const HELD_PAUSE_MS: u64 = 5;

/// The held call `id` as the store lists it (`list`). A call this node held a moment ago
/// may not be in the store yet: for that one (only: a stranger's guess costs one look) it
/// looks again, waking the node, for up to [`LEASE_WAIT_MS`]. `None`: not held.
pub async fn find_held<E, L, P>(
    node: Option<&Node>,
    id: &str,
    mut list: impl FnMut() -> L,
    pause: impl Fn(Duration) -> P,
) -> Result<Option<HeldCall>, E>
where
    L: Future<Output = Result<Vec<HeldCall>, E>>,
    P: Future<Output = ()>,
{
    let here = node.filter(|n| n.is_held_here(id));
    let deadline = Instant::now() + Duration::from_millis(if here.is_some() { LEASE_WAIT_MS } else { 0 });
    loop {
        if let Some(call) = list().await?.into_iter().find(|c| c.id == id) {
            return Ok(Some(call));
        }
        let Some(node) = here.filter(|_| Instant::now() < deadline) else { return Ok(None) };
        node.wake();
        pause(Duration::from_millis(HELD_PAUSE_MS)).await;
    }
}

/// [`find_held`] on this thread.
pub fn find_held_blocking<E>(
    node: Option<&Node>,
    id: &str,
    mut list: impl FnMut() -> Result<Vec<HeldCall>, E>,
) -> Result<Option<HeldCall>, E> {
    in_place(find_held(node, id, || std::future::ready(list()), sleeping))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lease_or_the_store_is_a_reason_to_ask_again() {
        let lease = CodeSet::EMPTY.with(Code::LeasePending);
        let store = CodeSet::EMPTY.with(Code::StoreUnavailable);
        assert!(only_for_want_of_lease_or_store(lease));
        assert!(only_for_want_of_lease_or_store(lease.with(Code::StoreUnavailable)));
        assert!(only_for_want_of_lease_or_store(store));
        assert!(
            only_for_want_of_lease_or_store(CodeSet::EMPTY.with(Code::NodeStopped)),
            "a stopped node decided nothing"
        );
        assert!(!only_for_want_of_lease_or_store(CodeSet::EMPTY));
        assert!(!only_for_want_of_lease_or_store(lease.with(Code::TotalExceeded)));
    }
}
