//! The run's state under its one lock, and the protocol's decisions on it:
//! which task a worker picks, where a finished task's buffers go (see the
//! parent module's doc, "Scheduling", "Forks and joins" and "Layout").

use std::ops::{Index, IndexMut};
use std::time::Duration;

use crate::error::PipelineError;
use crate::report::DepthSeries;
use crate::running::Blocking;
use crate::stage::{Source, Stage};

use super::graph::{Extra, ForkKind, ForkRt, Lane, Next, PipeIds};
use crate::stop::Stopper;

/// A buffer and what the framework knows about it (a slab entry).
pub(super) struct Buf<B> {
    pub(super) buf: B,
    pub(super) round: u64,
    /// Carries no data: the source's [`Flow::End`].
    pub(super) empty: bool,
}

/// A buffer in a task: its id in the slab, its arrival index at the
/// group, whether it is the group's last, and (after a route fork's task)
/// the branch it takes.
#[derive(Clone, Copy)]
pub(super) struct Held {
    pub(super) index: u64,
    pub(super) id: u32,
    pub(super) branch: u16,
    pub(super) last: bool,
}

/// One instance of a group's stages (one per replica).
pub(super) struct Inst<B> {
    pub(super) source: Option<Box<dyn Source<B>>>,
    pub(super) stages: Vec<Box<dyn Stage<B>>>,
    /// A fork's route or copy, or a gather's merge (a single instance's).
    pub(super) extra: Option<Extra<B>>,
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
    /// The group's stage names, the source's first in a source group.
    pub(super) stage_names: Vec<String>,
    pub(super) repeat: usize,
    /// Replicated and ordered: outputs go through the reorder ring.
    pub(super) ordered: bool,
    pub(super) instances: usize,
    /// The input ring (`width` ids; a source group's is the free stack).
    pub(super) ring: usize,
    /// The idle-instance stack (`instances` ids).
    pub(super) idle: usize,
    /// The reorder ring (`width` ids, [`NONE`] where empty), if `ordered`.
    pub(super) reorder: usize,
    pub(super) next: Next,
    /// Which count is the group's total: 0, the stream's; else a route
    /// fork's branch's.
    pub(super) scope: usize,
    /// A gather's merge group (not a row of the report).
    pub(super) merge: bool,
    /// The fork after the group, or the broadcast whose merge it runs.
    pub(super) fork: Option<usize>,
    /// A source group: its input ring is its pipeline's free stack.
    pub(super) source: bool,
    /// The pipeline it serves (a shared stage: the first that passes it,
    /// which names its `init` and `cleanup` failures), and all it serves,
    /// for the report.
    pub(super) pipe: usize,
    pub(super) pipes: Vec<usize>,
    /// A shared stage: per pipeline its lane (`graph::NO_LANE` where it
    /// does not pass); empty for other groups.
    pub(super) lanes: Box<[u32]>,
    /// A source group: the pipeline whose source a scan tries first after
    /// this one's (the next).
    pub(super) next_turn: u32,
}

/// A pipeline of the run (see `graph.rs`, [`PipeIds`]).
pub(super) struct PipeRt {
    pub(super) name: String,
    pub(super) ids: PipeIds,
    /// Asked by its source's task before each fill.
    pub(super) stopper: Stopper,
}

/// A lane of a shared stage at run time: its counters are
/// `State::groups[lane_at + lane]`.
pub(super) struct LaneRt {
    pub(super) lane: Lane,
    /// Its reorder ring (`width` ids) if ordered.
    pub(super) reorder: usize,
}

/// What does not change during the run: the groups and forks, and the id
/// space (see `graph.rs`).
pub(super) struct Plan {
    pub(super) groups: Vec<GroupRt>,
    pub(super) forks: Vec<ForkRt>,
    /// Every ring's width: the roots (buffers and notices).
    pub(super) width: usize,
    /// Every id's root.
    pub(super) roots: Vec<u32>,
    /// Position slots per id (fork nesting levels).
    pub(super) depths: usize,
    /// The id array's region of positions: `depths` per id.
    pub(super) seqs: usize,
    pub(super) pipes: Vec<PipeRt>,
    /// Every id's pipeline.
    pub(super) pipe_of: Box<[u32]>,
    /// The shared stages' lanes; their counters follow the groups' and the
    /// joins' (from `lane_at`).
    pub(super) lanes: Vec<LaneRt>,
    pub(super) lane_at: usize,
    /// The groups but the sources, upstream first (every scan "downstream
    /// first" goes backwards through it, then through the sources, in
    /// turn).
    pub(super) order: Vec<usize>,
}

impl Plan {
    /// The source group of `id`'s pipeline (whose input is its free stack).
    fn free_of(&self, id: u32) -> usize {
        self.pipes[self.pipe_of[id as usize] as usize].ids.source
    }
}

/// An empty reorder slot.
pub(super) const NONE: u32 = u32::MAX;

/// A group's counters (under the run's lock): 32 bytes, two to a line.
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub(super) struct Counters {
    /// The input ring's first id and length (a source group: the free
    /// stack's length; its head stays 0).
    pub(super) head: u32,
    pub(super) len: u32,
    /// Buffers taken from the input so far: the next one's arrival index
    /// (a source group: the rounds filled, so the round it fills next; a
    /// shared stage: of every pipeline, its lanes count each one's).
    pub(super) popped: u64,
    /// How many buffers will reach the input, once known (else
    /// `u64::MAX`): the notice goes with the pop that takes the last (a
    /// source group: the stream's round count once it has ended).
    pub(super) total: u64,
    /// An ordered group's (or a join's) next reorder slot to release.
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
    /// Per group, then per fork (its join's release position), then per
    /// lane of a shared stage.
    pub(super) groups: Packed<Counters, 2>,
    /// Every queue's ids: per group its input ring, idle stack and reorder
    /// ring (`GroupRt` says where), per fork its join's region, and each
    /// id's positions at the forks it passed.
    pub(super) ids: Packed<u32, 16>,
    pub(super) parked: u16,
    /// Wake-ups issued and not yet taken by a returning worker.
    pub(super) notified: u16,
    /// Workers watching `epoch` before they park.
    pub(super) spinning: u16,
    /// At most this many tasks run at once (the sizing policy's; module
    /// doc, "Blocking stages"); `u16::MAX`: no limit.
    pub(super) limit: u16,
    /// A task failed or a worker panicked (the error is in [`Cold`]).
    pub(super) failed: bool,
    /// The pipeline whose source a scan tries first: the sources take
    /// turns (module doc, "Shared stages").
    pub(super) turn: u32,
    /// Pipelines whose stream has not ended yet.
    pub(super) open: u32,
}

/// A picked task: an instance of group `group` (its id) and the input
/// depth left behind; its batch is in the worker's vector.
pub(super) struct Pick {
    pub(super) group: usize,
    pub(super) inst: u32,
    /// A source group: the first round it fills.
    pub(super) round: u64,
    pub(super) depth: usize,
}

/// What a finished task reports.
pub(super) struct Done {
    /// A source group: buffers filled (the rest of the batch goes back
    /// unused).
    pub(super) filled: usize,
    /// A source group: the source ended the stream.
    pub(super) ended: bool,
    pub(super) error: Option<PipelineError>,
}

impl State {
    /// The run is over: failed, or every pipeline's stream ended and every
    /// root (its buffers, and the notices dropped at their joins) is back
    /// in its free stack.
    pub(super) fn over(&self, plan: &Plan) -> bool {
        self.failed
            || (self.open == 0
                && plan
                    .pipes
                    .iter()
                    .all(|p| self.groups[p.ids.source].len as usize == p.ids.roots))
    }

    /// Tasks running now, and of them the computing ones (the groups
    /// marked computing, their instances not idle).
    pub(super) fn load(&self, groups: &[GroupRt], compute: usize) -> (usize, usize) {
        if compute == usize::MAX && self.limit == u16::MAX {
            return (0, 0); // no limit: nothing to count
        }
        let (mut running, mut computing) = (0, 0);
        for (g, rt) in groups.iter().enumerate() {
            let busy = rt.instances - usize::from(self.groups[g].idle);
            running += busy;
            if !self.groups[g].blocks {
                computing += busy;
            }
        }
        (running, computing)
    }

    /// Whether group `g` has a task to run (with `load` tasks running, at
    /// most `limit` of them, and at most `compute` computing ones; module
    /// doc, "Blocking stages").
    pub(super) fn runnable(
        &self,
        g: usize,
        rt: &GroupRt,
        (running, computing): (usize, usize),
        compute: usize,
    ) -> bool {
        let s = &self.groups[g];
        if s.idle == 0 || running >= usize::from(self.limit) || (!s.blocks && computing >= compute)
        {
            return false;
        }
        let len = u64::from(s.len);
        if rt.source {
            return s.total == u64::MAX && len >= rt.repeat as u64;
        }
        len >= rt.repeat as u64 || (len > 0 && s.total == s.popped + len)
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
        let load = self.load(groups, compute);
        (0..groups.len()).any(|g| self.runnable(g, &groups[g], load, compute))
    }

    /// After a change that may have made work runnable: whether a parked
    /// worker must be woken for it (counted as notified here; the caller
    /// notifies after dropping the lock), with the no-lost-wake-up check.
    pub(super) fn claim_wake(&mut self, groups: &[GroupRt], compute: usize) -> bool {
        let more = self.any_runnable(groups, compute);
        let wake = more && self.parked > self.notified;
        if wake {
            self.notified += 1;
        }
        self.check(more);
        wake
    }

    /// Append `id` to group `g`'s input ring (`width` wide: it never holds
    /// more than the roots). A source group's ring is the free stack: its
    /// head stays 0, so this pushes on top of it.
    pub(super) fn push_back(&mut self, rt: &GroupRt, g: usize, id: u32, width: usize) {
        let c = &mut self.groups[g];
        let mut at = c.head as usize + c.len as usize;
        if at >= width {
            at -= width;
        }
        c.len += 1;
        self.ids[rt.ring + at] = id;
    }

    /// The first group `ok` takes, downstream first, the sources last and
    /// in turn (module doc, "Shared stages").
    fn scan(&self, plan: &Plan, ok: impl Fn(&Self, usize) -> bool) -> Option<usize> {
        let found = plan.order.iter().rev().copied().find(|&g| ok(self, g));
        found.or_else(|| {
            let (first, rest) = plan.pipes.split_at(self.turn as usize);
            rest.iter()
                .chain(first)
                .map(|p| p.ids.source)
                .find(|&g| ok(self, g))
        })
    }

    /// Take a runnable task into `batch`, or `None` to park (see the
    /// module doc, "Blocking and computing workers"). `last` is the group
    /// whose task the caller just finished.
    pub(super) fn pick(
        &mut self,
        plan: &Plan,
        last: Option<usize>,
        batch: &mut Vec<Held>,
        compute: usize,
    ) -> Option<Pick> {
        let (groups, width) = (&plan.groups, plan.width);
        let spare = self.parked > self.notified;
        let load = self.load(groups, compute);
        let runnable = |s: &Self, g: usize| s.runnable(g, &groups[g], load, compute);
        let g = match last {
            // A spare worker can take the rest: keep to the same stage,
            // then to stages of the same kind (blocking or computing).
            Some(l) if spare => {
                let kind = self.groups[l].blocks;
                if runnable(self, l) {
                    l
                } else {
                    self.scan(plan, |s, g| s.groups[g].blocks == kind && runnable(s, g))?
                }
            }
            // No spare: a blocking stage (I/O) still keeps its worker, so
            // that it issues its next call at once; others go downstream
            // first.
            Some(l) if self.groups[l].blocks && runnable(self, l) => l,
            _ => self.scan(plan, runnable)?,
        };
        let rt = &groups[g];
        let c = &mut self.groups[g];
        c.idle -= 1;
        let inst = self.ids[rt.idle + c.idle as usize];
        batch.clear();
        let depth;
        let mut round = 0;
        if rt.source {
            // The free stack's top `repeat` ids, bottom first.
            // The next pipeline's source is tried first next time.
            self.turn = rt.next_turn;
            let c = &mut self.groups[g];
            round = c.popped;
            c.len -= rt.repeat as u32;
            let at = rt.ring + c.len as usize;
            depth = c.len as usize;
            for k in 0..rt.repeat {
                batch.push(Held {
                    index: 0,
                    id: self.ids[at + k],
                    branch: 0,
                    last: false,
                });
            }
        } else {
            while batch.len() < rt.repeat && self.groups[g].len > 0 {
                let c = &mut self.groups[g];
                let at = c.head as usize;
                c.head = if at + 1 == width { 0 } else { at as u32 + 1 };
                c.len -= 1;
                c.popped += 1;
                let id = self.ids[rt.ring + at];
                // A shared stage counts each pipeline's buffers in its lane.
                let c = if rt.lanes.is_empty() {
                    c
                } else {
                    let lane = rt.lanes[plan.pipe_of[id as usize] as usize] as usize;
                    let c = &mut self.groups[plan.lane_at + lane];
                    c.popped += 1;
                    c
                };
                batch.push(Held {
                    index: c.popped - 1,
                    id,
                    branch: 0,
                    last: c.total == c.popped,
                });
            }
            depth = self.groups[g].len as usize;
        }
        Some(Pick {
            group: g,
            inst,
            round,
            depth,
        })
    }

    /// Id `id`'s position at the fork of depth `d` (modulo the width: it
    /// only picks a reorder slot).
    fn seq(&self, plan: &Plan, id: u32, d: usize) -> usize {
        self.ids[plan.seqs + id as usize * plan.depths + d] as usize
    }

    /// Give every group (and shared stage's lane) of scope `scope` its
    /// total.
    fn set_totals(&mut self, plan: &Plan, scope: usize, total: u64) {
        for (g, rt) in plan.groups.iter().enumerate() {
            if rt.scope == scope {
                self.groups[g].total = total;
            }
        }
        for (l, lane) in plan.lanes.iter().enumerate() {
            if lane.lane.scope == scope {
                self.groups[plan.lane_at + l].total = total;
            }
        }
    }

    /// Pass a buffer that group `g` is done with on: through its reorder
    /// ring if it keeps an order, then to its `next`.
    pub(super) fn convey(&mut self, plan: &Plan, g: usize, h: Held) {
        let rt = &plan.groups[g];
        if rt.ordered {
            self.reorder(plan, rt.reorder, g, h, rt.next);
        } else if let Next::Fork(f) = rt.next {
            self.fork(plan, f, h);
        } else if let Next::Lanes = rt.next {
            // A shared stage: on along the buffer's own pipeline.
            let l = rt.lanes[plan.pipe_of[h.id as usize] as usize] as usize;
            let lane = &plan.lanes[l];
            if lane.lane.ordered {
                self.reorder(plan, lane.reorder, plan.lane_at + l, h, lane.lane.next);
            } else {
                self.send(plan, lane.lane.next, h.id);
            }
        } else {
            self.send(plan, rt.next, h.id);
        }
    }

    /// Put `h` into the reorder ring at `region` (its release position in
    /// counter `at`), and send what is now in order on to `next`.
    fn reorder(&mut self, plan: &Plan, region: usize, at: usize, h: Held, next: Next) {
        let width = plan.width;
        let slot = region + (h.index % width as u64) as usize;
        debug_assert!(self.ids[slot] == NONE, "reorder window overrun");
        self.ids[slot] = h.id;
        loop {
            let out = self.groups[at].out as usize;
            let slot = region + out;
            let id = self.ids[slot];
            if id == NONE {
                break;
            }
            self.ids[slot] = NONE;
            self.groups[at].out = if out + 1 == width { 0 } else { out as u32 + 1 };
            self.send(plan, next, id);
        }
    }

    /// Deliver `id` to `next` (never a fork: only its group forks).
    fn send(&mut self, plan: &Plan, next: Next, id: u32) {
        let width = plan.width;
        match next {
            Next::Group(h) => self.push_back(&plan.groups[h], h, id, width),
            Next::Free(src) => self.push_back(&plan.groups[src], src, id, width),
            Next::Fork(_) | Next::Lanes => unreachable!("a fork or lanes are a group's next only"),
            Next::Join(f) => {
                let fk = &plan.forks[f];
                if fk.own_notice(id) {
                    // Its branch has had its last-buffer notice.
                    return self.send(plan, Next::Free(plan.free_of(id)), id);
                }
                let ForkKind::Route { ordered: true, .. } = fk.kind else {
                    return self.send(plan, fk.after, id);
                };
                let slot = fk.region + self.seq(plan, id, fk.depth);
                debug_assert!(self.ids[slot] == NONE, "join window overrun");
                self.ids[slot] = id;
                let j = plan.groups.len() + f;
                loop {
                    let out = self.groups[j].out as usize;
                    let id = self.ids[fk.region + out];
                    if id == NONE {
                        break;
                    }
                    self.ids[fk.region + out] = NONE;
                    self.groups[j].out = if out + 1 == width { 0 } else { out as u32 + 1 };
                    self.send(plan, fk.after, id);
                }
            }
            Next::Gather(f, b) => {
                let fk = &plan.forks[f];
                let ForkKind::Broadcast { merge, .. } = fk.kind else {
                    unreachable!("a gather belongs to a broadcast");
                };
                let at = self.seq(plan, id, fk.depth);
                if b == 0 {
                    self.ids[fk.region + width + at] = id;
                }
                self.ids[fk.region + at] += 1;
                let n = fk.branches.len() as u32;
                let j = plan.groups.len() + f;
                loop {
                    let out = self.groups[j].out as usize;
                    if self.ids[fk.region + out] < n {
                        break;
                    }
                    self.ids[fk.region + out] = 0;
                    let orig = self.ids[fk.region + width + out];
                    self.groups[j].out = if out + 1 == width { 0 } else { out as u32 + 1 };
                    self.push_back(&plan.groups[merge], merge, orig, width);
                }
            }
        }
    }

    /// Fork `f`'s convey of its group's buffer `h`: note its position at
    /// the fork, then down the branch its task chose (route; at the last
    /// buffer, set the branches' totals and send the others a notice) or
    /// down every branch, copies to all but branch 0 (broadcast).
    fn fork(&mut self, plan: &Plan, f: usize, h: Held) {
        let fk = &plan.forks[f];
        let (width, depths) = (plan.width, plan.depths);
        let d = fk.depth;
        self.ids[plan.seqs + h.id as usize * depths + d] = (h.index % width as u64) as u32;
        // A notice or a copy carries the original's positions.
        let inherit = |s: &mut Self, to: u32| {
            for k in 0..depths {
                s.ids[plan.seqs + to as usize * depths + k] =
                    s.ids[plan.seqs + h.id as usize * depths + k];
            }
        };
        match fk.kind {
            ForkKind::Route { notices, .. } => {
                let chosen = usize::from(h.branch);
                if h.last {
                    let mut next_notice = notices;
                    for (b, &first) in fk.branches.iter().enumerate() {
                        let c = &self.groups[first];
                        self.set_totals(plan, fk.scopes + b, c.popped + u64::from(c.len) + 1);
                        if b != chosen {
                            inherit(self, next_notice);
                            self.push_back(&plan.groups[first], first, next_notice, width);
                            next_notice += 1;
                        }
                    }
                }
                let first = fk.branches[chosen];
                self.push_back(&plan.groups[first], first, h.id, width);
            }
            ForkKind::Broadcast { copies, .. } => {
                let per = fk.branches.len() - 1;
                let base = copies as usize + plan.roots[h.id as usize] as usize * per;
                for (b, &first) in fk.branches.iter().enumerate().skip(1) {
                    let c = (base + b - 1) as u32;
                    inherit(self, c);
                    self.push_back(&plan.groups[first], first, c, width);
                }
                let first = fk.branches[0];
                self.push_back(&plan.groups[first], first, h.id, width);
            }
        }
    }

    /// Finish a task: its buffers go on, its instance back to idle. A
    /// failed task's error comes back (for [`Shared::fail`]).
    pub(super) fn complete(
        &mut self,
        plan: &Plan,
        p: &Pick,
        batch: &[Held],
        done: Done,
        blocks: bool,
    ) -> Option<PipelineError> {
        let g = p.group;
        let groups = &plan.groups;
        let width = plan.width;
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
        if groups[g].source {
            // Unfilled buffers (the stream ended first) go back unused.
            for h in &batch[done.filled..] {
                self.push_back(&groups[g], g, h.id, width);
            }
            self.groups[g].popped += done.filled as u64;
            if done.ended {
                // Before the last buffer moves on (the notice's count).
                let total = self.groups[g].popped;
                self.set_totals(plan, groups[g].scope, total);
                self.open -= 1;
            }
        }
        for h in &batch[..done.filled] {
            self.convey(plan, g, *h);
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
