//! What travels between nodes: a buffer in its envelope, and the ring that
//! puts envelopes back in order.

use std::sync::Arc;

use crate::queue::Queue;

/// What an envelope's buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Empty {
    /// Data.
    No,
    /// Nothing: the source's [`Flow::End`]; travels the whole pipeline.
    Stream,
    /// Nothing: the notice a route fork at this nesting depth sends down a
    /// branch the last buffer did not take; dropped at that fork's join.
    Branch(usize),
}

/// A buffer with what the framework knows about it.
pub(crate) struct Env<B> {
    pub(crate) buf: B,
    pub(crate) round: u64,
    /// Per fork nesting depth, the buffer's arrival index at the fork it
    /// last passed at that depth (a join's key). Sized once, for the
    /// deepest fork of the run.
    pub(crate) seq: Box<[u64]>,
    pub(crate) empty: Empty,
}

impl<B> Env<B> {
    pub(crate) fn new(buf: B, depths: usize) -> Self {
        Env {
            buf,
            round: 0,
            seq: vec![0; depths.max(1)].into_boxed_slice(),
            empty: Empty::No,
        }
    }
}

/// A queue of envelopes.
pub(crate) type Q<B> = Arc<Queue<Env<B>>>;

/// Puts buffers back in order: the one with key `next` goes first. A ring
/// as large as the pipeline's pool: the keys waiting are always within one
/// pool's width of `next` (each is a round in flight), so no two share a
/// slot, and nothing is allocated per round.
pub(crate) struct Reorder<B> {
    next: u64,
    slots: Vec<Option<Env<B>>>,
}

impl<B> Reorder<B> {
    pub(crate) fn new(width: usize) -> Self {
        Reorder {
            next: 0,
            slots: (0..width.max(1)).map(|_| None).collect(),
        }
    }

    pub(super) fn insert(&mut self, key: u64, env: Env<B>) {
        let i = (key % self.slots.len() as u64) as usize;
        debug_assert!(self.slots[i].is_none(), "reorder window overrun");
        self.slots[i] = Some(env);
    }

    pub(super) fn pop_next(&mut self) -> Option<Env<B>> {
        let i = (self.next % self.slots.len() as u64) as usize;
        let e = self.slots[i].take()?;
        self.next += 1;
        Some(e)
    }
}

/// What a reorder sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// The buffer's arrival index at this node (an ordered replicated stage).
    Index,
    /// The arrival index at the fork of this depth (an ordered join).
    Seq(usize),
}

impl Key {
    /// Empty notices made by a fork at depth `d >= j` never passed fork
    /// `j`'s numbering: they skip its reorder (and are dropped here).
    pub(super) fn skips<B>(self, env: &Env<B>) -> bool {
        matches!((self, env.empty), (Key::Seq(j), Empty::Branch(d)) if d >= j)
    }
}
