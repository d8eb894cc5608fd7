//! A bounded ring that spills into an unbounded overflow, and the flag that
//! says which of the two a push goes to.
//!
//! # Why a flag
//!
//! The unbounded lock-free queue's shard is a ring that spills into a list
//! only while the ring is full (`lock_free`). A push used to choose by asking
//! the list whether it was empty, which reads the list's head — and every
//! pop writes the head. In a backlog (eight submitters on two cores, where
//! nearly every task goes through the list) each push therefore pulled the
//! head's cache line away from the popping worker, and the worker's next pop
//! pulled it back: two cache-line transfers per task, on top of the task's
//! own (`docs/design.md`). Now a push reads `spilled`, a flag
//! written only when the shard switches between the two regimes.
//!
//! # Protocol
//!
//! The order rule is the one the shard always had: a push may go to the
//! ring only if the overflow is empty at that moment (a `SeqCst` check), and
//! a pop takes from the ring first, then from the overflow. So a submitting
//! thread's tasks in the ring are always older than its tasks in the
//! overflow, and a popper takes each thread's tasks in FIFO order but for
//! one race (below, "What the order is"). Pushing to the overflow is always
//! allowed (the ring's tasks are the older either way).
//!
//! `spilled` only lets a push skip the check:
//! - a push that reads `spilled` true goes to the overflow without looking;
//! - a push that reads it false checks the overflow (whose lines are quiet
//!   then: nothing is pushed to it or popped from it) and goes to the ring
//!   if the overflow is empty and the ring has room; otherwise it sets
//!   `spilled` and goes to the overflow;
//! - a pop that finds both parts empty clears `spilled`.
//!
//! The flag can be stale either way without harm: a push that read true
//! after the drain cleared it goes to the (empty) overflow, which is allowed,
//! and the next push sees the overflow non-empty and sets the flag again; a
//! pop that cleared it while a push was landing in the overflow just makes
//! the next push check. Every pop looks at both parts whatever the flag says,
//! and `is_empty` asks both: the flag decides where a task goes, never
//! whether it can be found, so it needs no ordering of its own (relaxed loads
//! and stores), and the queue's wake-up argument (`pool::sleep`) rests on the
//! parts' own `SeqCst` read-modify-writes, as before.
//! `loom_spill_flag_keeps_fifo` in `pool/loom_tests.rs` model-checks this
//! protocol with the same functions.
//!
//! # What the order is
//!
//! A pop's two looks, the ring's and then the overflow's, are not one
//! atomic step. A popper that finds the ring empty and is descheduled
//! before it looks at the overflow can come back to an overflow that has
//! drained (other poppers), seen the ring take newer tasks and fill, and
//! spilled again: it then takes the overflow's first task, which is newer
//! than the ring's. So a task can start ahead of older ones of its
//! submitter, one per such pop; what stays queued is always in order. It
//! takes a backlog of more than a ring's worth and a popper off its CPU at
//! that instant: the stress tests in `lock_free.rs` allow a few such tasks
//! per popper (`EARLY_AT_MOST`) and saw it in one CI run of many, and the loom model above allows it for the worker's own pops.
//! Ruling it out would need the overflow's pop to refuse tasks pushed after
//! the popper's look at the ring, which costs every pop a read of the
//! overflow's tail line, the line the flag exists to keep quiet.

/// One of the two parts of a shard.
pub(crate) trait Part<T> {
    /// Add a task; gives it back if the part is full.
    fn push(&self, task: T) -> Result<(), T>;
    /// Take the oldest task, if any.
    fn pop(&self) -> Option<T>;
    /// A cheap hint (plain loads): true if the part looked empty.
    fn looks_empty(&self) -> bool;
    /// True if the part holds nothing (`SeqCst` loads).
    fn is_empty(&self) -> bool;
}

/// The regime flag (an atomic bool; a trait so the loom model can use loom's).
pub(crate) trait Flag {
    /// Whether pushes go to the overflow without checking it.
    fn get(&self) -> bool;
    /// Switch the regime.
    fn set(&self, spilled: bool);
}

/// Push `task` to `ring` while the overflow is empty, else to `overflow`.
#[inline]
pub(crate) fn push<T>(spilled: &impl Flag, ring: &impl Part<T>, overflow: &impl Part<T>, task: T) {
    let task = if spilled.get() {
        task
    } else {
        let task = if overflow.is_empty() {
            match ring.push(task) {
                Ok(()) => return,
                Err(task) => task,
            }
        } else {
            task
        };
        spilled.set(true);
        task
    };
    if overflow.push(task).is_err() {
        unreachable!("the overflow is unbounded");
    }
}

/// Take the oldest task: the ring's, then the overflow's.
#[inline]
pub(crate) fn pop<T>(
    spilled: &impl Flag,
    ring: &impl Part<T>,
    overflow: &impl Part<T>,
) -> Option<T> {
    // The hints skip a failed `pop` and its fence: in a backlog the ring is
    // often empty while the overflow is not, and a pop that finds its home
    // shard empty goes on to the next.
    if !ring.looks_empty() {
        if let Some(task) = ring.pop() {
            return Some(task);
        }
    }
    if !overflow.looks_empty() {
        if let Some(task) = overflow.pop() {
            return Some(task);
        }
    }
    if spilled.get() {
        // Drained: the next push checks the overflow, and goes to the ring.
        spilled.set(false);
    }
    None
}
