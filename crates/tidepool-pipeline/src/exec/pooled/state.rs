//! The run's state under its one lock, and the protocol's decisions on it:
//! which task a worker picks, where a finished task's buffers go (see the
//! parent module's doc, "Scheduling" and "Layout").

use std::ops::{Index, IndexMut};
use std::time::Duration;

use crate::error::PipelineError;
use crate::report::DepthSeries;
use crate::running::Blocking;
use crate::stage::{Source, Stage};

/// A buffer and what the framework knows about it (a slab entry).
pub(super) struct Buf<B> {
    pub(super) buf: B,
    pub(super) round: u64,
    /// Carries no data: the source's [`Flow::End`].
    pub(super) empty: bool,
}

/// A buffer in a task: its id in the slab, its arrival index at the
/// group, and whether it is the group's last.
#[derive(Clone, Copy)]
pub(super) struct Held {
    pub(super) id: u32,
    pub(super) index: u64,
    pub(super) last: bool,
}

/// One instance of a group's stages (one per replica).
pub(super) struct Inst<B> {
    pub(super) source: Option<Box<dyn Source<B>>>,
    pub(super) stages: Vec<Box<dyn Stage<B>>>,
    pub(super) replica: usize,
    /// Of the source and stages (in that order), how many `init`s succeeded.
    pub(super) inited: usize,
    /// Busy time per stage name of the group.
    pub(super) busy: Vec<Duration>,
    /// Whether the group's user code blocks (sampled, as a stage thread's).
    pub(super) blocking: Blocking,
    /// The group's input depth at each of this instance's picks (merged
    /// by time at the end).
    pub(super) depth: DepthSeries,
}

/// What does not change during the run: a group's description, and where
/// its id regions are in [`State::ids`].
pub(super) struct GroupRt {
    pub(super) name: String,
    /// The group's stage names, the source's first in group 0.
    pub(super) stage_names: Vec<String>,
    pub(super) repeat: usize,
    /// Replicated and ordered: outputs go through the reorder ring.
    pub(super) ordered: bool,
    pub(super) instances: usize,
    /// The input ring (`width` ids; group 0's is the free stack).
    pub(super) ring: usize,
    /// The idle-instance stack (`instances` ids).
    pub(super) idle: usize,
    /// The reorder ring (`width` ids, [`NONE`] where empty), if `ordered`.
    pub(super) reorder: usize,
}

/// An empty reorder slot.
pub(super) const NONE: u32 = u32::MAX;

/// A group's counters (under the run's lock): 32 bytes, two to a line.
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub(super) struct Counters {
    /// The input ring's first id and length (group 0: the free stack's
    /// length; its head stays 0).
    pub(super) head: u32,
    pub(super) len: u32,
    /// Buffers taken from the input so far: the next one's arrival index.
    pub(super) popped: u64,
    /// Buffers conveyed.
    pub(super) items: u64,
    /// An ordered group's next reorder slot to release.
    pub(super) out: u32,
    /// Instances not running a task (the top of the idle stack).
    pub(super) idle: u16,
    /// Its user code blocks (the latest sample of an instance's).
    pub(super) blocks: bool,
}

/// `N` values on one cache line of their own.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(super) struct Line<T, const N: usize>(pub(super) [T; N]);

/// A fixed array of small values packed `N` to a cache line.
pub(super) struct Packed<T, const N: usize>(pub(super) Box<[Line<T, N>]>);

impl<T: Copy, const N: usize> Packed<T, N> {
    pub(super) fn new(len: usize, fill: T) -> Self {
        Packed(vec![Line([fill; N]); len.div_ceil(N)].into_boxed_slice())
    }
}

impl<T, const N: usize> Index<usize> for Packed<T, N> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.0[i / N].0[i % N]
    }
}

impl<T, const N: usize> IndexMut<usize> for Packed<T, N> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.0[i / N].0[i % N]
    }
}

/// Everything the lock guards: the run's scalars beside the lock word
/// (module doc, "Layout"); 56 bytes, so that with the lock it fills one
/// line.
pub(super) struct State {
    /// The round the source fills next.
    pub(super) next_round: u64,
    /// The stream's round count once the source has ended it, else
    /// `u64::MAX`.
    pub(super) total: u64,
    pub(super) groups: Packed<Counters, 2>,
    /// Every queue's ids: per group its input ring, idle stack and reorder
    /// ring (`GroupRt` says where).
    pub(super) ids: Packed<u32, 16>,
    pub(super) parked: u16,
    /// Wake-ups issued and not yet taken by a returning worker.
    pub(super) notified: u16,
    /// Workers watching `epoch` before they park.
    pub(super) spinning: u16,
    /// A task failed or a worker panicked (the error is in [`Cold`]).
    pub(super) failed: bool,
}

/// A picked task: an instance of group `group` (its id) and the input
/// depth left behind; its batch is in the worker's vector.
pub(super) struct Pick {
    pub(super) group: usize,
    pub(super) inst: u32,
    /// Group 0: the first round it fills.
    pub(super) round: u64,
    pub(super) depth: usize,
}

/// What a finished task reports.
pub(super) struct Done {
    /// Group 0: buffers filled (the rest of the batch goes back unused).
    pub(super) filled: usize,
    /// Group 0: the source ended the stream.
    pub(super) ended: bool,
    pub(super) error: Option<PipelineError>,
}

impl State {
    pub(super) fn over(&self, groups: &[GroupRt]) -> bool {
        self.failed || self.total == self.groups[groups.len() - 1].items
    }

    /// Computing tasks running now: the groups marked computing, their
    /// instances not idle.
    pub(super) fn computing(&self, groups: &[GroupRt], compute: usize) -> usize {
        if compute == usize::MAX {
            return 0; // no limit: nothing to count
        }
        (0..groups.len())
            .filter(|&g| !self.groups[g].blocks)
            .map(|g| groups[g].instances - usize::from(self.groups[g].idle))
            .sum()
    }

    /// Whether group `g` has a task to run (with `computing` computing
    /// tasks running, at most `compute` of them; module doc, "Blocking
    /// stages").
    pub(super) fn runnable(
        &self,
        g: usize,
        rt: &GroupRt,
        computing: usize,
        compute: usize,
    ) -> bool {
        let s = &self.groups[g];
        if s.idle == 0 || (!s.blocks && computing >= compute) {
            return false;
        }
        let len = u64::from(s.len);
        if g == 0 {
            return self.total == u64::MAX && len >= rt.repeat as u64;
        }
        len >= rt.repeat as u64 || (len > 0 && self.total == s.popped + len)
    }

    /// The protocol's invariant (module doc), checked whenever a worker
    /// lets go of the lock: if something is `runnable` and a worker is
    /// parked, a wake-up is on its way. Always on under `loom`.
    pub(super) fn check(&self, runnable: bool) {
        let broken = runnable && self.parked > 0 && self.notified == 0;
        if cfg!(any(loom, debug_assertions)) {
            assert!(
                !broken,
                "runnable work and a parked worker with no wake-up on its way"
            );
        }
    }

    pub(super) fn any_runnable(&self, groups: &[GroupRt], compute: usize) -> bool {
        let computing = self.computing(groups, compute);
        (0..groups.len()).any(|g| self.runnable(g, &groups[g], computing, compute))
    }

    /// Append `id` to group `g`'s input ring (`width` wide: it never holds
    /// more than the pool). Group 0's ring is the free stack: its head
    /// stays 0, so this pushes on top of it.
    pub(super) fn push_back(&mut self, rt: &GroupRt, g: usize, id: u32, width: usize) {
        let c = &mut self.groups[g];
        let mut at = c.head as usize + c.len as usize;
        if at >= width {
            at -= width;
        }
        c.len += 1;
        self.ids[rt.ring + at] = id;
    }

    /// Take a runnable task into `batch`, or `None` to park (see the
    /// module doc, "Blocking and computing workers"). `last` is the group
    /// whose task the caller just finished.
    pub(super) fn pick(
        &mut self,
        groups: &[GroupRt],
        last: Option<usize>,
        batch: &mut Vec<Held>,
        width: usize,
        compute: usize,
    ) -> Option<Pick> {
        let spare = self.parked > self.notified;
        let computing = self.computing(groups, compute);
        let runnable = |s: &Self, g: usize| s.runnable(g, &groups[g], computing, compute);
        let g = match last {
            // A spare worker can take the rest: keep to the same stage,
            // then to stages of the same kind (blocking or computing).
            Some(l) if spare => {
                let kind = self.groups[l].blocks;
                if runnable(self, l) {
                    l
                } else {
                    (0..groups.len())
                        .rev()
                        .find(|&g| self.groups[g].blocks == kind && runnable(self, g))?
                }
            }
            // No spare: a blocking stage (I/O) still keeps its worker, so
            // that it issues its next call at once; others go downstream
            // first.
            Some(l) if self.groups[l].blocks && runnable(self, l) => l,
            _ => (0..groups.len()).rev().find(|&g| runnable(self, g))?,
        };
        let rt = &groups[g];
        let c = &mut self.groups[g];
        c.idle -= 1;
        let inst = self.ids[rt.idle + c.idle as usize];
        batch.clear();
        let depth;
        if g == 0 {
            // The free stack's top `repeat` ids, bottom first.
            let c = &mut self.groups[0];
            c.len -= rt.repeat as u32;
            let at = rt.ring + c.len as usize;
            depth = c.len as usize;
            for k in 0..rt.repeat {
                batch.push(Held {
                    id: self.ids[at + k],
                    index: 0,
                    last: false,
                });
            }
        } else {
            let total = self.total;
            while batch.len() < rt.repeat && self.groups[g].len > 0 {
                let c = &mut self.groups[g];
                let at = c.head as usize;
                c.head = if at + 1 == width { 0 } else { at as u32 + 1 };
                c.len -= 1;
                let index = c.popped;
                c.popped += 1;
                let last = total == c.popped;
                batch.push(Held {
                    id: self.ids[rt.ring + at],
                    index,
                    last,
                });
            }
            depth = self.groups[g].len as usize;
        }
        Some(Pick {
            group: g,
            inst,
            round: self.next_round,
            depth,
        })
    }

    /// Pass a buffer that group `g` is done with to the next group (or back
    /// to the free pool after the last).
    pub(super) fn convey(&mut self, groups: &[GroupRt], g: usize, h: Held, width: usize) {
        self.groups[g].items += 1;
        if g + 1 == groups.len() {
            self.push_back(&groups[0], 0, h.id, width);
        } else if groups[g].ordered {
            let rt = &groups[g];
            let slot = rt.reorder + (h.index % width as u64) as usize;
            debug_assert!(self.ids[slot] == NONE, "reorder window overrun");
            self.ids[slot] = h.id;
            loop {
                let out = self.groups[g].out as usize;
                let slot = rt.reorder + out;
                let id = self.ids[slot];
                if id == NONE {
                    break;
                }
                self.ids[slot] = NONE;
                self.groups[g].out = if out + 1 == width { 0 } else { out as u32 + 1 };
                self.push_back(&groups[g + 1], g + 1, id, width);
            }
        } else {
            self.push_back(&groups[g + 1], g + 1, h.id, width);
        }
    }

    /// Finish a task: its buffers go on, its instance back to idle. A
    /// failed task's error comes back (for [`Shared::fail`]).
    pub(super) fn complete(
        &mut self,
        groups: &[GroupRt],
        p: &Pick,
        batch: &[Held],
        done: Done,
        blocks: bool,
        width: usize,
    ) -> Option<PipelineError> {
        let g = p.group;
        let c = &mut self.groups[g];
        // Under `loom` the kinds stay as set at the start (`run`).
        if !cfg!(loom) {
            c.blocks = blocks;
        }
        let at = groups[g].idle + c.idle as usize;
        c.idle += 1;
        self.ids[at] = p.inst;
        if done.error.is_some() {
            // The batch's buffers stay in the slab, unused.
            return done.error;
        }
        if g == 0 {
            // Unfilled buffers (the stream ended first) go back unused.
            for h in &batch[done.filled..] {
                self.push_back(&groups[0], 0, h.id, width);
            }
            self.next_round += done.filled as u64;
            if done.ended {
                // Before the last buffer moves on (the notice's count).
                self.total = self.next_round;
            }
        }
        for h in &batch[..done.filled] {
            self.convey(groups, g, *h, width);
        }
        None
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The hot state's packing (module doc, "Layout"): a field added to
    /// these that breaks it fails here.
    #[test]
    fn hot_state_fits_its_lines() {
        assert_eq!(std::mem::size_of::<Counters>(), 32);
        assert_eq!(std::mem::size_of::<Line<Counters, 2>>(), 64);
        assert_eq!(std::mem::align_of::<Line<Counters, 2>>(), 64);
        assert_eq!(std::mem::size_of::<Line<u32, 16>>(), 64);
        assert!(std::mem::size_of::<State>() <= 56);
        // The lock word and the scalars on one line.
        assert!(std::mem::size_of::<crate::sync::Mutex<State>>() <= 64);
        assert_eq!(
            std::mem::align_of::<crossbeam_utils::CachePadded<crate::sync::Mutex<State>>>(),
            128
        );
        // A task's batch entry: an id, not a buffer.
        assert_eq!(std::mem::size_of::<Held>(), 16);
    }

    #[test]
    fn packed_indexes_across_lines() {
        let mut p: Packed<u32, 16> = Packed::new(40, NONE);
        assert_eq!(p.0.len(), 3);
        for i in 0..40 {
            assert_eq!(p[i], NONE);
            p[i] = i as u32;
        }
        assert!((0..40).all(|i| p[i] == i as u32));
        assert_eq!(p.0[2].0[7], 39);
    }
}
