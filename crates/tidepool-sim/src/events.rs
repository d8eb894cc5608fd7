//! The event calendar: events ordered by (time, insertion order), so events
//! at the same instant are handled in the order they were raised and a run
//! is a deterministic function of its inputs.

use crate::wheel::Wheel;

/// Something that happens to worker `w` at a given time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
/// so the queue compares integers and moves 16 bytes. Events are never
/// scheduled in the past, so a timing wheel holds them. Insertion numbers
/// wrap after 2³⁶ pushes, which can only misorder events due at the same
/// nanosecond that were pushed 6·10¹⁰ pushes apart (still deterministic).
#[derive(Debug, Default)]
pub struct Calendar {
    wheel: Wheel,
    seq: u64,
}

const WORKER_BITS: u32 = 26;
const SEQ_BITS: u32 = 36;

impl Event {
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

    #[inline]
    fn unpack(bits: u64) -> Event {
        let w = (bits & ((1 << WORKER_BITS) - 1)) as u32;
        match (bits >> WORKER_BITS) & 3 {
            0 => Event::Ready(w),
            1 => Event::Woken(w),
            2 => Event::Unblocked(w),
            _ => Event::KeepAlive(w),
        }
    }
}

impl Calendar {
    /// Schedule `event` at `at` ns.
    #[inline]
    pub fn push(&mut self, at: u64, event: Event) {
        self.seq = (self.seq + 1) & ((1 << SEQ_BITS) - 1);
        let low = self.seq << (WORKER_BITS + 2) | event.pack();
        self.wheel.push(u128::from(at) << 64 | u128::from(low));
    }

    /// When the next event is due.
    #[inline]
    pub fn next_at(&mut self) -> Option<u64> {
        self.wheel.peek().map(|k| (k >> 64) as u64)
    }

    /// Take the next event.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, Event)> {
        self.wheel
            .pop()
            .map(|k| ((k >> 64) as u64, Event::unpack(k as u64)))
    }

    /// No event pending.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.wheel.len() == 0
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
