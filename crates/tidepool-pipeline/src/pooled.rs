//! Pooled execution: any worker runs any stage (oneTBB `parallel_pipeline`
//! style), on a fixed number of workers — by default one per core — instead
//! of a thread per stage.
//!
//! # Why
//!
//! With a thread per stage, a pipeline of four stages on two cores pays a
//! context switch per hand-off, and the kernel may leave a woken stage
//! thread queued behind a busy one while the other core idles. Here a
//! hand-off is a push under a lock: the worker that finishes a buffer in
//! one stage usually runs the next stage on it itself, and a worker parks
//! only when nothing at all is runnable.
//!
//! # Model
//!
//! A thread group (a stage and the stages fused to it with `then` or
//! `then_each`, or the source and its fused stages) is a *task kind*. A
//! group has as many *instances* as it has replicas (one unless
//! replicated); an instance holds the group's stage states. A task is one
//! instance taking one batch (`repeat` buffers, fewer for the stream's
//! tail) from the group's input: the source group's input is the free
//! pool, every other group's the previous group's output. So every group
//! runs at most its replica count of batches at once and, with one
//! instance, one batch at a time in input order, exactly as its threads
//! would. An ordered replicated group's outputs pass through a reorder
//! ring keyed by input index, as in thread-per-stage mode. The last-buffer
//! notice goes with the pop that takes a group's `total`-th buffer, where
//! `total` is the stream's round count, set by the source's task before it
//! conveys its last buffer (every group sees every round: pooled pipelines
//! have no forks). The run ends when the last group has conveyed `total`
//! buffers, or at the first failure.
//!
//! # Scheduling
//!
//! One lock guards the whole run's state (the inputs, idle instances, the
//! free pool and the counters; "Layout" below): a task takes it once to start (pick) and
//! once to finish (convey its buffers, give its instance back), and the
//! finishing worker picks its next task in the same critical section. A
//! worker picks the most downstream runnable group first: that frees
//! buffers and keeps the stream drained; the source comes last.
//!
//! **Blocking and computing workers.** Each group's user code is sampled,
//! as a stage thread's is (`running.rs`, [`Blocking`]: one call in
//! `SAMPLE`, by the thread's voluntary context switches), and marked
//! *blocking* or *computing*. While a spare worker is parked (one with no
//! wake-up on its way), a worker that has just finished a task keeps to
//! what it was doing: the same group if it is runnable again, else the most
//! downstream runnable group of the same kind; if there is none, it wakes
//! the spare for the other kind and parks. Without a spare it keeps a
//! blocking group that is runnable again (an I/O stage issues its next call
//! at once, as its own thread would), and otherwise takes any task,
//! downstream first. So with the cores plus one worker per blocking
//! stage, the blocking stages settle on workers of their own that mostly
//! sleep in I/O, the way stage threads would, and the computing stages on
//! the others. Measured (`docs/benchmarks.md`): when a worker
//! also ran the compute stage between its reads or writes, each 200 µs
//! sleep took ~290 µs instead of ~270 µs (the worker woke from it later),
//! and the blocking shape reached 86–90% of its bound instead of 93–98%.
//!
//! # Sleeping and waking (why no wake-up is lost, and none is wasted)
//!
//! A worker parks (waits on the run's condition variable, counted in
//! `parked`) only after it has found, under the lock, that nothing is
//! runnable for it. Work becomes runnable only under the lock, by a worker
//! finishing a task (or by the end of the run): so a parked worker never
//! misses runnable work that existed when it parked.
//!
//! A worker that declines the runnable tasks (they are of the other kind,
//! above) wakes a spare worker first, so it parks only with a wake-up on
//! its way to the work it left; a woken worker has no kind and takes any
//! task.
//!
//! A worker that leaves the lock holding a task wakes one more worker if,
//! after its own pick, something is still runnable, a worker is parked and
//! no wake-up is already on its way (`parked > notified`; `notified` counts
//! wake-ups issued and not yet taken by a returning waiter, so it never
//! exceeds `parked`). The woken worker does the same after its own pick:
//! wake-ups chain, one per runnable task, and never more than the work
//! needs (no thundering herd). That gives the invariant the `loom` model
//! checks at every such release: *if something is runnable and a worker
//! is parked, a wake-up is on its way.* A worker that finishes a task and
//! finds exactly one runnable task takes it itself and wakes nobody: the
//! common hand-off costs no wake-up at all.
//!
//! **A spin before parking.** When nothing at all is runnable and there
//! are no more workers than cores, a worker first watches, without the
//! lock, a counter that every finished task bumps while a worker spins
//! (`epoch`; the spinners are counted under the lock, so that a task
//! finished with nobody spinning touches no line of it), for at most
//! [`SPIN`] once per park; if it moves, the worker takes the lock and looks
//! again. This is outside the protocol: a spinning worker is not parked,
//! decides nothing from what it saw, and parks, if it does, only after
//! looking again under the lock. It saves the park and wake-up when the
//! other workers' tasks are about to make work runnable (a pipeline mapped
//! onto as many groups as cores, `then`), and it never takes a core from a
//! worker of the same run (there are no more workers than cores). Not under
//! `loom` (whose model is the protocol).
//!
//! **Scheduling classes.** A wake-up must not cost the worker that issues
//! it. On Linux a woken thread may preempt its waker when the kernel puts
//! it on the waker's CPU (EEVDF's wake-up preemption), and on a loaded
//! machine it often does. Measured (`docs/notebook/pipelines.md`), on the blocking shape: the reader, having conveyed its buffer and
//! woken a spare for the compute stage, lost its CPU to that spare for the
//! whole 60 µs compute call before it could issue its next read in 14% of
//! the items (14–20 µs per item on average, on the limiting stage); on two
//! workers for two fused compute groups, when another process held a core,
//! the same preemption cost a context switch per item. So a worker runs computing groups, and
//! waits parked, in `SCHED_BATCH` (the kernel's class for CPU-bound
//! threads: one that wakes never preempts the running thread, it takes a
//! free CPU or waits for the running one's slice to end), and takes
//! `SCHED_OTHER` back to run a blocking group, so that the end of an I/O
//! call still preempts a computing worker, as a stage thread's would. A
//! worker switches only when the kind of its task changes, and before it
//! parks, always outside the lock (a worker that switched before parking
//! looks again, as after a spin); the workers mostly keep to their kinds
//! (above): 6% of the tasks changed kind on the blocking shape. This
//! decides which thread the kernel runs first, never what the protocol
//! decides; under `loom` the switches are bookkeeping only, so that the
//! model covers the lock let go and taken again before a park. Workers
//! switch only when the thread calling `run` is in `SCHED_OTHER`, the
//! default: a caller that chose a class keeps it for
//! every worker. The calling thread (worker 0) gets `SCHED_OTHER` back at
//! the end; a switch the OS refuses turns switching off for that worker.
//!
//! The end (done or failed) wakes every parked worker (`notify_all`), and a
//! worker checks for it under the lock before it parks, so every worker
//! returns. A worker that returns from its wait takes one pending wake-up
//! (whichever worker it was meant for), and looks again.
//!
//! # Layout
//!
//! A hand-off moves as few cache lines between cores as it can. The lock
//! word and the run's scalars (`next_round`, `total`, `parked`,
//! `notified`, the spinner count, a failed flag) fill one line of their
//! own. Each group's counters (its input ring's head and length,
//! `popped`, `items`, idle-instance count, reorder position, kind) are 32
//! bytes, two groups to a line. The queues carry small ids, not buffers or
//! instances: every group's input ring, idle-instance stack and reorder
//! ring, and the free stack, are regions of one packed id array. So a pick
//! or a completion writes a few bytes on three or four lines, and scanning
//! every group for runnable work reads one line per two groups.
//!
//! Buffers and instances stay in place, in slabs indexed by id; each entry
//! has a lock of its own, never contended: an id is in exactly one place at
//! a time — a queue, or the batch of the one task that took it under the
//! run's lock — and only that task locks the entry, after letting go of the
//! run's lock and before handing the id on under it. Cold things are off
//! the hot lines: the error (the flag says the run failed), the workers'
//! idle and CPU time (per worker, summed at the end), the depth samples
//! (recorded by the instance that ran the pick, with the clock read that
//! starts the task, and merged by time at the end). A worker keeps its
//! batch in a vector of its own: a task allocates nothing.
//!
//! # Blocking stages
//!
//! A worker blocked in a stage's I/O is a worker lost to the others: with
//! as many workers as cores, two blocking stages can leave no worker to
//! compute. Give such a pipeline more workers ([`crate::Builder::pooled_threads`],
//! e.g. the cores plus one per blocking stage). The worker count does not
//! size itself.
//!
//! # What differs from thread-per-stage mode
//!
//! A stage's `init` runs on the thread that calls `run`, for every
//! instance, before any worker starts; `cleanup` runs there too, after
//! every worker has been joined. `process` runs on whichever worker holds
//! the instance (stages are `Send`). Stages never wait in this mode, so the
//! report's wait columns are zero; the workers' idle time (parked with
//! nothing runnable) and CPU time are in the report's notes.

use std::ops::{DerefMut, Index, IndexMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::builder::{Builder, Order, Replicas};
use crate::error::{panic_message, Cause, PipelineError, Step};
use crate::report::{DepthSeries, PipelineReport, Report, StageReport};
use crate::run::guarded;
use crate::running::Blocking;
use crate::stage::{Context, Flow, Source, Stage};
use crate::sync::{lock, Condvar, Mutex, MutexGuard, Padded};
use crate::sys::SchedClass;

/// A buffer and what the framework knows about it (a slab entry).
struct Buf<B> {
    buf: B,
    round: u64,
    /// Carries no data: the source's [`Flow::End`].
    empty: bool,
}

/// A buffer in a task: its id in the slab, its arrival index at the
/// group, and whether it is the group's last.
#[derive(Clone, Copy)]
struct Held {
    id: u32,
    index: u64,
    last: bool,
}

/// One instance of a group's stages (one per replica).
struct Inst<B> {
    source: Option<Box<dyn Source<B>>>,
    stages: Vec<Box<dyn Stage<B>>>,
    replica: usize,
    /// Of the source and stages (in that order), how many `init`s succeeded.
    inited: usize,
    /// Busy time per stage name of the group.
    busy: Vec<Duration>,
    /// Whether the group's user code blocks (sampled, as a stage thread's).
    blocking: Blocking,
    /// The group's input depth at each of this instance's picks (merged
    /// by time at the end).
    depth: DepthSeries,
}

/// What does not change during the run: a group's description, and where
/// its id regions are in [`State::ids`].
struct GroupRt {
    name: String,
    /// The group's stage names, the source's first in group 0.
    stage_names: Vec<String>,
    repeat: usize,
    /// Replicated and ordered: outputs go through the reorder ring.
    ordered: bool,
    instances: usize,
    /// The input ring (`width` ids; group 0's is the free stack).
    ring: usize,
    /// The idle-instance stack (`instances` ids).
    idle: usize,
    /// The reorder ring (`width` ids, [`NONE`] where empty), if `ordered`.
    reorder: usize,
}

/// An empty reorder slot.
const NONE: u32 = u32::MAX;

/// A group's counters (under the run's lock): 32 bytes, two to a line.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Counters {
    /// The input ring's first id and length (group 0: the free stack's
    /// length; its head stays 0).
    head: u32,
    len: u32,
    /// Buffers taken from the input so far: the next one's arrival index.
    popped: u64,
    /// Buffers conveyed.
    items: u64,
    /// An ordered group's next reorder slot to release.
    out: u32,
    /// Instances not running a task (the top of the idle stack).
    idle: u16,
    /// Its user code blocks (the latest sample of an instance's).
    blocks: bool,
}

/// `N` values on one cache line of their own.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line<T, const N: usize>([T; N]);

/// A fixed array of small values packed `N` to a cache line.
struct Packed<T, const N: usize>(Box<[Line<T, N>]>);

impl<T: Copy, const N: usize> Packed<T, N> {
    fn new(len: usize, fill: T) -> Self {
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
struct State {
    /// The round the source fills next.
    next_round: u64,
    /// The stream's round count once the source has ended it, else
    /// `u64::MAX`.
    total: u64,
    groups: Packed<Counters, 2>,
    /// Every queue's ids: per group its input ring, idle stack and reorder
    /// ring (`GroupRt` says where).
    ids: Packed<u32, 16>,
    parked: u16,
    /// Wake-ups issued and not yet taken by a returning worker.
    notified: u16,
    /// Workers watching `epoch` before they park.
    spinning: u16,
    /// A task failed or a worker panicked (the error is in [`Cold`]).
    failed: bool,
}

/// A picked task: an instance of group `group` (its id) and the input
/// depth left behind; its batch is in the worker's vector.
struct Pick {
    group: usize,
    inst: u32,
    /// Group 0: the first round it fills.
    round: u64,
    depth: usize,
}

/// What a finished task reports.
struct Done {
    /// Group 0: buffers filled (the rest of the batch goes back unused).
    filled: usize,
    /// Group 0: the source ended the stream.
    ended: bool,
    error: Option<PipelineError>,
}

/// What the workers touch once per run, off the hot lines.
struct Cold {
    error: Option<PipelineError>,
    /// The workers' time parked, summed.
    idle: Duration,
    /// The workers' CPU time, summed (`None` if the OS does not tell).
    cpu: Option<Duration>,
}

/// The run, shared by the workers.
struct Shared<B> {
    /// The lock and the run's scalars, on lines of their own.
    state: Padded<Mutex<State>>,
    name: String,
    groups: Vec<GroupRt>,
    width: usize,
    cv: Condvar,
    start: Instant,
    /// The buffers, by id: an id is in exactly one place (a ring, the free
    /// stack or one task's batch), and only its holder locks the entry.
    bufs: Box<[Mutex<Buf<B>>]>,
    /// Each group's instances, by id (held by the idle stack or one task).
    insts: Vec<Box<[Mutex<Inst<B>>]>>,
    cold: Mutex<Cold>,
    /// Bumped after a finished task while a worker spins: its hint to look
    /// again (read without the lock; the lock decides).
    epoch: Padded<std::sync::atomic::AtomicU64>,
    /// Spin before parking (no more workers than cores).
    spin: bool,
    /// Workers switch between SCHED_BATCH and SCHED_OTHER (the caller's
    /// thread was in SCHED_OTHER; see "Scheduling classes").
    classes: bool,
}

/// A worker's scheduling class (module doc, "Scheduling classes").
struct Class {
    /// Switching is on (a refused switch turns it off for this worker).
    on: bool,
    /// In SCHED_BATCH (else SCHED_OTHER).
    batch: bool,
}

impl Class {
    /// Take SCHED_BATCH (`batch`) or SCHED_OTHER, if not in it already.
    fn take(&mut self, batch: bool) {
        if !self.on || self.batch == batch {
            return;
        }
        // Under `loom` a switch is bookkeeping only: the model covers the
        // worker's path around it (the lock let go before parking), not
        // the OS.
        if cfg!(loom) {
            self.batch = batch;
            return;
        }
        let c = if batch {
            SchedClass::Batch
        } else {
            SchedClass::Other
        };
        match crate::sys::set_sched_class(c) {
            Ok(()) => self.batch = batch,
            Err(_) => self.on = false,
        }
    }
}

/// How long a worker with nothing runnable watches `epoch` before it parks.
const SPIN: Duration = Duration::from_micros(30);

impl State {
    fn over(&self, groups: &[GroupRt]) -> bool {
        self.failed || self.total == self.groups[groups.len() - 1].items
    }

    fn runnable(&self, g: usize, rt: &GroupRt) -> bool {
        let s = &self.groups[g];
        if s.idle == 0 {
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
    fn check(&self, runnable: bool) {
        let broken = runnable && self.parked > 0 && self.notified == 0;
        if cfg!(any(loom, debug_assertions)) {
            assert!(
                !broken,
                "runnable work and a parked worker with no wake-up on its way"
            );
        }
    }

    fn any_runnable(&self, groups: &[GroupRt]) -> bool {
        (0..groups.len()).any(|g| self.runnable(g, &groups[g]))
    }

    /// Append `id` to group `g`'s input ring (`width` wide: it never holds
    /// more than the pool). Group 0's ring is the free stack: its head
    /// stays 0, so this pushes on top of it.
    fn push_back(&mut self, rt: &GroupRt, g: usize, id: u32, width: usize) {
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
    fn pick(
        &mut self,
        groups: &[GroupRt],
        last: Option<usize>,
        batch: &mut Vec<Held>,
        width: usize,
    ) -> Option<Pick> {
        let spare = self.parked > self.notified;
        let runnable = |s: &Self, g: usize| s.runnable(g, &groups[g]);
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
    fn convey(&mut self, groups: &[GroupRt], g: usize, h: Held, width: usize) {
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
    fn complete(
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

impl<B: Send + 'static> Shared<B> {
    fn err(&self, stage: &str, round: Option<u64>, step: Step, cause: Cause) -> PipelineError {
        PipelineError {
            pipeline: self.name.clone(),
            stage: stage.to_string(),
            round,
            step,
            cause,
        }
    }

    /// Fail the run (under its lock): the first failure's error is the
    /// run's.
    fn fail(&self, s: &mut State, e: PipelineError) {
        if !s.failed {
            s.failed = true;
            lock(&self.cold).error = Some(e);
        }
    }

    /// Run a task's user code (no run lock held); also says whether the
    /// group's user code blocks.
    fn run_task(&self, p: &Pick, batch: &mut [Held]) -> (Done, bool) {
        let rt = &self.groups[p.group];
        let done = Done {
            filled: batch.len(),
            ended: false,
            error: None,
        };
        let mut inst = lock(&self.insts[p.group][p.inst as usize]);
        let inst = &mut *inst;
        let sample = inst.blocking.before();
        // One clock read: the depth sample's time and the first busy mark.
        let mark = Instant::now();
        inst.depth
            .record(mark.duration_since(self.start).as_secs_f64(), p.depth);
        let done = self.run_user(rt, inst, batch, p.round, done, mark);
        inst.blocking.after(sample);
        (done, inst.blocking.blocks())
    }

    /// Run `f` on buffer `id`: through `one`, the batch's only buffer
    /// locked once for the whole task, or locked for the call.
    fn on_buf<R>(
        &self,
        one: &mut Option<MutexGuard<'_, Buf<B>>>,
        id: u32,
        f: impl FnOnce(&mut Buf<B>) -> R,
    ) -> R {
        match one {
            Some(b) => f(b),
            None => f(&mut lock(&self.bufs[id as usize])),
        }
    }

    fn run_user(
        &self,
        rt: &GroupRt,
        inst: &mut Inst<B>,
        batch: &mut [Held],
        round: u64,
        mut done: Done,
        mut mark: Instant,
    ) -> Done {
        let mut one = (batch.len() == 1).then(|| lock(&self.bufs[batch[0].id as usize]));
        let mut first = 0;
        if let Some(src) = inst.source.as_mut() {
            first = 1;
            for (i, h) in batch.iter_mut().enumerate() {
                let r = round + i as u64;
                let cx = Context::new(&rt.stage_names[0], &self.name, r, false, false, 0);
                let flow = self.on_buf(&mut one, h.id, |b| {
                    let flow = guarded(|| src.fill(&mut b.buf, &cx));
                    if let Ok(f) = flow {
                        b.round = r;
                        b.empty = f == Flow::End;
                    }
                    flow
                });
                let now = Instant::now();
                inst.busy[0] += now - mark;
                mark = now;
                match flow {
                    Ok(f) => {
                        h.index = r;
                        if f != Flow::More {
                            h.last = true;
                            done.filled = i + 1;
                            done.ended = true;
                            break;
                        }
                    }
                    Err(c) => {
                        done.error = Some(self.err(&rt.stage_names[0], Some(r), Step::Process, c));
                        return done;
                    }
                }
            }
        }
        let filled = done.filled;
        for (i, stage) in inst.stages.iter_mut().enumerate() {
            let name = &rt.stage_names[first + i];
            for h in batch[..filled].iter() {
                let r = self.on_buf(&mut one, h.id, |b| {
                    let cx = Context::new(name, &self.name, b.round, h.last, b.empty, inst.replica);
                    guarded(|| stage.process(&mut b.buf, &cx)).map_err(|c| (c, b.round))
                });
                let now = Instant::now();
                inst.busy[first + i] += now - mark;
                mark = now;
                if let Err((c, round)) = r {
                    done.error = Some(self.err(name, Some(round), Step::Process, c));
                    return done;
                }
            }
        }
        done
    }

    /// One worker: take tasks while any is runnable, park when none is,
    /// return at the end of the run.
    fn worker(&self) {
        let cpu0 = crate::sys::thread_cpu_time();
        let mut idle = Duration::ZERO;
        let most = self.groups.iter().map(|g| g.repeat).max().unwrap_or(1);
        let mut batch: Vec<Held> = Vec::with_capacity(most);
        let mut s = lock(&self.state.0);
        let mut last = None;
        let mut spun = false;
        let mut class = Class {
            on: self.classes,
            batch: false,
        };
        loop {
            if s.over(&self.groups) {
                break;
            }
            let prev = last.take();
            if let Some(p) = s.pick(&self.groups, prev, &mut batch, self.width) {
                let computing = !s.groups[p.group].blocks;
                let more = s.any_runnable(&self.groups);
                let wake = more && s.parked > s.notified;
                if wake {
                    s.notified += 1;
                }
                s.check(more);
                drop(s);
                if wake {
                    self.cv.notify_one();
                }
                class.take(computing);
                let (done, blocks) = self.run_task(&p, &mut batch);
                last = Some(p.group);
                s = lock(&self.state.0);
                if let Some(e) = s.complete(&self.groups, &p, &batch, done, blocks, self.width) {
                    self.fail(&mut s, e);
                }
                if s.spinning > 0 {
                    self.epoch
                        .0
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                spun = false;
                if s.over(&self.groups) && s.parked > 0 {
                    self.cv.notify_all();
                }
                continue;
            }
            // Nothing runnable at all, and a worker that is running may
            // finish soon: watch for a finished task a little first
            // (counted in `spinning`, so that finishing tasks bump `epoch`).
            if self.spin && !spun && !s.any_runnable(&self.groups) {
                spun = true;
                s.spinning += 1;
                let seen = self.epoch.0.load(std::sync::atomic::Ordering::Relaxed);
                drop(s);
                let t = Instant::now();
                let mut n = 0u32;
                while self.epoch.0.load(std::sync::atomic::Ordering::Relaxed) == seen {
                    std::hint::spin_loop();
                    n += 1;
                    if n.is_multiple_of(64) && t.elapsed() >= SPIN {
                        break;
                    }
                }
                s = lock(&self.state.0);
                s.spinning -= 1;
                idle += t.elapsed();
                continue;
            }
            // Nothing runnable for this worker: what is runnable (of the
            // other kind) goes to a spare worker, woken here.
            let wake = s.any_runnable(&self.groups) && s.parked > s.notified;
            if wake {
                s.notified += 1;
                self.cv.notify_one();
            }
            // A parked worker waits in SCHED_BATCH: its wake-up will not
            // preempt the worker that issues it (the syscall outside the
            // lock, then a new look).
            if class.on && !class.batch {
                drop(s);
                class.take(true);
                s = lock(&self.state.0);
                last = prev;
                continue;
            }
            s.parked += 1;
            s.check(s.any_runnable(&self.groups));
            let t = Instant::now();
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
            spun = false;
            s.parked -= 1;
            s.notified = s.notified.saturating_sub(1);
            idle += t.elapsed();
        }
        drop(s);
        let cpu = match (cpu0, crate::sys::thread_cpu_time()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let mut cold = lock(&self.cold);
        cold.idle += idle;
        cold.cpu = match (cold.cpu, cpu) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }

    /// A framework panic in a worker (user code's are caught where it
    /// runs): fail the run so that every other worker returns. (Under
    /// `loom`, a panic is the model's finding: it goes through.)
    fn worker_guarded(&self) {
        if cfg!(loom) {
            return self.worker();
        }
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| self.worker())) {
            let e = self.err(
                &self.name,
                None,
                Step::Process,
                Cause::Panicked(format!("internal: {}", panic_message(&*p))),
            );
            let mut s = lock(&self.state.0);
            self.fail(&mut s, e);
            drop(s);
            self.cv.notify_all();
        }
    }
}

/// Make every instance, then `init` each (source first, then the stages
/// in order); stops at the first failure.
#[allow(clippy::type_complexity)]
fn make_instances<B: Send + 'static>(
    name: &str,
    spec: &mut Builder<B>,
    groups: &[GroupRt],
) -> (Vec<Vec<Inst<B>>>, Option<PipelineError>) {
    let err = |stage: &str, step, cause| PipelineError {
        pipeline: name.to_string(),
        stage: stage.to_string(),
        round: None,
        step,
        cause,
    };
    let mut source = spec.source.take().map(|(_, s)| s);
    let mut all = Vec::with_capacity(groups.len());
    for (g, (gs, rt)) in spec.groups.iter().zip(groups).enumerate() {
        let mut insts = Vec::with_capacity(rt.instances);
        for replica in 0..rt.instances {
            let mut stages = Vec::with_capacity(gs.stages.len());
            for s in &gs.stages {
                let made = catch_unwind(AssertUnwindSafe(|| {
                    (s.make.lock().unwrap_or_else(|p| p.into_inner()))()
                }));
                match made {
                    Ok(st) => stages.push(st),
                    Err(p) => {
                        all.push(insts);
                        let c = Cause::Panicked(panic_message(&*p));
                        return (all, Some(err(&s.name, Step::Init, c)));
                    }
                }
            }
            insts.push(Inst {
                source: if g == 0 { source.take() } else { None },
                stages,
                replica,
                inited: 0,
                busy: vec![Duration::ZERO; rt.stage_names.len()],
                blocking: Blocking::default(),
                depth: DepthSeries::new(),
            });
        }
        all.push(insts);
    }
    for (insts, rt) in all.iter_mut().zip(groups) {
        for inst in insts.iter_mut() {
            let mut names = rt.stage_names.iter();
            if let Some(src) = inst.source.as_mut() {
                let n = names.next().expect("the source's name");
                if let Err(c) = guarded(|| src.init()) {
                    return (all, Some(err(n, Step::Init, c)));
                }
                inst.inited += 1;
            }
            for (st, n) in inst.stages.iter_mut().zip(names) {
                if let Err(c) = guarded(|| st.init()) {
                    return (all, Some(err(n, Step::Init, c)));
                }
                inst.inited += 1;
            }
        }
    }
    (all, None)
}

/// `cleanup` every instance whose `init` ran (its stages in order, then
/// the source, as a stage thread does); returns the first failure.
fn cleanup<B, I: DerefMut<Target = Inst<B>>>(
    name: &str,
    all: &mut [Vec<I>],
    groups: &[GroupRt],
) -> Option<PipelineError> {
    let mut first = None;
    for (insts, rt) in all.iter_mut().zip(groups) {
        for inst in insts.iter_mut() {
            let inst: &mut Inst<B> = inst;
            let off = usize::from(inst.source.is_some());
            let stages_inited = inst.inited.saturating_sub(off);
            for (i, st) in inst.stages.iter_mut().take(stages_inited).enumerate() {
                if let Err(c) = guarded(|| st.cleanup()) {
                    first.get_or_insert(PipelineError {
                        pipeline: name.to_string(),
                        stage: rt.stage_names[off + i].clone(),
                        round: None,
                        step: Step::Cleanup,
                        cause: c,
                    });
                }
            }
            if let (Some(src), true) = (inst.source.as_mut(), inst.inited > 0) {
                if let Err(c) = guarded(|| src.cleanup()) {
                    first.get_or_insert(PipelineError {
                        pipeline: name.to_string(),
                        stage: rt.stage_names[0].clone(),
                        round: None,
                        step: Step::Cleanup,
                        cause: c,
                    });
                }
            }
        }
    }
    first
}

/// Spawn a worker thread (a `loom` thread under the model).
fn spawn(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> std::io::Result<crate::sync::JoinHandle<()>> {
    #[cfg(loom)]
    {
        let _ = name;
        Ok(loom::thread::spawn(f))
    }
    #[cfg(not(loom))]
    {
        std::thread::Builder::new().name(name.to_string()).spawn(f)
    }
}

/// Run a checked pooled pipeline on `workers` workers (the calling thread
/// is one of them).
pub(crate) fn run<B: Send + 'static>(
    mut spec: Builder<B>,
    workers: usize,
) -> Result<Report, PipelineError> {
    let start = Instant::now();
    let name = spec.name.clone();
    let (count, mut make) = spec.buffers.take().expect("validated");
    let src_name = spec.source.as_ref().expect("validated").0.clone();
    // The id regions, group by group: input ring, idle stack, reorder ring.
    let mut at = 0;
    let groups: Vec<GroupRt> = spec
        .groups
        .iter()
        .enumerate()
        .map(|(g, gs)| {
            let mut stage_names: Vec<String> = Vec::with_capacity(gs.stages.len() + 1);
            if g == 0 {
                stage_names.push(src_name.clone());
            }
            stage_names.extend(gs.stages.iter().map(|s| s.name.clone()));
            let instances = match gs.replicas {
                Replicas::Fixed(n) => n,
                Replicas::Sized { .. } => unreachable!("refused by build()"),
            };
            let ordered = instances > 1 && gs.order == Order::Ordered;
            let ring = at;
            let idle = ring + count;
            let reorder = idle + instances;
            at = reorder + if ordered { count } else { 0 };
            GroupRt {
                name: stage_names.join("+"),
                stage_names,
                repeat: gs.repeat.max(1),
                ordered,
                instances,
                ring,
                idle,
                reorder,
            }
        })
        .collect();
    let (mut insts, error) = make_instances(&name, &mut spec, &groups);
    if let Some(e) = error {
        let mut refs: Vec<Vec<&mut Inst<B>>> =
            insts.iter_mut().map(|g| g.iter_mut().collect()).collect();
        cleanup(&name, &mut refs, &groups);
        return Err(e);
    }
    let bufs = (0..count)
        .map(|_| {
            Mutex::new(Buf {
                buf: make(),
                round: 0,
                empty: false,
            })
        })
        .collect();
    let mut ids = Packed::new(at, NONE);
    let mut counters = Packed::new(groups.len(), Counters::default());
    for (g, rt) in groups.iter().enumerate() {
        for i in 0..rt.instances {
            ids[rt.idle + i] = i as u32; // validated: fewer than u32::MAX
        }
        counters[g] = Counters {
            idle: rt.instances as u16, // validated: at most u16::MAX
            // Blocking until sampled; under `loom` (which samples nothing)
            // the kinds alternate, so that the model covers declining.
            blocks: !cfg!(loom) || g % 2 == 1,
            ..Counters::default()
        };
    }
    // Every buffer starts in the free stack (group 0's ring).
    for i in 0..count {
        ids[groups[0].ring + i] = i as u32;
    }
    counters[0].len = count as u32;
    let shared = Arc::new(Shared {
        state: Padded(Mutex::new(State {
            next_round: 0,
            total: u64::MAX,
            groups: counters,
            ids,
            parked: 0,
            notified: 0,
            spinning: 0,
            failed: false,
        })),
        name: name.clone(),
        groups,
        width: count,
        cv: Condvar::new(),
        start,
        bufs,
        insts: insts
            .into_iter()
            .map(|g| g.into_iter().map(Mutex::new).collect())
            .collect(),
        cold: Mutex::new(Cold {
            error: None,
            idle: Duration::ZERO,
            cpu: Some(Duration::ZERO),
        }),
        epoch: Padded(std::sync::atomic::AtomicU64::new(0)),
        spin: !cfg!(loom) && workers <= tidepool::sys::cores(),
        classes: cfg!(loom) || matches!(crate::sys::sched_class(), Ok(Some(SchedClass::Other))),
    });
    let mut handles = Vec::with_capacity(workers.saturating_sub(1));
    for i in 1..workers {
        let sh = shared.clone();
        match spawn(
            &format!("{}-w{i}", name.chars().take(10).collect::<String>()),
            move || sh.worker_guarded(),
        ) {
            Ok(h) => handles.push(h),
            Err(e) => {
                let mut s = lock(&shared.state.0);
                shared.fail(
                    &mut s,
                    crate::pipeline::spawn_error(&name, "pooled worker", e),
                );
                drop(s);
                shared.cv.notify_all();
                break;
            }
        }
    }
    shared.worker_guarded();
    if shared.classes && !cfg!(loom) {
        // The calling thread was worker 0: back to its own class.
        let _ = crate::sys::set_sched_class(SchedClass::Other);
    }
    for h in handles {
        if h.join().is_err() {
            let e = shared.err(
                &name,
                None,
                Step::Process,
                Cause::Panicked("internal: a pooled worker panicked".into()),
            );
            let mut s = lock(&shared.state.0);
            shared.fail(&mut s, e);
        }
    }
    // Every worker has returned: every instance is idle, in place.
    let s = lock(&shared.state.0);
    let mut retired: Vec<Vec<MutexGuard<'_, Inst<B>>>> = shared
        .insts
        .iter()
        .map(|g| g.iter().map(lock).collect())
        .collect();
    let cleanup_error = cleanup(&name, &mut retired, &shared.groups);
    let mut cold = lock(&shared.cold);
    if let Some(e) = cold.error.take().or(cleanup_error) {
        return Err(e);
    }
    let elapsed = start.elapsed();
    let stages = shared
        .groups
        .iter()
        .zip(&mut retired)
        .enumerate()
        .map(|(g, (rt, insts))| {
            let mut busy_by = vec![Duration::ZERO; rt.stage_names.len()];
            let mut depth = Vec::new();
            for i in insts.iter_mut() {
                for (t, b) in busy_by.iter_mut().zip(&i.busy) {
                    *t += *b;
                }
                depth.append(&mut i.depth.points);
            }
            // The instances' samples, merged by time.
            depth.sort_by(|a, b| a.0.total_cmp(&b.0));
            StageReport {
                name: rt.name.clone(),
                pipelines: vec![name.clone()],
                threads: rt.instances,
                items: s.groups[g].items,
                busy: busy_by.iter().sum(),
                busy_by_stage: rt.stage_names.iter().cloned().zip(busy_by).collect(),
                wait_input: Duration::ZERO,
                wait_output: Duration::ZERO,
                cpu: None,
                depth,
                priority: None,
                sizes: Vec::new(),
            }
        })
        .collect();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let note = format!(
        "pooled: {workers} workers ran every stage (stages do not wait in this mode: the \
         wait columns are 0); the workers were idle {:.1} ms in all (parked with nothing \
         runnable){}",
        ms(cold.idle),
        cold.cpu
            .map(|c| format!(" and used {:.1} ms of CPU", ms(c)))
            .unwrap_or_default()
    );
    Ok(Report {
        elapsed,
        pipelines: vec![PipelineReport {
            name,
            rounds: s.next_round,
            buffers: count,
        }],
        stages,
        notes: vec![note],
        cores: tidepool::sys::cores(),
    })
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
        assert!(std::mem::size_of::<Mutex<State>>() <= 64);
        assert_eq!(std::mem::align_of::<Padded<Mutex<State>>>(), 128);
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
