//! The submit gate: lets shutdown wait for every `submit` in flight, so a task
//! that was accepted is always seen by a worker or by `shutdown_now`.
//!
//! Submitters count themselves in one of several cache-padded shards (picked
//! per thread), so concurrent submitters do not fight over one cache line.
//! Protocol (all `SeqCst`): a submitter increments its shard, then reads the
//! shutdown flag; shutdown sets the flag, then waits for every shard to drain.
//! In the single total order of these operations, either the submitter sees
//! the flag (and backs out) or shutdown sees the submitter (and waits).

use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicBool, AtomicUsize};

const SHARDS: usize = 8;

/// Counts submitters inside `submit` and carries the shutdown flag.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    shut: AtomicBool,
    shards: [CachePadded<AtomicUsize>; SHARDS],
}

/// Proof of being inside the gate; leaving happens on drop.
pub(crate) struct Inside<'a>(&'a AtomicUsize);

impl Drop for Inside<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

fn my_shard() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Relaxed) % SHARDS;
    }
    SHARD.try_with(|s| *s).unwrap_or(0)
}

impl Gate {
    /// Enter, unless shutdown has begun.
    #[inline]
    pub(crate) fn enter(&self) -> Option<Inside<'_>> {
        let shard = &*self.shards[my_shard()];
        shard.fetch_add(1, SeqCst);
        let inside = Inside(shard);
        if self.shut.load(SeqCst) {
            return None; // `inside` drops: leave again
        }
        Some(inside)
    }

    /// Refuse new entries; returns false if already refused.
    pub(crate) fn shut(&self) -> bool {
        !self.shut.swap(true, SeqCst)
    }

    /// True once shutdown has begun.
    pub(crate) fn is_shut(&self) -> bool {
        self.shut.load(SeqCst)
    }

    /// True when no submitter is inside.
    pub(crate) fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.load(SeqCst) == 0)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn entering_after_shut_fails_and_leaves_no_trace() {
        let g = Gate::default();
        {
            let _inside = g.enter().unwrap();
            assert!(!g.is_empty());
        }
        assert!(g.is_empty());
        assert!(g.shut());
        assert!(!g.shut());
        assert!(g.enter().is_none());
        assert!(g.is_empty());
    }
}
