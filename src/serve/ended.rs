//! The reservations this server ended lately, so that a second settle or release of one
//! is told so (409, "already settled") rather than that it never existed (404). At most
//! [`ENDED_KEPT_MAX`], each for [`ENDED_KEEP_S`]: past either, the oldest is forgotten and
//! a late repeat gets the 404.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// Most ended reservations remembered.
pub(crate) const ENDED_KEPT_MAX: usize = 65_536;
/// How long an ended reservation is remembered, in seconds.
pub(crate) const ENDED_KEEP_S: u64 = 3_600;

/// How a reservation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum How {
    Settled,
    Released,
}

impl How {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            How::Settled => "settled",
            How::Released => "released",
        }
    }
}

/// The ended reservations: in the order they ended, and by id. By id in a B-tree, not a
/// hash map: ids grow (blocks of one counter), so a note touches the tree's right end and
/// a forgetting its left end, both in cache; in a hash map of 65,536 ids each was a miss
/// at a random place, and `note` was the server's costliest function of its own (2.6% of
/// its time under `.ci/serve-bench`, about 2 µs a settle).
type Book = (VecDeque<(u64, Instant)>, BTreeMap<u64, How>);

/// The ended reservations, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Ended {
    inner: parking_lot::Mutex<Book>,
}

impl Ended {
    pub(crate) fn note(&self, id: u64, how: How) {
        let mut inner = self.inner.lock();
        let (order, ids) = &mut *inner;
        if ids.insert(id, how).is_none() {
            order.push_back((id, Instant::now()));
        }
        while order.len() > ENDED_KEPT_MAX {
            if let Some((old, _)) = order.pop_front() {
                ids.remove(&old);
            }
        }
        debug_assert_eq!(order.len(), ids.len(), "every id remembered once");
    }

    /// How `id` ended, if it ended here lately.
    pub(crate) fn get(&self, id: u64) -> Option<How> {
        self.inner.lock().1.get(&id).copied()
    }

    /// Forgets what ended more than [`ENDED_KEEP_S`] ago (the reaper calls it).
    pub(crate) fn prune(&self) {
        let window = Duration::from_secs(ENDED_KEEP_S);
        let mut inner = self.inner.lock();
        let (order, ids) = &mut *inner;
        while order.front().is_some_and(|(_, at)| at.elapsed() >= window) {
            if let Some((old, _)) = order.pop_front() {
                ids.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_bound_are_remembered_oldest_forgotten_first() {
        let ended = Ended::default();
        for id in 0..(ENDED_KEPT_MAX as u64 + 10) {
            ended.note(id, How::Settled);
        }
        assert_eq!(ended.get(0), None);
        assert_eq!(ended.get(10), Some(How::Settled));
        ended.note(10, How::Released);
        assert_eq!(ended.inner.lock().0.len(), ENDED_KEPT_MAX);
    }
}
