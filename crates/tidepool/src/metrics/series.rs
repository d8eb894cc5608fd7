//! The live threads' trajectory, and the bounded log that keeps it and the
//! policy's decisions.

use std::time::Duration;

/// The live threads and the target at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LiveThreadsSample {
    /// Time since the pool started.
    pub at: Duration,
    /// Worker threads alive.
    pub live_threads: usize,
    /// The target size.
    pub target: usize,
}

/// The newest `capacity` entries of an endless log (the decision log, the
/// live-threads series): a long-running pool keeps constant memory, and a reader
/// copies at most `capacity` entries. Older entries are dropped and counted.
#[derive(Debug)]
pub(crate) struct Ring<T> {
    entries: std::collections::VecDeque<T>,
    capacity: usize,
    dropped: u64,
}

impl<T: Clone> Ring<T> {
    /// An empty ring keeping at most `capacity` (at least 1) entries. Memory
    /// is taken as entries arrive, never more than for `capacity` of them.
    pub(crate) fn new(capacity: usize) -> Self {
        Ring {
            entries: std::collections::VecDeque::new(),
            capacity: capacity.max(1),
            dropped: 0,
        }
    }

    /// Append `entry`, dropping the oldest one if the ring is full.
    pub(crate) fn push(&mut self, entry: T) {
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
            self.dropped += 1;
        } else if self.entries.len() == self.entries.capacity() {
            // Grow by doubling, but never past `capacity`.
            let room = self
                .entries
                .len()
                .max(4)
                .min(self.capacity - self.entries.len());
            self.entries.reserve_exact(room);
        }
        self.entries.push_back(entry);
    }

    /// The newest entry.
    pub(crate) fn last(&self) -> Option<&T> {
        self.entries.back()
    }

    /// The retained entries, oldest first.
    pub(crate) fn to_vec(&self) -> Vec<T> {
        self.entries.iter().cloned().collect()
    }

    /// Entries dropped to make room so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Entries retained.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Entries the ring has memory for (at most `capacity` plus the
    /// allocator's rounding).
    #[cfg(test)]
    pub(crate) fn allocated(&self) -> usize {
        self.entries.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{DecisionRecord, Observation, Trigger};

    #[test]
    fn a_ring_keeps_the_newest_entries_and_counts_the_rest() {
        let mut r = Ring::new(3);
        assert_eq!(r.last(), None);
        for i in 0..10 {
            r.push(i);
        }
        assert_eq!(r.to_vec(), vec![7, 8, 9]);
        assert_eq!(r.last(), Some(&9));
        assert_eq!(r.dropped(), 7);
        assert_eq!(r.len(), 3);
        // Zero is treated as one, never as "unbounded".
        let mut one = Ring::new(0);
        one.push(1);
        one.push(2);
        assert_eq!(one.to_vec(), vec![2]);
    }

    #[test]
    fn a_day_of_xu_bode_decisions_keeps_memory_flat() {
        // xu-bode decides every 5 completions: at 1,000 tasks/s that is 200
        // records a second, 17.28 million a day.
        const PER_DAY: u64 = 200 * 86_400;
        const CAPACITY: usize = 4096;
        let mut ring = Ring::new(CAPACITY);
        let record = |i: u64| DecisionRecord {
            at: Duration::from_millis(5 * i),
            trigger: Trigger::Completions,
            old_target: 4,
            new_target: 5,
            reason: format!("xu-bode: cycle {i}"),
            observation: Observation::default(),
        };
        let mut allocated_after_an_hour = 0;
        for i in 0..PER_DAY {
            ring.push(record(i));
            if i == 200 * 3600 {
                allocated_after_an_hour = ring.allocated();
            }
        }
        assert_eq!(ring.len(), CAPACITY);
        assert_eq!(ring.allocated(), allocated_after_an_hour, "memory grew");
        assert!(ring.allocated() < 2 * CAPACITY, "{}", ring.allocated());
        assert_eq!(ring.dropped(), PER_DAY - CAPACITY as u64);
        let kept = ring.to_vec();
        assert_eq!(kept.len(), CAPACITY);
        assert_eq!(
            kept.last().map(|r| r.at),
            Some(Duration::from_millis(5 * (PER_DAY - 1)))
        );
    }
}
