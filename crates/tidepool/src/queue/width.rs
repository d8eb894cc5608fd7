//! Lazy striping: the unbounded lock-free queue's shards act as one FIFO
//! until a second thread submits.
//!
//! # Why
//!
//! The shards exist for many submitters (`lock_free`): two threads pushing
//! at once push to different tails. With one submitter they only cost: the
//! sharded pop reads two thread-locals, does the fair-turn arithmetic and
//! copies the task out of a loop, about 10 ns a pop, and a worker whose
//! home is not the submitter's probes its own empty shard first
//! (`docs/design.md`). That is what kept `burst-idle` (one
//! submitter, two workers) behind a one-shard queue. So, as Java's
//! `Striped64` adds cells only once a compare-exchange fails, the queue
//! starts *narrow* and widens, once and for good, when a second thread
//! submits.
//!
//! # Protocol
//!
//! Pushes do not change: a thread always pushes to its home shard, narrow
//! or wide, so its tasks stay in one FIFO whatever the width (the first
//! submitter's before and after the widening included). The width only
//! decides where a pop *starts*, and whether it pays for the sharded start:
//! - `owner` (on its own line, changes at most twice in a queue's life)
//!   holds 0 until the first push, then that pusher's *seat* (a per-thread
//!   word that is unique to the thread and carries its home shard in its low
//!   bits), then [`WIDE`] from the first push by a thread with another seat.
//! - A push reads `owner`: its own seat or `WIDE`, nothing to do (one load
//!   of a line nobody writes); 0, it claims the queue with a compare-exchange;
//!   another seat, it stores `WIDE`. Then it pushes to its home shard.
//! - A pop reads `owner`. Narrow, it takes from the owner's home shard (the
//!   only shard that has tasks, but for a push racing the widening) with no
//!   thread-local and no rotation. Wide, it is the sharded pop (home first,
//!   fair turns). **Either way, a pop that finds its first shard empty goes
//!   on to every other shard**, and `is_empty` and `len` ask every shard
//!   whatever the width.
//!
//! So the width decides where a pop looks first, never whether a task can be
//! found: a pop or a park that read the old width while a push at the new
//! one went to another shard still sees that shard, exactly as with a stale
//! spill flag (`spill`). The width needs no ordering of its own (relaxed
//! loads and stores; the claim is a compare-exchange only so that two first
//! pushes cannot both become the owner), and the wake-up argument of
//! `pool::sleep` rests, as before, on each shard's `SeqCst` read-modify-write
//! and on `is_empty` asking every shard. A stale narrow width can only make
//! a pop start at the owner's shard while it is wide: per-submitter FIFO is
//! per shard, so the start does not matter for order, and no pop ever skips
//! a shard. `loom_widening_strands_no_task` in `pool/loom_tests.rs` checks
//! a push at the new width against a pop and a park at the old one, with
//! these functions.
//!
//! A seat is unique per thread (an id from a global counter), so a thread
//! that starts after the owner exits does not pass for it; a thread whose
//! home changes after it claimed the queue (`set_home`) no longer matches its
//! seat and widens it, which is always allowed.

use crate::sync::AtomicUsize;
use crossbeam_utils::CachePadded;
use std::sync::atomic::Ordering::Relaxed;

/// `owner` once a second submitting thread has been seen.
pub(crate) const WIDE: usize = usize::MAX;

/// Whether the queue is still narrow, and whose it is.
#[derive(Debug, Default)]
pub(crate) struct Width {
    /// 0 (no push yet), the first pusher's seat, or [`WIDE`].
    owner: CachePadded<AtomicUsize>,
}

impl Width {
    /// Note a push by the thread in `seat` (never 0 nor [`WIDE`]): claims a
    /// queue nobody pushed to, widens one another thread claimed.
    #[inline]
    pub(crate) fn note_push(&self, seat: usize) {
        debug_assert!(seat != 0 && seat != WIDE);
        let owner = self.owner.load(Relaxed);
        if owner != seat && owner != WIDE {
            self.claim_or_widen(owner, seat);
        }
    }

    #[cold]
    #[inline(never)]
    fn claim_or_widen(&self, owner: usize, seat: usize) {
        if owner == 0 {
            match self.owner.compare_exchange(0, seat, Relaxed, Relaxed) {
                Ok(_) => return,
                // Another first push won; it is a second submitter to us.
                Err(now) if now == seat || now == WIDE => return,
                Err(_) => {}
            }
        }
        self.owner.store(WIDE, Relaxed);
    }

    /// Where a pop starts while narrow: the owner's seat (its home shard in
    /// the low bits; 0 before any push). `None` once wide.
    #[inline]
    pub(crate) fn narrow(&self) -> Option<usize> {
        let owner = self.owner.load(Relaxed);
        (owner != WIDE).then_some(owner)
    }
}
