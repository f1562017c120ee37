//! Idempotency keys as a gateway uses them, whatever keeps them (the store's key book for
//! `holon serve`, the engine's process for the Python binding): the key's written form,
//! which answers are kept for a retry, and what a retry of an allowed call gets.
//!
//! A key is a retrier's promise that two requests are one. It is never an authorisation:
//! a replayed *allowed* answer is given only while its reservation is still open (the call
//! it authorised has not been settled, released or reclaimed); after that the same key gets
//! a denial that lets nothing through ([`Code::ReplayReservationEnded`]), so a key that the
//! budgeted party can choose or repeat never buys a second call.

use crate::admission::{Code, CodeSet, Verdict};
use crate::store::keys::KEY_BYTES_MAX;

/// How long a key is kept by default, from its claim, in seconds.
pub const KEEP_S: u64 = 86_400;
/// Most keys kept by default (past it the oldest answered are dropped first; a key in
/// flight is never dropped), in keys.
pub const KEYS_MAX: u64 = 100_000;

/// Why a key cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an idempotency key is 1 to {KEY_BYTES_MAX} visible ASCII characters (a UUID, say)")]
pub struct IdempotencyKeyError;

/// A key as sent: visible ASCII, 1 to [`KEY_BYTES_MAX`] bytes.
pub fn key(sent: &[u8]) -> Result<&str, IdempotencyKeyError> {
    let visible = !sent.is_empty() && sent.len() <= KEY_BYTES_MAX && sent.iter().all(u8::is_ascii_graphic);
    match std::str::from_utf8(sent) {
        Ok(key) if visible => Ok(key),
        _ => Err(IdempotencyKeyError),
    }
}

/// Whether a decision's answer is kept under its key for a retry: every decision except a
/// denial only for want of a lease or of the store (nothing was decided about the call; the
/// same key must be able to ask again).
pub fn keep_answer(verdict: Verdict, codes: CodeSet) -> bool {
    !(verdict == Verdict::Denied && super::only_for_want_of_lease_or_store(codes))
}

/// What a retry of a kept *allowed* answer gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The reservation is still open: the first answer again (the same reservation; nothing
    /// reserved twice).
    Give,
    /// The reservation has ended (settled, released, reclaimed) or is not open here: a
    /// denial, [`Code::ReplayReservationEnded`], never `allowed`.
    Ended,
}

/// The rule for a kept allowed answer: given again only while `open` (its reservation is
/// open on the node answering).
pub fn replay_of_allowed(open: bool) -> Replay {
    if open { Replay::Give } else { Replay::Ended }
}

/// The sentence of a replay refused because its reservation ended, for every surface.
/// `elsewhere`: the node that made the reservation, when it is not the one asked (which
/// cannot see whether it is still open there).
pub fn replay_ended_sentence(reservation: &str, elsewhere: Option<&str>) -> String {
    match elsewhere {
        None => format!(
            "this idempotency key's first answer allowed a call under reservation `{reservation}`, which has ended (settled, released or reclaimed): a replay never authorises a call; nothing was reserved. A new call takes a new key"
        ),
        Some(node) => format!(
            "this idempotency key's first answer allowed a call under reservation `{reservation}` on node `{node}`, which this node cannot see open: a replay never authorises a call; nothing was reserved. Retry on `{node}` (it replays while the reservation is open), or settle or release `{reservation}` there"
        ),
    }
}

/// The denial a replay refused because its reservation ended carries.
pub const REPLAY_ENDED: Code = Code::ReplayReservationEnded;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_visible_ascii_within_its_bound() {
        assert_eq!(key(b"6f1e-42"), Ok("6f1e-42"));
        for bad in [&b""[..], b"a b", b"k\xff", b"tab\t", &[b'k'; KEY_BYTES_MAX + 1]] {
            assert_eq!(key(bad), Err(IdempotencyKeyError), "{bad:?}");
        }
        assert!(key(&[b'k'; KEY_BYTES_MAX]).is_ok());
    }

    #[test]
    fn a_lease_denial_is_let_go_and_every_other_answer_kept() {
        let lease = CodeSet::EMPTY.with(Code::LeasePending);
        assert!(!keep_answer(Verdict::Denied, lease));
        assert!(!keep_answer(Verdict::Denied, CodeSet::EMPTY.with(Code::StoreUnavailable)));
        assert!(keep_answer(Verdict::Denied, CodeSet::EMPTY.with(Code::TotalExceeded)));
        assert!(keep_answer(Verdict::Allowed, CodeSet::EMPTY));
        assert!(keep_answer(Verdict::Held, CodeSet::EMPTY.with(Code::ApprovalRequired)));
        assert_eq!(replay_of_allowed(false), Replay::Ended);
        assert_eq!(replay_of_allowed(true), Replay::Give);
    }
}
