//! The event calendar: a binary heap ordered by (time, insertion order), so
//! events at the same instant are handled in the order they were raised and
//! a run is a deterministic function of its inputs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Something that happens to worker `w` at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// A spawned worker is ready to take work.
    Ready(u32),
    /// A parked worker that was woken runs again.
    Woken(u32),
    /// A worker's blocked part (sleep) ended.
    Unblocked(u32),
    /// A parked worker's keep-alive may have run out (the worker checks
    /// its current deadline: an event left from an earlier park is only a
    /// check).
    KeepAlive(u32),
}

/// Pending events.
#[derive(Debug, Default)]
pub struct Calendar {
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
}

impl Calendar {
    /// Schedule `event` at `at` ns.
    #[inline]
    pub fn push(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, event)));
    }

    /// When the next event is due.
    #[inline]
    pub fn next_at(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Take the next event.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, Event)> {
        self.heap.pop().map(|Reverse((t, _, e))| (t, e))
    }

    /// No event pending.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_in_insertion_order() {
        let mut c = Calendar::default();
        c.push(5, Event::Ready(1));
        c.push(3, Event::Woken(2));
        c.push(5, Event::Unblocked(0));
        c.push(3, Event::KeepAlive(9));
        let order: Vec<_> = std::iter::from_fn(|| c.pop()).collect();
        assert_eq!(
            order,
            vec![
                (3, Event::Woken(2)),
                (3, Event::KeepAlive(9)),
                (5, Event::Ready(1)),
                (5, Event::Unblocked(0)),
            ]
        );
        assert!(c.is_empty());
    }
}
