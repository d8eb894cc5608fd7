//! A pooled worker's loop: pick a task under the run's lock, run its user
//! code outside it, complete it and pick the next in one critical section,
//! park when nothing is runnable (see the parent module's doc).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::error::{guarded, panic_message, Cause, PipelineError, Step};
use crate::stage::{Context, Flow};
use crate::sync::{lock, Condvar, Mutex, MutexGuard};
use crate::sys::SchedClass;

use super::graph::{Extra, ForkKind};
use super::sizing::{Meter, Now, Sizer};
use super::state::{Buf, Done, GroupRt, Held, Inst, Pick, Plan, State};

/// What the workers touch once per run, off the hot lines.
pub(super) struct Cold {
    pub(super) error: Option<PipelineError>,
    /// The workers' time parked, summed.
    pub(super) idle: Duration,
    /// The workers' CPU time, summed (`None` if the OS does not tell).
    pub(super) cpu: Option<Duration>,
}

/// The run, shared by the workers.
pub(super) struct Shared<B> {
    /// The lock and the run's scalars, on lines of their own.
    pub(super) state: CachePadded<Mutex<State>>,
    pub(super) plan: Plan,
    pub(super) cv: Condvar,
    pub(super) start: Instant,
    /// The buffers, by id: an id is in exactly one place (a ring, the free
    /// stack or one task's batch), and only its holder locks the entry.
    pub(super) bufs: Box<[Mutex<Buf<B>>]>,
    /// Each group's instances, by id (held by the idle stack or one task).
    pub(super) insts: Vec<Box<[Mutex<Inst<B>>]>>,
    pub(super) cold: Mutex<Cold>,
    /// Bumped after a finished task while a worker spins: its hint to look
    /// again (read without the lock; the lock decides).
    pub(super) epoch: CachePadded<std::sync::atomic::AtomicU64>,
    /// At most this many computing tasks at once (module doc, "Blocking
    /// stages").
    pub(super) compute: usize,
    /// The sizing policy (none with `pooled_threads`, or under `loom`),
    /// its next call (ns since the start), and each worker's counts.
    pub(super) sizer: Option<std::sync::Mutex<Sizer>>,
    pub(super) next_call: std::sync::atomic::AtomicU64,
    pub(super) meters: Box<[CachePadded<Meter>]>,
    /// Spin before parking (no more workers than cores).
    pub(super) spin: bool,
    /// Workers switch between SCHED_BATCH and SCHED_OTHER (the caller's
    /// thread was in SCHED_OTHER; see "Scheduling classes").
    pub(super) classes: bool,
}

/// A worker's scheduling class (module doc, "Scheduling classes").
pub(super) struct Class {
    /// Switching is on (a refused switch turns it off for this worker).
    pub(super) on: bool,
    /// In SCHED_BATCH (else SCHED_OTHER).
    pub(super) batch: bool,
}

impl Class {
    /// Take SCHED_BATCH (`batch`) or SCHED_OTHER, if not in it already.
    pub(super) fn take(&mut self, batch: bool) {
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
pub(super) const SPIN: Duration = Duration::from_micros(30);

impl<B: Send + 'static> Shared<B> {
    /// Pipeline `pipe`'s name.
    pub(super) fn name(&self, pipe: usize) -> &str {
        &self.plan.pipes[pipe].name
    }

    /// The pipeline of buffer `id` in group `rt` (a shared stage serves
    /// several).
    fn pipe(&self, rt: &GroupRt, id: u32) -> usize {
        if rt.lanes.is_empty() {
            rt.pipe
        } else {
            self.plan.pipe_of[id as usize] as usize
        }
    }

    pub(super) fn err(
        &self,
        pipe: usize,
        stage: &str,
        round: Option<u64>,
        step: Step,
        cause: Cause,
    ) -> PipelineError {
        PipelineError {
            pipeline: self.name(pipe).to_string(),
            stage: stage.to_string(),
            round,
            step,
            cause,
        }
    }

    /// Fail the run (under its lock): the first failure's error is the
    /// run's.
    pub(super) fn fail(&self, s: &mut State, e: PipelineError) {
        if !s.failed {
            s.failed = true;
            lock(&self.cold).error = Some(e);
        }
    }

    /// Run a task's user code (no run lock held); also says whether the
    /// group's user code blocks.
    pub(super) fn run_task(&self, p: &Pick, batch: &mut [Held]) -> (Done, bool) {
        let rt = &self.plan.groups[p.group];
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
        let mut done = self.run_user(rt, inst, batch, p.round, done, mark);
        if done.error.is_none() {
            if let Some(extra) = inst.extra.as_mut() {
                done.error = self.run_extra(p.group, extra, &mut batch[..done.filled]);
            }
        }
        inst.blocking.after(sample);
        (done, inst.blocking.blocks())
    }

    /// Run `f` on buffer `id`: through `one`, the batch's only buffer
    /// locked once for the whole task, or locked for the call.
    pub(super) fn on_buf<R>(
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

    pub(super) fn run_user(
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
            // A source's buffers are its pipeline's.
            let pipe = rt.pipe;
            let stopper = &self.plan.pipes[pipe].stopper;
            for (i, h) in batch.iter_mut().enumerate() {
                let r = round + i as u64;
                let cx = Context::new(&rt.stage_names[0], self.name(pipe), r, false, false, 0);
                let flow = self.on_buf(&mut one, h.id, |b| {
                    // A due stop ends the stream as `Flow::End` would.
                    let flow = if stopper.due() {
                        Ok(Flow::End)
                    } else {
                        guarded(|| src.fill(&mut b.buf, &cx))
                    };
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
                        let e = self.err(pipe, &rt.stage_names[0], Some(r), Step::Process, c);
                        done.error = Some(e);
                        return done;
                    }
                }
            }
        }
        let filled = done.filled;
        for (i, stage) in inst.stages.iter_mut().enumerate() {
            let name = &rt.stage_names[first + i];
            for h in batch[..filled].iter() {
                let pipe = self.pipe(rt, h.id);
                let r = self.on_buf(&mut one, h.id, |b| {
                    let (round, last, empty) = (b.round, h.last, b.empty);
                    let cx = Context::new(name, self.name(pipe), round, last, empty, inst.replica);
                    guarded(|| stage.process(&mut b.buf, &cx)).map_err(|c| (c, b.round))
                });
                let now = Instant::now();
                inst.busy[first + i] += now - mark;
                mark = now;
                if let Err((c, round)) = r {
                    done.error = Some(self.err(pipe, name, Some(round), Step::Process, c));
                    return done;
                }
            }
        }
        done
    }

    /// After the stages: a fork's route (each buffer's branch, and the
    /// notices' content at the last) or copies, or a gather's merges (see
    /// the module doc, "Forks and joins"). The ids it touches belong to
    /// this task: the batch's, and the copies and notices paired with them.
    fn run_extra(
        &self,
        g: usize,
        extra: &mut Extra<B>,
        batch: &mut [Held],
    ) -> Option<PipelineError> {
        let rt = &self.plan.groups[g];
        let name = &rt.name;
        let f = &self.plan.forks[rt.fork.expect("a group with extra code has a fork")];
        let n = f.branches.len();
        let copy_of = |id: u32, b: usize| {
            let ForkKind::Broadcast { copies, .. } = f.kind else {
                unreachable!("copies belong to a broadcast")
            };
            copies as usize + self.plan.roots[id as usize] as usize * (n - 1) + b - 1
        };
        for h in batch.iter_mut() {
            let pipe = self.pipe(rt, h.id);
            let mut orig = lock(&self.bufs[h.id as usize]);
            let (round, empty) = (orig.round, orig.empty);
            let fail = |step, cause| Some(self.err(pipe, name, Some(round), step, cause));
            match extra {
                Extra::Route(route) => {
                    // Empty buffers (the stream's end, an outer fork's
                    // notice) carry nothing to route by: branch 0.
                    if !empty {
                        let cx = Context::new(name, self.name(pipe), round, h.last, false, 0);
                        match catch_unwind(AssertUnwindSafe(|| route(&orig.buf, &cx))) {
                            Ok(b) if b < n => h.branch = b as u16, // validated: n <= u16::MAX
                            Ok(b) => {
                                let msg =
                                    format!("route chose branch {b}; the fork has branches 0..{n}");
                                return fail(Step::Route, Cause::Failed(msg.into()));
                            }
                            Err(p) => {
                                return fail(Step::Route, Cause::Panicked(panic_message(&*p)))
                            }
                        }
                    }
                    if h.last {
                        let ForkKind::Route { notices, .. } = f.kind else {
                            unreachable!("a route belongs to a route fork")
                        };
                        for k in 0..n as u32 - 1 {
                            let mut c = lock(&self.bufs[(notices + k) as usize]);
                            c.round = round;
                            c.empty = true;
                        }
                    }
                }
                Extra::Copy(copy) => {
                    for b in 1..n {
                        let mut c = lock(&self.bufs[copy_of(h.id, b)]);
                        c.round = round;
                        c.empty = empty;
                        if !empty {
                            let r =
                                catch_unwind(AssertUnwindSafe(|| copy(&orig.buf, &mut c.buf, b)));
                            if let Err(p) = r {
                                return fail(Step::Copy, Cause::Panicked(panic_message(&*p)));
                            }
                        }
                    }
                }
                Extra::Merge(merge) => {
                    if empty {
                        continue;
                    }
                    for b in 1..n {
                        let c = lock(&self.bufs[copy_of(h.id, b)]);
                        if let Err(cause) = guarded(|| merge(&mut orig.buf, &c.buf, b)) {
                            return fail(Step::Merge, cause);
                        }
                    }
                }
            }
        }
        None
    }

    /// One worker: take tasks while any is runnable, park when none is,
    /// return at the end of the run.
    /// Call the sizing policy if its time has come (`at`: since the start)
    /// and no other worker is calling it, and apply its limit on running
    /// tasks: a raised limit may make tasks runnable, so a parked worker is
    /// woken for them, as after a completion (module doc, "Blocking
    /// stages").
    fn resize(&self, at: Duration) {
        let Some(sizer) = &self.sizer else { return };
        let Ok(mut sizer) = sizer.try_lock() else {
            return;
        };
        let ns = |d: Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
        if ns(at) < self.next_call.load(std::sync::atomic::Ordering::Relaxed) {
            return; // another worker just called it
        }
        let now = {
            let s = lock(&self.state);
            let groups = &self.plan.groups;
            Now {
                at,
                queued: (0..groups.len())
                    .filter(|&g| !groups[g].source)
                    .map(|g| s.groups[g].len as usize)
                    .sum(),
                running: s.load(groups, self.compute).0,
                parked: usize::from(s.parked),
                limit: usize::from(s.limit),
            }
        };
        let decided = sizer.decide(tidepool::policy::Trigger::Tick, now, &self.meters);
        self.next_call.store(
            ns(sizer.next_call(at)),
            std::sync::atomic::Ordering::Relaxed,
        );
        drop(sizer);
        let Some(limit) = decided else { return };
        let mut s = lock(&self.state);
        s.limit = limit as u16; // clamped to the workers, below u16::MAX
        let wake = s.claim_wake(&self.plan.groups, self.compute);
        drop(s);
        if wake {
            self.cv.notify_one();
        }
    }

    pub(super) fn worker(&self, id: usize) {
        let cpu0 = crate::sys::thread_cpu_time();
        let mut idle = Duration::ZERO;
        let most = self.plan.groups.iter().map(|g| g.repeat).max().unwrap_or(1);
        let mut batch: Vec<Held> = Vec::with_capacity(most);
        let mut s = lock(&self.state);
        let mut last = None;
        let mut spun = false;
        let mut tasks = 0u64;
        let mut class = Class {
            on: self.classes,
            batch: false,
        };
        loop {
            if s.over(&self.plan) {
                break;
            }
            let prev = last.take();
            if let Some(p) = s.pick(&self.plan, prev, &mut batch, self.compute) {
                let computing = !s.groups[p.group].blocks;
                let wake = s.claim_wake(&self.plan.groups, self.compute);
                drop(s);
                if wake {
                    self.cv.notify_one();
                }
                class.take(computing);
                let measured = self.sizer.is_some();
                let cpu0 = (measured && Meter::samples(tasks))
                    .then(crate::sys::thread_cpu_time)
                    .flatten();
                let t0 = Instant::now();
                let (done, blocks) = self.run_task(&p, &mut batch);
                if measured {
                    let t1 = Instant::now();
                    let cpu =
                        cpu0.and_then(|a| Some(crate::sys::thread_cpu_time()?.saturating_sub(a)));
                    self.meters[id].record(done.filled as u64, t1 - t0, cpu);
                    tasks += 1;
                    let at = t1.duration_since(self.start);
                    let due = self.next_call.load(std::sync::atomic::Ordering::Relaxed);
                    if at.as_nanos() >= u128::from(due) {
                        self.resize(at);
                    }
                }
                last = Some(p.group);
                s = lock(&self.state);
                if let Some(e) = s.complete(&self.plan, &p, &batch, done, blocks) {
                    self.fail(&mut s, e);
                }
                if s.spinning > 0 {
                    self.epoch
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                spun = false;
                if s.over(&self.plan) && s.parked > 0 {
                    self.cv.notify_all();
                }
                continue;
            }
            // Nothing runnable at all, and a worker that is running may
            // finish soon: watch for a finished task a little first
            // (counted in `spinning`, so that finishing tasks bump `epoch`).
            if self.spin && !spun && !s.any_runnable(&self.plan.groups, self.compute) {
                spun = true;
                s.spinning += 1;
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
                s.spinning -= 1;
                idle += t.elapsed();
                continue;
            }
            // Nothing runnable for this worker: what is runnable (of the
            // other kind) goes to a spare worker, woken here.
            let wake = s.any_runnable(&self.plan.groups, self.compute) && s.parked > s.notified;
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
            s.check(s.any_runnable(&self.plan.groups, self.compute));
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
    pub(super) fn worker_guarded(&self, id: usize) {
        if cfg!(loom) {
            return self.worker(id);
        }
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| self.worker(id))) {
            let e = self.err(
                0,
                self.name(0),
                None,
                Step::Process,
                Cause::Panicked(format!("internal: {}", panic_message(&*p))),
            );
            let mut s = lock(&self.state);
            self.fail(&mut s, e);
            drop(s);
            self.cv.notify_all();
        }
    }
}
