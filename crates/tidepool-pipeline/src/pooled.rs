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
//! free pool and the counters): a task takes it once to start (pick) and
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
//! the others. Measured (`docs/benchmarks.md`, session 9): when a worker
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
//! lock, a counter that every finished task bumps (`epoch`), for at most
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
//! machine it often does. Measured (`docs/notebook/pipelines.md`, session
//! 9b), on the blocking shape: the reader, having conveyed its buffer and
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

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::builder::{Builder, Order, Replicas};
use crate::error::{panic_message, Cause, PipelineError, Step};
use crate::report::{DepthSeries, PipelineReport, Report, StageReport};
use crate::run::guarded;
use crate::running::Blocking;
use crate::stage::{Context, Flow, Source, Stage};
use crate::sync::{lock, Condvar, Mutex};
use crate::sys::SchedClass;

/// A buffer and what the framework knows about it.
struct Buf<B> {
    buf: B,
    round: u64,
    /// Carries no data: the source's [`Flow::End`].
    empty: bool,
}

/// A buffer in a task: its arrival index at the group, and whether it is
/// the group's last.
struct Held<B> {
    buf: Buf<B>,
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
}

/// What does not change during the run: a group's description.
struct GroupRt {
    name: String,
    /// The group's stage names, the source's first in group 0.
    stage_names: Vec<String>,
    repeat: usize,
    /// Replicated and ordered: outputs go through the reorder ring.
    ordered: bool,
    instances: usize,
}

/// A group's run-time state (under the run's lock).
struct GroupState<B> {
    /// Buffers waiting for this group (group 0 reads the free pool).
    input: VecDeque<Buf<B>>,
    /// Buffers taken from `input` so far: the next one's arrival index.
    popped: u64,
    /// Instances not running a task.
    idle: Vec<Inst<B>>,
    /// An ordered replicated group's outputs waiting for an earlier one: a
    /// ring as wide as the pool (the keys waiting are rounds in flight).
    reorder: Vec<Option<Buf<B>>>,
    next_out: u64,
    /// Buffers conveyed.
    items: u64,
    depth: DepthSeries,
    /// Its user code blocks (the latest sample of an instance's).
    blocks: bool,
}

/// Everything the lock guards.
struct State<B> {
    free: Vec<Buf<B>>,
    groups: Vec<GroupState<B>>,
    /// The round the source fills next.
    next_round: u64,
    /// The stream's round count, once the source has ended it.
    total: Option<u64>,
    error: Option<PipelineError>,
    parked: usize,
    /// Wake-ups issued and not yet taken by a returning worker.
    notified: usize,
    /// The workers' time parked, summed.
    idle: Duration,
    /// The workers' CPU time, summed (`None` if the OS does not tell).
    cpu: Option<Duration>,
}

/// A picked task: an instance of group `group` and its batch.
struct Task<B> {
    group: usize,
    inst: Inst<B>,
    batch: Vec<Held<B>>,
    /// Group 0: the first round it fills.
    round: u64,
}

/// What a finished task reports.
struct Done {
    /// Group 0: buffers filled (the rest of the batch goes back unused).
    filled: usize,
    /// Group 0: the source ended the stream.
    ended: bool,
    error: Option<PipelineError>,
}

/// The run, shared by the workers.
struct Shared<B> {
    name: String,
    groups: Vec<GroupRt>,
    width: usize,
    state: Mutex<State<B>>,
    cv: Condvar,
    start: Instant,
    /// Bumped after every finished task: a spinning worker's hint to look
    /// again (read without the lock; the lock decides).
    epoch: std::sync::atomic::AtomicU64,
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

impl<B> State<B> {
    fn over(&self, groups: &[GroupRt]) -> bool {
        self.error.is_some() || self.total == Some(self.groups[groups.len() - 1].items)
    }

    fn runnable(&self, g: usize, rt: &GroupRt) -> bool {
        let s = &self.groups[g];
        if s.idle.is_empty() {
            return false;
        }
        if g == 0 {
            return self.total.is_none() && self.free.len() >= rt.repeat;
        }
        let len = s.input.len() as u64;
        len >= rt.repeat as u64 || (len > 0 && self.total == Some(s.popped + len))
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

    /// Take a runnable task, or `None` to park (see the module doc,
    /// "Blocking and computing workers"). `last` is the group whose task
    /// the caller just finished.
    fn pick(&mut self, groups: &[GroupRt], last: Option<usize>, start: Instant) -> Option<Task<B>> {
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
        let inst = self.groups[g]
            .idle
            .pop()
            .expect("runnable: an idle instance");
        let mut batch = Vec::with_capacity(rt.repeat);
        if g == 0 {
            let at = self.free.len() - rt.repeat;
            let depth = self.free.len() - rt.repeat;
            batch.extend(self.free.drain(at..).map(|buf| Held {
                buf,
                index: 0,
                last: false,
            }));
            self.groups[0]
                .depth
                .record(start.elapsed().as_secs_f64(), depth);
        } else {
            let total = self.total;
            let s = &mut self.groups[g];
            while batch.len() < rt.repeat {
                let Some(buf) = s.input.pop_front() else {
                    break;
                };
                let index = s.popped;
                s.popped += 1;
                batch.push(Held {
                    buf,
                    index,
                    last: total == Some(s.popped),
                });
            }
            let left = s.input.len();
            s.depth.record(start.elapsed().as_secs_f64(), left);
        }
        Some(Task {
            group: g,
            inst,
            batch,
            round: self.next_round,
        })
    }

    /// Pass a buffer that group `g` is done with to the next group (or back
    /// to the free pool after the last).
    fn convey(&mut self, groups: &[GroupRt], g: usize, h: Held<B>, width: usize) {
        self.groups[g].items += 1;
        let mut buf = h.buf;
        if g + 1 == groups.len() {
            buf.empty = false;
            self.free.push(buf);
        } else if groups[g].ordered {
            let s = &mut self.groups[g];
            let slot = (h.index % width as u64) as usize;
            debug_assert!(s.reorder[slot].is_none(), "reorder window overrun");
            s.reorder[slot] = Some(buf);
            loop {
                let s = &mut self.groups[g];
                let slot = (s.next_out % width as u64) as usize;
                let Some(b) = s.reorder[slot].take() else {
                    break;
                };
                s.next_out += 1;
                self.groups[g + 1].input.push_back(b);
            }
        } else {
            self.groups[g + 1].input.push_back(buf);
        }
    }

    /// Finish a task: its buffers go on, its instance back to idle.
    fn complete(&mut self, groups: &[GroupRt], task: Task<B>, done: Done, width: usize) {
        let Task {
            group, inst, batch, ..
        } = task;
        // Under `loom` the kinds stay as set at the start (below).
        if !cfg!(loom) {
            self.groups[group].blocks = inst.blocking.blocks();
        }
        self.groups[group].idle.push(inst);
        if let Some(e) = done.error {
            if self.error.is_none() {
                self.error = Some(e);
            }
            return; // the batch's buffers are dropped with it
        }
        let mut batch = batch;
        if group == 0 {
            // Unfilled buffers (the stream ended first) go back unused.
            self.free.extend(batch.drain(done.filled..).map(|h| h.buf));
            self.next_round += done.filled as u64;
            if done.ended {
                // Before the last buffer moves on (the notice's count).
                self.total = Some(self.next_round);
            }
        }
        for h in batch {
            self.convey(groups, group, h, width);
        }
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

    /// Run a task's user code (no lock held).
    fn run_task(&self, task: &mut Task<B>) -> Done {
        let rt = &self.groups[task.group];
        let done = Done {
            filled: task.batch.len(),
            ended: false,
            error: None,
        };
        let Task {
            inst, batch, round, ..
        } = task;
        let sample = inst.blocking.before();
        let done = self.run_user(rt, inst, batch, *round, done);
        inst.blocking.after(sample);
        done
    }

    fn run_user(
        &self,
        rt: &GroupRt,
        inst: &mut Inst<B>,
        batch: &mut [Held<B>],
        round: u64,
        mut done: Done,
    ) -> Done {
        let mut mark = Instant::now();
        let mut first = 0;
        if let Some(src) = inst.source.as_mut() {
            first = 1;
            for (i, h) in batch.iter_mut().enumerate() {
                let r = round + i as u64;
                let cx = Context::new(&rt.stage_names[0], &self.name, r, false, false, 0);
                let flow = guarded(|| src.fill(&mut h.buf.buf, &cx));
                let now = Instant::now();
                inst.busy[0] += now - mark;
                mark = now;
                match flow {
                    Ok(f) => {
                        h.buf.round = r;
                        h.buf.empty = f == Flow::End;
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
            for h in batch[..filled].iter_mut() {
                let cx = Context::new(
                    name,
                    &self.name,
                    h.buf.round,
                    h.last,
                    h.buf.empty,
                    inst.replica,
                );
                let r = guarded(|| stage.process(&mut h.buf.buf, &cx));
                let now = Instant::now();
                inst.busy[first + i] += now - mark;
                mark = now;
                if let Err(c) = r {
                    done.error = Some(self.err(name, Some(h.buf.round), Step::Process, c));
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
        let mut s = lock(&self.state);
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
            if let Some(mut task) = s.pick(&self.groups, prev, self.start) {
                let computing = !s.groups[task.group].blocks;
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
                let done = self.run_task(&mut task);
                last = Some(task.group);
                s = lock(&self.state);
                s.complete(&self.groups, task, done, self.width);
                self.epoch
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                spun = false;
                if s.over(&self.groups) && s.parked > 0 {
                    self.cv.notify_all();
                }
                continue;
            }
            // Nothing runnable at all, and a worker that is running may
            // finish soon: watch for a finished task a little first.
            if self.spin && !spun && !s.any_runnable(&self.groups) {
                spun = true;
                let seen = self.epoch.load(std::sync::atomic::Ordering::Relaxed);
                drop(s);
                let t = Instant::now();
                let mut n = 0u32;
                while self.epoch.load(std::sync::atomic::Ordering::Relaxed) == seen {
                    std::hint::spin_loop();
                    n += 1;
                    if n.is_multiple_of(64) && t.elapsed() >= SPIN {
                        break;
                    }
                }
                s = lock(&self.state);
                s.idle += t.elapsed();
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
                s = lock(&self.state);
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
            s.idle += t.elapsed();
        }
        let cpu = match (cpu0, crate::sys::thread_cpu_time()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        s.cpu = match (s.cpu, cpu) {
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
            let mut s = lock(&self.state);
            if s.error.is_none() {
                s.error = Some(self.err(
                    &self.name,
                    None,
                    Step::Process,
                    Cause::Panicked(format!("internal: {}", panic_message(&*p))),
                ));
            }
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
fn cleanup<B>(name: &str, all: &mut [Vec<Inst<B>>], groups: &[GroupRt]) -> Option<PipelineError> {
    let mut first = None;
    for (insts, rt) in all.iter_mut().zip(groups) {
        for inst in insts.iter_mut() {
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
            GroupRt {
                name: stage_names.join("+"),
                stage_names,
                repeat: gs.repeat.max(1),
                ordered: instances > 1 && gs.order == Order::Ordered,
                instances,
            }
        })
        .collect();
    let (mut insts, error) = make_instances(&name, &mut spec, &groups);
    if let Some(e) = error {
        cleanup(&name, &mut insts, &groups);
        return Err(e);
    }
    let free = (0..count)
        .map(|_| Buf {
            buf: make(),
            round: 0,
            empty: false,
        })
        .collect();
    let states = insts
        .into_iter()
        .enumerate()
        .map(|(g, idle)| GroupState {
            input: VecDeque::with_capacity(count),
            popped: 0,
            idle,
            reorder: (0..count).map(|_| None).collect(),
            next_out: 0,
            items: 0,
            depth: DepthSeries::new(),
            // Blocking until sampled; under `loom` (which samples nothing)
            // the kinds alternate, so that the model covers declining.
            blocks: !cfg!(loom) || g % 2 == 1,
        })
        .collect();
    let shared = Arc::new(Shared {
        name: name.clone(),
        groups,
        width: count,
        state: Mutex::new(State {
            free,
            groups: states,
            next_round: 0,
            total: None,
            error: None,
            parked: 0,
            notified: 0,
            idle: Duration::ZERO,
            cpu: Some(Duration::ZERO),
        }),
        cv: Condvar::new(),
        start,
        epoch: std::sync::atomic::AtomicU64::new(0),
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
                let mut s = lock(&shared.state);
                s.error
                    .get_or_insert(crate::pipeline::spawn_error(&name, "pooled worker", e));
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
            let mut s = lock(&shared.state);
            s.error.get_or_insert(shared.err(
                &name,
                None,
                Step::Process,
                Cause::Panicked("internal: a pooled worker panicked".into()),
            ));
        }
    }
    let mut s = lock(&shared.state);
    let mut retired: Vec<Vec<Inst<B>>> = s
        .groups
        .iter_mut()
        .map(|g| std::mem::take(&mut g.idle))
        .collect();
    let cleanup_error = cleanup(&name, &mut retired, &shared.groups);
    if let Some(e) = s.error.take().or(cleanup_error) {
        return Err(e);
    }
    let elapsed = start.elapsed();
    let stages = shared
        .groups
        .iter()
        .zip(s.groups.iter_mut())
        .zip(&retired)
        .map(|((rt, gs), insts)| {
            let mut busy_by = vec![Duration::ZERO; rt.stage_names.len()];
            for i in insts {
                for (t, b) in busy_by.iter_mut().zip(&i.busy) {
                    *t += *b;
                }
            }
            StageReport {
                name: rt.name.clone(),
                pipelines: vec![name.clone()],
                threads: rt.instances,
                items: gs.items,
                busy: busy_by.iter().sum(),
                busy_by_stage: rt.stage_names.iter().cloned().zip(busy_by).collect(),
                wait_input: Duration::ZERO,
                wait_output: Duration::ZERO,
                cpu: None,
                depth: std::mem::take(&mut gs.depth.points),
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
        ms(s.idle),
        s.cpu
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
