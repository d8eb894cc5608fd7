//! The event calendar: events ordered by (time, insertion order), so events
//! at the same instant are handled in the order they were raised and a run
//! is a deterministic function of its inputs.

use std::collections::VecDeque;

use crate::wheel::Wheel;

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
///
/// Each entry is one `u128` — time in the high 64 bits, then a 36-bit
/// insertion number, the event's kind (2 bits) and its worker (26 bits) —
/// so the queues compare integers and move 16 bytes. Insertion numbers
/// wrap after 2³⁶ pushes, which can only misorder events due at the same
/// nanosecond that were pushed 6·10¹⁰ pushes apart (still deterministic).
///
/// Per-kind queues: a spawn, a wake-up and a keep-alive are each scheduled
/// a delay that is (nearly always) the same for the run after `now`, which
/// never goes back, so they arrive in time order and a FIFO holds them; the
/// end of a sleep of any length — or an event that would break its FIFO's
/// order — goes on the timing wheel. The next event is the least of the
/// heads: the same order as one queue of everything.
#[derive(Debug)]
pub struct Calendar {
    fifo: [VecDeque<u128>; 3],
    wheel: Wheel,
    seq: u64,
    /// The least head (`NONE`: nothing pending) and where it is, valid
    /// while `fresh` (until a pop).
    head: u128,
    from: usize,
    fresh: bool,
}

/// `from` when the least head is the wheel's (else it is a FIFO's index).
const WHEEL: usize = 3;

/// `head` when nothing is pending: above every key (all ones in the low 26
/// bits would be worker 2²⁶ − 1, the replay's driver, which has no events).
const NONE: u128 = u128::MAX;

const WORKER_BITS: u32 = 26;
/// Bits of a packed event ([`Event::pack`]): its kind and worker.
const EVENT_BITS: u32 = WORKER_BITS + 2;
const SEQ_BITS: u32 = 36;

impl Event {
    /// The event as its kind and worker in the low 28 bits.
    #[inline]
    fn pack(self) -> u64 {
        let (kind, w) = match self {
            Event::Ready(w) => (0u64, w),
            Event::Woken(w) => (1, w),
            Event::Unblocked(w) => (2, w),
            Event::KeepAlive(w) => (3, w),
        };
        debug_assert!(u64::from(w) < 1 << WORKER_BITS, "worker {w}");
        kind << WORKER_BITS | u64::from(w) & ((1 << WORKER_BITS) - 1)
    }

    /// The event [`pack`](Self::pack) gave `bits` (its low 28 bits).
    #[inline]
    pub(crate) fn unpack(bits: u64) -> Event {
        let w = (bits & ((1 << WORKER_BITS) - 1)) as u32;
        match (bits >> WORKER_BITS) & 3 {
            0 => Event::Ready(w),
            1 => Event::Woken(w),
            2 => Event::Unblocked(w),
            _ => Event::KeepAlive(w),
        }
    }
}

impl Default for Calendar {
    fn default() -> Self {
        Calendar {
            fifo: Default::default(),
            wheel: Wheel::default(),
            seq: 0,
            head: NONE,
            from: WHEEL,
            fresh: false,
        }
    }
}

/// A heap key for `event` at `at` ns that orders by time, then by push
/// order (`seq`, advanced here), and gives the event back with
/// [`Event::unpack`] of its low 64 bits: the calendar's and the waiting
/// threads' heap (`model::Sim::pending`) use the same one.
#[inline(always)]
pub(crate) fn key(seq: &mut u64, at: u64, event: Event) -> u128 {
    *seq = (*seq + 1) & ((1 << SEQ_BITS) - 1);
    let low = *seq << EVENT_BITS | event.pack();
    u128::from(at) << 64 | u128::from(low)
}

impl Calendar {
    /// Schedule the end of worker `w`'s sleep at `at` ns: the most common
    /// event, straight to the wheel ([`push`](Self::push) sends it there).
    #[inline]
    pub fn push_unblocked(&mut self, at: u64, w: u32) {
        let key = self.key(at, Event::Unblocked(w));
        self.wheel.push(key);
        self.note(key, WHEEL);
    }

    /// Schedule `event` at `at` ns.
    #[inline]
    pub fn push(&mut self, at: u64, event: Event) {
        let key = self.key(at, event);
        let fifo = match event {
            Event::Ready(_) => Some(0),
            Event::Woken(_) => Some(1),
            Event::KeepAlive(_) => Some(2),
            Event::Unblocked(_) => None,
        };
        let mut at = WHEEL;
        match fifo {
            Some(i) if self.fifo[i].back().is_none_or(|&last| last < key) => {
                self.fifo[i].push_back(key);
                at = i;
            }
            _ => self.wheel.push(key),
        }
        self.note(key, at);
    }

    /// The key of `event` at `at` ns: the time, then the order of pushing.
    #[inline(always)]
    fn key(&mut self, at: u64, event: Event) -> u128 {
        key(&mut self.seq, at, event)
    }

    /// A key was pushed to `from`: keep the known next key known.
    #[inline(always)]
    fn note(&mut self, key: u128, from: usize) {
        if self.fresh && key < self.head {
            (self.head, self.from) = (key, from);
        }
    }

    /// The next key (`NONE`: none) and where it is (a FIFO's index, or 3:
    /// the wheel).
    #[inline]
    fn next(&mut self) -> (u128, usize) {
        if !self.fresh {
            let mut best = (self.wheel.peek().unwrap_or(NONE), WHEEL);
            for (i, q) in self.fifo.iter().enumerate() {
                if let Some(&k) = q.front() {
                    if k < best.0 {
                        best = (k, i);
                    }
                }
            }
            (self.head, self.from) = best;
            self.fresh = true;
        }
        (self.head, self.from)
    }

    /// When the next event is due.
    #[inline]
    pub fn next_at(&mut self) -> Option<u64> {
        let (k, _) = self.next();
        (k != NONE).then_some((k >> 64) as u64)
    }

    /// Take the next event.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(u64, Event)> {
        let (k, from) = self.next();
        if k == NONE {
            return None;
        }
        self.fresh = false;
        if from == WHEEL {
            self.wheel.pop();
        } else {
            self.fifo[from].pop_front();
        }
        Some(((k >> 64) as u64, Event::unpack(k as u64)))
    }

    /// No event pending.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.wheel.len() == 0 && self.fifo.iter().all(VecDeque::is_empty)
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

    #[test]
    fn a_kind_pushed_out_of_time_order_still_comes_out_in_order() {
        let mut c = Calendar::default();
        c.push(10, Event::Woken(1));
        c.push(5, Event::Woken(2)); // behind its FIFO's last: to the wheel
        c.push(7, Event::Unblocked(3));
        c.push(10, Event::KeepAlive(4));
        c.push(20, Event::Woken(5));
        let order: Vec<_> = std::iter::from_fn(|| c.pop()).collect();
        assert_eq!(
            order,
            vec![
                (5, Event::Woken(2)),
                (7, Event::Unblocked(3)),
                (10, Event::Woken(1)),
                (10, Event::KeepAlive(4)),
                (20, Event::Woken(5)),
            ]
        );
        assert!(c.is_empty());
    }
}
