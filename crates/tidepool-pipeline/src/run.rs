//! Running pipelines: one node per thread group, wired by queues, each node
//! run by its own threads (see `queue.rs` for the end-of-stream protocol).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::builder::{CopyFn, Maker, MergeFn, Replicas, Route, SharedInner};
use crate::error::{panic_message, Cause, PipelineError, Step};
use crate::priority::{Depths, Priority, PriorityPolicy, PrioritySpec};
use crate::queue::{Pop, Queue};
use crate::report::{DepthSeries, PipelineReport, Report, StageReport};
use crate::running::{Blocking, Running};
use crate::stage::{BoxError, Context, Flow, Source, Stage};
use crate::sys;

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

type Q<B> = Arc<Queue<Env<B>>>;

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

    fn insert(&mut self, key: u64, env: Env<B>) {
        let i = (key % self.slots.len() as u64) as usize;
        debug_assert!(self.slots[i].is_none(), "reorder window overrun");
        self.slots[i] = Some(env);
    }

    fn pop_next(&mut self) -> Option<Env<B>> {
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
    fn skips<B>(self, env: &Env<B>) -> bool {
        matches!((self, env.empty), (Key::Seq(j), Empty::Branch(d)) if d >= j)
    }
}

/// Where a push delivers.
pub(crate) enum Dest<B> {
    /// The pipeline's free pool (after its last stage).
    Free,
    /// The next node's queue.
    Queue(Q<B>),
    /// A broadcast join, as branch `.1`'s buffer.
    Gather(Arc<Gather<B>>, usize),
}

/// A node's way out for one pipeline (or a join's).
pub(crate) struct Push<B> {
    pub(crate) dest: Dest<B>,
    /// Tell the queue its total at this node's last buffer (not at a
    /// branch's tail: the fork tells the join).
    pub(crate) set_total: bool,
    /// Keep the order: by arrival index, or by a fork's number at a join.
    pub(crate) reorder: Option<(Arc<Mutex<Reorder<B>>>, Key)>,
    /// This push ends the branches of the forks at this depth and deeper:
    /// their empty notices go back to the free pool here.
    pub(crate) drop_at: Option<usize>,
}

impl<B: Send + 'static> Push<B> {
    /// Deliver a buffer (in order, if this push keeps one). Returns the
    /// depth of the queue it went to, or `None` if the run failed.
    fn deliver(&self, run: &Run<B>, pipe: usize, env: Env<B>, index: u64) -> Option<usize> {
        match &self.reorder {
            Some((r, key)) if !key.skips(&env) => {
                let k = match key {
                    Key::Index => index,
                    Key::Seq(d) => env.seq[*d],
                };
                let mut r = r.lock().unwrap_or_else(|p| p.into_inner());
                r.insert(k, env);
                let mut depth = Some(0);
                while let Some(e) = r.pop_next() {
                    depth = Some(self.put(run, pipe, e)?);
                }
                depth
            }
            _ => self.put(run, pipe, env),
        }
    }

    fn put(&self, run: &Run<B>, pipe: usize, e: Env<B>) -> Option<usize> {
        let free = &run.pipes[pipe].free;
        if let (Some(at), Empty::Branch(d)) = (self.drop_at, e.empty) {
            if d >= at {
                return free.push(pipe, e).ok();
            }
        }
        match &self.dest {
            Dest::Free => free.push(pipe, e).ok(),
            Dest::Queue(q) => q.push(pipe, e).ok(),
            Dest::Gather(g, branch) => g.arrive(run, pipe, e, *branch),
        }
    }
}

/// Where a node's buffers of one pipeline go.
pub(crate) enum Out<B> {
    /// A queue, a join or the free pool.
    Push(Push<B>),
    /// Into a fork's branches.
    Fork(Mutex<ForkRt<B>>),
}

/// How a fork spreads buffers at run time.
pub(crate) enum SpreadRt<B> {
    Route(Route<B>),
    Broadcast {
        copy: CopyFn<B>,
        /// The copy buffers, `branches − 1` per pipeline buffer.
        pool: Q<B>,
    },
}

pub(crate) struct ForkRt<B> {
    pub(crate) spread: SpreadRt<B>,
    /// Nesting depth: 0 for a fork in the main chain.
    pub(crate) depth: usize,
    pub(crate) branches: Vec<Q<B>>,
    /// The queue after the join, whose total this fork sets (`None` at the
    /// pipeline's end, or when an outer fork's join is the same place).
    pub(crate) join: Option<Q<B>>,
    pub(crate) counts: Vec<u64>,
    /// A broadcast's join.
    pub(crate) gather: Option<Arc<Gather<B>>>,
}

/// A broadcast's join: collects each round from every branch, merges the
/// copies into the original, recycles the copies and passes the original
/// on, in the fork's order.
pub(crate) struct Gather<B> {
    pub(crate) name: String,
    pub(crate) depth: usize,
    pub(crate) pool: Q<B>,
    pub(crate) then: std::sync::OnceLock<Push<B>>,
    pub(crate) state: Mutex<GatherState<B>>,
}

pub(crate) struct GatherState<B> {
    merge: MergeFn<B>,
    next: u64,
    /// A ring of rounds (as in [`Reorder`]): per round, each branch's buffer.
    slots: Vec<(usize, Vec<Option<Env<B>>>)>,
}

impl<B: Send + 'static> Gather<B> {
    pub(crate) fn new(
        name: String,
        depth: usize,
        branches: usize,
        width: usize,
        merge: MergeFn<B>,
        pool: Q<B>,
    ) -> Self {
        let slots = (0..width.max(1))
            .map(|_| (0, (0..branches).map(|_| None).collect()))
            .collect();
        Gather {
            name,
            depth,
            pool,
            then: std::sync::OnceLock::new(),
            state: Mutex::new(GatherState {
                merge,
                next: 0,
                slots,
            }),
        }
    }

    /// Branch `branch` is done with its buffer of a round. The thread that
    /// brings a round's final buffer merges it and passes it on (with any
    /// later rounds already complete).
    fn arrive(&self, run: &Run<B>, pipe: usize, env: Env<B>, branch: usize) -> Option<usize> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let GatherState { merge, next, slots } = &mut *s;
        let width = slots.len() as u64;
        let (got, envs) = &mut slots[(env.seq[self.depth] % width) as usize];
        debug_assert!(envs[branch].is_none(), "gather window overrun");
        envs[branch] = Some(env);
        *got += 1;
        let mut depth = Some(0);
        loop {
            let (got, envs) = &mut slots[(*next % width) as usize];
            if *got < envs.len() {
                return depth;
            }
            *got = 0;
            *next += 1;
            let mut orig = envs[0].take().expect("branch 0 arrived");
            for (b, c) in envs.iter_mut().enumerate().skip(1) {
                let c = c.take().expect("every branch arrived");
                if orig.empty == Empty::No {
                    if let Err(cause) = guarded(|| merge(&mut orig.buf, &c.buf, b)) {
                        run.fail(PipelineError {
                            pipeline: run.pipes[pipe].name.clone(),
                            stage: self.name.clone(),
                            round: Some(orig.round),
                            step: Step::Merge,
                            cause,
                        });
                        return None;
                    }
                }
                // Fails only once the run is aborted: then it is dropped.
                let _ = self.pool.push(pipe, c);
            }
            let then = self.then.get().expect("a join is wired before the run");
            depth = Some(then.deliver(run, pipe, orig, 0)?);
        }
    }
}

/// A thread group at run time.
pub(crate) struct Node<B> {
    pub(crate) name: String,
    pub(crate) stage_names: Vec<String>,
    pub(crate) pipes: Vec<usize>,
    /// `None` for a source (it reads its pipeline's free pool).
    pub(crate) input: Option<Q<B>>,
    pub(crate) outs: Vec<Option<Out<B>>>,
    pub(crate) replicas: Replicas,
    pub(crate) repeat: usize,
    pub(crate) priority: Option<PrioritySpec>,
    pub(crate) source: Mutex<Option<Box<dyn Source<B>>>>,
    pub(crate) makers: Vec<Maker<B>>,
    pub(crate) shared: Option<Arc<SharedInner<B>>>,
    pub(crate) stats: Mutex<Stats>,
}

#[derive(Default)]
pub(crate) struct Stats {
    threads: usize,
    items: u64,
    busy: Vec<Duration>,
    wait_input: Duration,
    wait_output: Duration,
    cpu: Option<Duration>,
    depth: Vec<(f64, usize)>,
    sizes: Vec<(f64, usize)>,
}

pub(crate) struct PipeRt<B> {
    pub(crate) name: String,
    pub(crate) free: Q<B>,
    pub(crate) buffers: usize,
    /// Written by the source every round: on a line of its own, away from
    /// the name and free queue that every stage reads every round.
    pub(crate) rounds: crate::sync::Padded<std::sync::atomic::AtomicU64>,
}

/// What every thread of a run shares.
pub(crate) struct Run<B> {
    pub(crate) pipes: Vec<PipeRt<B>>,
    pub(crate) queues: Vec<Q<B>>,
    /// Stage threads holding a core, and owed wake-ups (`running.rs`).
    pub(crate) running: Arc<Running<Env<B>>>,
    pub(crate) error: Mutex<Option<PipelineError>>,
    pub(crate) refused: AtomicBool,
    pub(crate) notes: Mutex<Vec<String>>,
    pub(crate) start: Instant,
}

impl<B> Run<B> {
    /// Record the first failure and abort every queue: every thread blocked
    /// in the framework wakes and leaves.
    fn fail(&self, e: PipelineError) {
        {
            let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
            if slot.is_none() {
                *slot = Some(e);
            }
        }
        for q in &self.queues {
            drop(q.abort());
        }
    }

    fn failed(&self) -> bool {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Apply a priority to the calling thread; a refusal is noted once.
    fn apply(&self, stage: &str, p: Priority) {
        let r = sys::set_sched_class(p.class).and_then(|()| {
            if p.class == sys::SchedClass::Idle {
                Ok(())
            } else {
                sys::set_nice(p.nice)
            }
        });
        if let Err(e) = r {
            if !self.refused.swap(true, Ordering::Relaxed) {
                let why = if e.kind() == std::io::ErrorKind::PermissionDenied {
                    " (a lower nice value, i.e. a higher priority, needs CAP_SYS_NICE or a \
                     raised RLIMIT_NICE)"
                } else {
                    ""
                };
                let note = format!(
                    "priority: the OS refused {p} for stage `{stage}`: {e}{why}; the \
                     pipeline goes on, its threads at the priority they had (further \
                     refusals are not reported)"
                );
                eprintln!("tidepool-pipeline: {note}");
                self.notes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(note);
            }
        }
    }
}

/// Run user code, turning a panic into a [`Cause`].
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T, BoxError>) -> Result<T, Cause> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Cause::Failed(e)),
        Err(p) => Err(Cause::Panicked(panic_message(&*p))),
    }
}

/// Run a counted thread's user code; a thread whose user code blocks
/// leaves the running count for the call (see `running.rs`).
fn user<B, T>(run: &Run<B>, blocking: &mut Blocking, f: impl FnOnce() -> T) -> T {
    let sample = blocking.before();
    let blocks = blocking.blocks();
    if blocks {
        run.running.leave();
    }
    let r = f();
    if blocks {
        run.running.enter();
    }
    blocking.after(sample);
    r
}

/// A buffer in a thread's hands: the envelope, its arrival index at this
/// node, and the node's input total if it is the node's last.
struct Held<B> {
    env: Env<B>,
    pipe: usize,
    index: u64,
    last_total: Option<u64>,
}

impl<B: Send + 'static> Node<B> {
    fn err(
        &self,
        run: &Run<B>,
        stage: usize,
        pipe: usize,
        round: Option<u64>,
        step: Step,
        cause: Cause,
    ) -> PipelineError {
        PipelineError {
            pipeline: run.pipes[pipe].name.clone(),
            stage: self
                .stage_names
                .get(stage)
                .cloned()
                .unwrap_or_else(|| self.name.clone()),
            round,
            step,
            cause,
        }
    }

    /// Send one buffer on. Returns the output depth (for priority policies),
    /// or `None` if the run failed.
    fn convey(&self, run: &Run<B>, h: Held<B>) -> Option<usize> {
        let Held {
            env,
            pipe,
            index,
            last_total,
        } = h;
        match self.outs[pipe].as_ref().expect("node wired for its pipes") {
            Out::Push(p) => {
                if let (true, Some(n), Dest::Queue(q)) = (p.set_total, last_total, &p.dest) {
                    q.set_total(pipe, n);
                }
                p.deliver(run, pipe, env, index)
            }
            Out::Fork(f) => {
                let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
                self.fork(run, &mut f, pipe, env, index, last_total)
            }
        }
    }

    /// A fork's convey: down one branch (route) or all (broadcast). Every
    /// total is set before the push that can complete its queue.
    fn fork(
        &self,
        run: &Run<B>,
        f: &mut ForkRt<B>,
        pipe: usize,
        mut env: Env<B>,
        index: u64,
        last_total: Option<u64>,
    ) -> Option<usize> {
        let d = f.depth;
        env.seq[d] = index;
        let n = f.branches.len();
        let round = env.round;
        let fail = |step: Step, cause: Cause| {
            run.fail(self.err(run, usize::MAX, pipe, Some(round), step, cause));
            None
        };
        match &mut f.spread {
            SpreadRt::Route(route) => {
                // Empty buffers (the stream's end, an outer fork's notice)
                // are not routed: they carry nothing to route by.
                let branch = if env.empty != Empty::No {
                    0
                } else {
                    let cx = Context::new(
                        &self.name,
                        &run.pipes[pipe].name,
                        env.round,
                        last_total.is_some(),
                        false,
                        0,
                    );
                    match catch_unwind(AssertUnwindSafe(|| route(&env.buf, &cx))) {
                        Ok(b) if b < n => b,
                        Ok(b) => {
                            let msg =
                                format!("route chose branch {b}; the fork has branches 0..{n}");
                            return fail(Step::Route, Cause::Failed(msg.into()));
                        }
                        Err(p) => return fail(Step::Route, Cause::Panicked(panic_message(&*p))),
                    }
                };
                f.counts[branch] += 1;
                if let Some(total) = last_total {
                    for b in 0..n {
                        f.branches[b].set_total(pipe, f.counts[b] + u64::from(b != branch));
                    }
                    if let Some(j) = &f.join {
                        j.set_total(pipe, total);
                    }
                    let free = &run.pipes[pipe].free;
                    for b in (0..n).filter(|&b| b != branch) {
                        let Pop::Item { item: mut c, .. } = free.pop() else {
                            return None;
                        };
                        c.round = env.round;
                        c.empty = Empty::Branch(d);
                        c.seq.copy_from_slice(&env.seq);
                        c.seq[d] = u64::MAX;
                        f.branches[b].push(pipe, c).ok()?;
                    }
                }
                f.branches[branch].push(pipe, env).ok()
            }
            SpreadRt::Broadcast { copy, pool } => {
                if let Some(total) = last_total {
                    for q in &f.branches {
                        q.set_total(pipe, total);
                    }
                    if let Some(j) = &f.join {
                        j.set_total(pipe, total);
                    }
                }
                for b in 1..n {
                    let Pop::Item { item: mut c, .. } = pool.pop() else {
                        return None;
                    };
                    c.round = env.round;
                    c.empty = env.empty;
                    c.seq.copy_from_slice(&env.seq);
                    if env.empty == Empty::No {
                        let r = catch_unwind(AssertUnwindSafe(|| copy(&env.buf, &mut c.buf, b)));
                        if let Err(p) = r {
                            return fail(Step::Copy, Cause::Panicked(panic_message(&*p)));
                        }
                    }
                    f.branches[b].push(pipe, c).ok()?;
                }
                f.branches[0].push(pipe, env).ok()
            }
        }
    }

    /// The input depth, for a priority policy.
    fn input_depth(&self, run: &Run<B>, pipe: usize) -> usize {
        match &self.input {
            Some(q) => q.len(),
            None => run.pipes[pipe].free.len(),
        }
    }

    fn make_stages(&self, run: &Run<B>) -> Result<Vec<Box<dyn Stage<B>>>, PipelineError> {
        if let Some(sh) = &self.shared {
            let s = sh.stage.lock().unwrap_or_else(|p| p.into_inner()).take();
            return Ok(s.into_iter().collect());
        }
        let mut out = Vec::with_capacity(self.makers.len());
        for (i, m) in self.makers.iter().enumerate() {
            let made = catch_unwind(AssertUnwindSafe(|| {
                (m.lock().unwrap_or_else(|p| p.into_inner()))()
            }));
            match made {
                Ok(s) => out.push(s),
                Err(p) => {
                    return Err(self.err(
                        run,
                        i,
                        self.pipes[0],
                        None,
                        Step::Init,
                        Cause::Panicked(panic_message(&*p)),
                    ))
                }
            }
        }
        Ok(out)
    }

    /// One thread of a source or stage group.
    fn thread(self: &Arc<Self>, run: &Run<B>, replica: usize) {
        let cpu0 = sys::thread_cpu_time();
        let mut st = Stats {
            busy: vec![Duration::ZERO; self.stage_names.len()],
            ..Stats::default()
        };
        let mut depth = DepthSeries::new();
        let mut policy: Option<Box<dyn PriorityPolicy>> = self
            .priority
            .map(|p| p.build_from(sys::nice().unwrap_or(0)));
        if let Some(p) = policy.as_mut().and_then(|p| p.start()) {
            run.apply(&self.name, p);
        }
        let mut source = self.source.lock().unwrap_or_else(|p| p.into_inner()).take();
        let mut stages = match self.make_stages(run) {
            Ok(s) => s,
            Err(e) => {
                run.fail(e);
                Vec::new()
            }
        };
        // init: the source first, then the stages in order.
        let pipe0 = self.pipes[0];
        let mut source_ok = true;
        if let Some(s) = source.as_mut() {
            if let Err(c) = guarded(|| s.init()) {
                run.fail(self.err(run, 0, pipe0, None, Step::Init, c));
                source_ok = false;
            }
        }
        let first_stage = usize::from(source.is_some());
        let mut inited = 0;
        if source_ok && !run.failed() {
            for (i, s) in stages.iter_mut().enumerate() {
                if let Err(c) = guarded(|| s.init()) {
                    run.fail(self.err(run, first_stage + i, pipe0, None, Step::Init, c));
                    break;
                }
                inited += 1;
            }
        }
        if source_ok && inited == stages.len() && !run.failed() {
            run.running.enter();
            self.work(
                run,
                replica,
                source.as_mut(),
                &mut stages,
                &mut policy,
                &mut st,
                &mut depth,
            );
            // Before cleanup (user code): every owed wake-up is paid by
            // the time this thread no longer counts.
            run.running.leave();
        }
        for (i, s) in stages.iter_mut().take(inited).enumerate() {
            if let Err(c) = guarded(|| s.cleanup()) {
                run.fail(self.err(run, first_stage + i, pipe0, None, Step::Cleanup, c));
            }
        }
        if let (Some(s), true) = (source.as_mut(), source_ok) {
            if let Err(c) = guarded(|| s.cleanup()) {
                run.fail(self.err(run, 0, pipe0, None, Step::Cleanup, c));
            }
        }
        // A shared stage outlives the run: hand it back for the next one.
        if let Some(sh) = &self.shared {
            if let Some(stage) = stages.pop() {
                *sh.stage.lock().unwrap_or_else(|p| p.into_inner()) = Some(stage);
            }
        }
        let cpu = match (cpu0, sys::thread_cpu_time()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let mut total = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        total.threads += 1;
        total.items += st.items;
        if total.busy.len() < st.busy.len() {
            total.busy.resize(st.busy.len(), Duration::ZERO);
        }
        for (t, b) in total.busy.iter_mut().zip(&st.busy) {
            *t += *b;
        }
        total.wait_input += st.wait_input;
        total.wait_output += st.wait_output;
        total.cpu = match (total.cpu, cpu) {
            (Some(a), Some(b)) => Some(a + b),
            (None, c) if total.threads == 1 => c,
            _ => None,
        };
        total.depth.extend(depth.points);
    }

    /// Take up to `repeat` buffers. Empty means the input ended or the run failed.
    #[allow(clippy::too_many_arguments)]
    fn take(
        &self,
        run: &Run<B>,
        source: &mut Option<&mut Box<dyn Source<B>>>,
        batch: &mut Vec<Held<B>>,
        st: &mut Stats,
        depth: &mut DepthSeries,
        ended: &mut bool,
        blocking: &mut Blocking,
        mark: &mut Instant,
    ) {
        let pipe = self.pipes[0];
        if let Some(src) = source {
            let free = &run.pipes[pipe].free;
            let rounds = &run.pipes[pipe].rounds.0;
            while batch.len() < self.repeat && !*ended {
                let t = Instant::now();
                let Pop::Item {
                    item: mut env,
                    left,
                    ..
                } = free.pop()
                else {
                    *ended = true;
                    return;
                };
                // One clock read ends the wait, stamps the depth and starts
                // the fill (clock reads were ~5 per stage and item).
                let now = Instant::now();
                st.wait_output += now - t;
                depth.record((now - run.start).as_secs_f64(), left);
                let round = rounds.load(Ordering::Relaxed);
                let cx = Context::new(
                    &self.stage_names[0],
                    &run.pipes[pipe].name,
                    round,
                    false,
                    false,
                    0,
                );
                let flow = user(run, blocking, || guarded(|| src.fill(&mut env.buf, &cx)));
                *mark = Instant::now();
                st.busy[0] += *mark - now;
                let flow = match flow {
                    Ok(f) => f,
                    Err(c) => {
                        run.fail(self.err(run, 0, pipe, Some(round), Step::Process, c));
                        *ended = true;
                        batch.clear();
                        return;
                    }
                };
                rounds.store(round + 1, Ordering::Relaxed);
                env.round = round;
                env.empty = if flow == Flow::End {
                    Empty::Stream
                } else {
                    Empty::No
                };
                let last = flow != Flow::More;
                *ended = last;
                batch.push(Held {
                    env,
                    pipe,
                    index: round,
                    last_total: last.then_some(round + 1),
                });
            }
            return;
        }
        let input = self.input.as_ref().expect("a stage has an input");
        while batch.len() < self.repeat {
            let t = Instant::now();
            match input.pop() {
                Pop::Item {
                    item,
                    pipe,
                    index,
                    last,
                    left,
                } => {
                    // One clock read ends the wait, stamps the depth and
                    // starts the first user call's busy time.
                    *mark = Instant::now();
                    st.wait_input += *mark - t;
                    depth.record((*mark - run.start).as_secs_f64(), left);
                    batch.push(Held {
                        env: item,
                        pipe,
                        index,
                        last_total: last.then_some(index + 1),
                    });
                    if last {
                        return;
                    }
                }
                Pop::End => {
                    st.wait_input += t.elapsed();
                    *ended = true;
                    return;
                }
                Pop::Aborted => {
                    *ended = true;
                    batch.clear();
                    return;
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn work(
        &self,
        run: &Run<B>,
        replica: usize,
        mut source: Option<&mut Box<dyn Source<B>>>,
        stages: &mut [Box<dyn Stage<B>>],
        policy: &mut Option<Box<dyn PriorityPolicy>>,
        st: &mut Stats,
        depth: &mut DepthSeries,
    ) {
        let first_stage = usize::from(source.is_some());
        let mut batch: Vec<Held<B>> = Vec::with_capacity(self.repeat);
        let mut ended = false;
        // One per stage of the group: in a multistage thread one stage may
        // block and the next compute.
        let mut blocking: Vec<Blocking> = self
            .stage_names
            .iter()
            .map(|_| Blocking::default())
            .collect();
        // When the last timed step ended: the start of the next user call.
        let mut mark = Instant::now();
        loop {
            self.take(
                run,
                &mut source,
                &mut batch,
                st,
                depth,
                &mut ended,
                &mut blocking[0],
                &mut mark,
            );
            if batch.is_empty() {
                return;
            }
            for (i, stage) in stages.iter_mut().enumerate() {
                for h in batch.iter_mut() {
                    let cx = Context::new(
                        &self.stage_names[first_stage + i],
                        &run.pipes[h.pipe].name,
                        h.env.round,
                        h.last_total.is_some(),
                        h.env.empty != Empty::No,
                        replica,
                    );
                    let r = user(run, &mut blocking[first_stage + i], || {
                        guarded(|| stage.process(&mut h.env.buf, &cx))
                    });
                    let now = Instant::now();
                    st.busy[first_stage + i] += now - mark;
                    mark = now;
                    if let Err(c) = r {
                        let e = self.err(
                            run,
                            first_stage + i,
                            h.pipe,
                            Some(h.env.round),
                            Step::Process,
                            c,
                        );
                        run.fail(e);
                        return;
                    }
                }
            }
            for h in batch.drain(..) {
                let pipe = h.pipe;
                let Some(out_depth) = self.convey(run, h) else {
                    return;
                };
                st.items += 1;
                if let Some(p) = policy.as_mut() {
                    let d = Depths {
                        input: self.input_depth(run, pipe),
                        output: out_depth,
                    };
                    if let Some(prio) = p.at_convey(d) {
                        run.apply(&self.name, prio);
                    }
                }
            }
            if ended && self.input.is_none() {
                return;
            }
        }
    }

    /// The dispatcher of a self-sizing stage: its buffers become tasks of a
    /// tidepool pool sized by the stage's policy.
    fn dispatch(
        self: &Arc<Self>,
        run: &Arc<Run<B>>,
        policy: &tidepool::policy::PolicySpec,
        max: usize,
    ) {
        let built = policy
            .build()
            .ok_or_else(|| format!("sizing policy `{}` cannot be built", policy.name()))
            .and_then(|p| {
                tidepool::Pool::builder()
                    .name(self.name.clone())
                    .min_threads(1)
                    .max_threads(max)
                    .record_size_series(true)
                    .policy_boxed(p)
                    .build()
                    .map_err(|e| e.to_string())
            });
        let pool = match built {
            Ok(p) => p,
            Err(msg) => {
                run.fail(self.err(
                    run,
                    0,
                    self.pipes[0],
                    None,
                    Step::Init,
                    Cause::Failed(msg.into()),
                ));
                return;
            }
        };
        // Instances not in use; after the pool's shutdown, all of them.
        let idle: Arc<Mutex<Vec<Instance<B>>>> = Arc::default();
        let made = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let input = self.input.as_ref().expect("a stage has an input");
        let mut st = Stats::default();
        let mut depth = DepthSeries::new();
        loop {
            let t = Instant::now();
            match input.pop() {
                Pop::Item {
                    item,
                    pipe,
                    index,
                    last,
                    left,
                } => {
                    st.wait_input += t.elapsed();
                    depth.record(run.start.elapsed().as_secs_f64(), left);
                    let h = Held {
                        env: item,
                        pipe,
                        index,
                        last_total: last.then_some(index + 1),
                    };
                    let (node, run2, idle2) = (self.clone(), run.clone(), idle.clone());
                    let made2 = made.clone();
                    if pool
                        .execute(move || node.sized_task(&run2, h, &idle2, &made2))
                        .is_err()
                    {
                        break;
                    }
                }
                Pop::End => break,
                Pop::Aborted => break,
            }
        }
        pool.shutdown();
        let ps = pool.stats();
        let all = std::mem::take(&mut *idle.lock().unwrap_or_else(|p| p.into_inner()));
        let mut total = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        total.busy = vec![Duration::ZERO];
        for mut inst in all {
            if inst.inited {
                let s = &mut inst.stage;
                if let Err(c) = guarded(|| s.cleanup()) {
                    run.fail(self.err(run, 0, self.pipes[0], None, Step::Cleanup, c));
                }
            }
            total.busy[0] += inst.busy;
            total.items += inst.items;
        }
        total.threads = pool
            .size_series()
            .iter()
            .map(|s| s.live)
            .max()
            .unwrap_or(1)
            .max(1);
        total.sizes = pool
            .size_series()
            .iter()
            .map(|s| (s.at.as_secs_f64(), s.live))
            .collect();
        total.wait_input = st.wait_input;
        total.cpu = ps.worker_cpu_time;
        total.depth = depth.points;
    }

    /// One buffer of a self-sizing stage, on a pool worker.
    fn sized_task(
        &self,
        run: &Run<B>,
        mut h: Held<B>,
        idle: &Mutex<Vec<Instance<B>>>,
        made: &std::sync::atomic::AtomicUsize,
    ) {
        if run.failed() {
            return;
        }
        // A worker of the stage's own pool: the stage's fixed priority holds
        // for every worker (each applies it once).
        if let Some(PrioritySpec::Fixed(p)) = self.priority {
            thread_local!(static APPLIED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
            if !APPLIED.with(|a| a.replace(true)) {
                run.apply(&self.name, p);
            }
        }
        let reused = idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut inst = match reused {
            Some(i) => i,
            None => {
                let stage = match self.make_stages(run) {
                    Ok(mut s) => s.remove(0),
                    Err(e) => return run.fail(e),
                };
                let mut i = Instance {
                    stage,
                    inited: false,
                    busy: Duration::ZERO,
                    items: 0,
                    replica: made.fetch_add(1, Ordering::Relaxed),
                };
                let s = &mut i.stage;
                if let Err(c) = guarded(|| s.init()) {
                    idle.lock().unwrap_or_else(|p| p.into_inner()).push(i);
                    return run.fail(self.err(run, 0, h.pipe, None, Step::Init, c));
                }
                i.inited = true;
                i
            }
        };
        let cx = Context::new(
            &self.stage_names[0],
            &run.pipes[h.pipe].name,
            h.env.round,
            h.last_total.is_some(),
            h.env.empty != Empty::No,
            inst.replica,
        );
        let t = Instant::now();
        let s = &mut inst.stage;
        let r = guarded(|| s.process(&mut h.env.buf, &cx));
        inst.busy += t.elapsed();
        let round = h.env.round;
        let pipe = h.pipe;
        match r {
            Ok(()) => {
                if self.convey(run, h).is_some() {
                    inst.items += 1;
                }
            }
            Err(c) => run.fail(self.err(run, 0, pipe, Some(round), Step::Process, c)),
        }
        // Kept for reuse, and for cleanup at the end.
        idle.lock().unwrap_or_else(|p| p.into_inner()).push(inst);
    }
}

/// One instance of a self-sizing stage's state.
struct Instance<B> {
    stage: Box<dyn Stage<B>>,
    inited: bool,
    busy: Duration,
    items: u64,
    replica: usize,
}

/// Start every node's threads, wait for all of them, and report.
pub(crate) fn execute<B: Send + 'static>(
    nodes: Vec<Node<B>>,
    run: Arc<Run<B>>,
) -> Result<Report, PipelineError> {
    let nodes: Vec<Arc<Node<B>>> = nodes.into_iter().map(Arc::new).collect();
    let mut handles = Vec::new();
    for node in &nodes {
        let threads = match (&node.input, &node.replicas) {
            (None, _) | (_, Replicas::Sized { .. }) => 1,
            (_, Replicas::Fixed(n)) => *n,
        };
        for replica in 0..threads {
            let (n, r) = (node.clone(), run.clone());
            let spawned = std::thread::Builder::new()
                .name(node.name.chars().take(15).collect())
                .spawn(move || {
                    let body = AssertUnwindSafe(|| match &n.replicas {
                        Replicas::Sized { policy, max } if n.input.is_some() => {
                            n.dispatch(&r, policy, *max)
                        }
                        _ => n.thread(&r, replica),
                    });
                    // User code's panics are caught where it runs; one that
                    // gets here is the framework's own: fail the run at once,
                    // so that no thread waits for this one forever.
                    if let Err(p) = catch_unwind(body) {
                        r.fail(PipelineError {
                            pipeline: r.pipes[n.pipes[0]].name.clone(),
                            stage: n.name.clone(),
                            round: None,
                            step: Step::Process,
                            cause: Cause::Panicked(format!("internal: {}", panic_message(&*p))),
                        });
                    }
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    let pipe = &run.pipes[node.pipes[0]].name;
                    run.fail(crate::pipeline::spawn_error(pipe, &node.name, e));
                }
            }
        }
    }
    for h in handles {
        // Threads catch every panic of user code; one that escapes is ours.
        if let Err(p) = h.join() {
            run.fail(PipelineError {
                pipeline: String::new(),
                stage: String::new(),
                round: None,
                step: Step::Process,
                cause: Cause::Panicked(format!("internal: {}", panic_message(&*p))),
            });
        }
    }
    let elapsed = run.start.elapsed();
    if let Some(e) = run.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    let stages = nodes
        .iter()
        .map(|n| {
            let st = n.stats.lock().unwrap_or_else(|p| p.into_inner());
            let mut depth = st.depth.clone();
            depth.sort_by(|a, b| a.0.total_cmp(&b.0));
            StageReport {
                name: n.name.clone(),
                pipelines: n.pipes.iter().map(|&p| run.pipes[p].name.clone()).collect(),
                threads: st.threads,
                items: st.items,
                busy: st.busy.iter().sum(),
                busy_by_stage: n
                    .stage_names
                    .iter()
                    .cloned()
                    .zip(st.busy.iter().copied())
                    .collect(),
                wait_input: st.wait_input,
                wait_output: st.wait_output,
                cpu: st.cpu,
                depth,
                priority: n.priority.map(|p| p.to_string()),
                sizes: st.sizes.clone(),
            }
        })
        .collect();
    let pipelines = run
        .pipes
        .iter()
        .map(|p| PipelineReport {
            name: p.name.clone(),
            rounds: p.rounds.0.load(Ordering::Relaxed),
            buffers: p.buffers,
        })
        .collect();
    Ok(Report {
        elapsed,
        pipelines,
        stages,
        notes: std::mem::take(&mut *run.notes.lock().unwrap_or_else(|p| p.into_inner())),
        cores: tidepool::sys::cores(),
    })
}
