//! A thread group at run time and the loop each of its threads runs: take
//! a batch (from the free pool for a source), run the group's stages on it,
//! convey each buffer on (through a fork where there is one).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::builder::{Maker, Replicas, SharedInner};
use crate::error::{guarded, panic_message, Cause, PipelineError, Step};
use crate::priority::{Depths, PriorityPolicy, PrioritySpec};
use crate::queue::Pop;
use crate::report::DepthSeries;
use crate::running::Blocking;
use crate::stage::{Context, Flow, Source, Stage};
use crate::sys;

use super::env::{Empty, Env, Q};
use super::route::{Dest, ForkRt, Out, SpreadRt};
use super::state::Run;

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
    pub(super) threads: usize,
    pub(super) items: u64,
    pub(super) busy: Vec<Duration>,
    pub(super) wait_input: Duration,
    pub(super) wait_output: Duration,
    pub(super) cpu: Option<Duration>,
    pub(super) depth: Vec<(f64, usize)>,
    pub(super) sizes: Vec<(f64, usize)>,
}

/// Run a counted thread's user code; a thread whose user code blocks
/// leaves the running count for the call (see `running.rs`).
pub(super) fn user<B, T>(run: &Run<B>, blocking: &mut Blocking, f: impl FnOnce() -> T) -> T {
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

/// What one thread of a group keeps while it works.
struct Local<'a, B> {
    replica: usize,
    /// The source, on a source group's thread.
    source: Option<&'a mut Box<dyn Source<B>>>,
    policy: Option<Box<dyn PriorityPolicy>>,
    st: &'a mut Stats,
    depth: &'a mut DepthSeries,
    /// The input ended (or the source's stream did, or the run failed).
    ended: bool,
    /// Per stage of the group, whether its user code blocks.
    blocking: Vec<Blocking>,
    /// When the last timed step ended: the start of the next user call.
    mark: Instant,
}

/// A buffer in a thread's hands: the envelope, its arrival index at this
/// node, and the node's input total if it is the node's last.
pub(super) struct Held<B> {
    pub(super) env: Env<B>,
    pub(super) pipe: usize,
    pub(super) index: u64,
    pub(super) last_total: Option<u64>,
}

impl<B: Send + 'static> Node<B> {
    pub(super) fn err(
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
    pub(super) fn convey(&self, run: &Run<B>, h: Held<B>) -> Option<usize> {
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
    pub(super) fn fork(
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
    pub(super) fn input_depth(&self, run: &Run<B>, pipe: usize) -> usize {
        match &self.input {
            Some(q) => q.len(),
            None => run.pipes[pipe].free.len(),
        }
    }

    pub(super) fn make_stages(
        &self,
        run: &Run<B>,
    ) -> Result<Vec<Box<dyn Stage<B>>>, PipelineError> {
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
    pub(super) fn thread(self: &Arc<Self>, run: &Run<B>, replica: usize) {
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
            let mut l = Local {
                replica,
                source: source.as_mut(),
                policy,
                st: &mut st,
                depth: &mut depth,
                ended: false,
                // One per stage of the group: in a multistage thread one
                // stage may block and the next compute.
                blocking: self
                    .stage_names
                    .iter()
                    .map(|_| Blocking::default())
                    .collect(),
                mark: Instant::now(),
            };
            self.work(run, &mut l, &mut stages);
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
    fn take(&self, run: &Run<B>, l: &mut Local<'_, B>, batch: &mut Vec<Held<B>>) {
        let pipe = self.pipes[0];
        if let Some(src) = l.source.as_mut() {
            let free = &run.pipes[pipe].free;
            let rounds = &run.pipes[pipe].rounds;
            while batch.len() < self.repeat && !l.ended {
                let t = Instant::now();
                let Pop::Item {
                    item: mut env,
                    left,
                    ..
                } = free.pop()
                else {
                    l.ended = true;
                    return;
                };
                // One clock read ends the wait, stamps the depth and starts
                // the fill (clock reads were ~5 per stage and item).
                let now = Instant::now();
                l.st.wait_output += now - t;
                l.depth.record((now - run.start).as_secs_f64(), left);
                let round = rounds.load(Ordering::Relaxed);
                let cx = Context::new(
                    &self.stage_names[0],
                    &run.pipes[pipe].name,
                    round,
                    false,
                    false,
                    0,
                );
                // A due stop ends the stream as the source's `Flow::End` would.
                let flow = if run.pipes[pipe].stopper.due() {
                    Ok(Flow::End)
                } else {
                    user(run, &mut l.blocking[0], || {
                        guarded(|| src.fill(&mut env.buf, &cx))
                    })
                };
                l.mark = Instant::now();
                l.st.busy[0] += l.mark - now;
                let flow = match flow {
                    Ok(f) => f,
                    Err(c) => {
                        run.fail(self.err(run, 0, pipe, Some(round), Step::Process, c));
                        l.ended = true;
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
                l.ended = last;
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
                    l.mark = Instant::now();
                    l.st.wait_input += l.mark - t;
                    l.depth.record((l.mark - run.start).as_secs_f64(), left);
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
                    l.st.wait_input += t.elapsed();
                    l.ended = true;
                    return;
                }
                Pop::Aborted => {
                    l.ended = true;
                    batch.clear();
                    return;
                }
            }
        }
    }

    fn work(&self, run: &Run<B>, l: &mut Local<'_, B>, stages: &mut [Box<dyn Stage<B>>]) {
        let first_stage = usize::from(l.source.is_some());
        let mut batch: Vec<Held<B>> = Vec::with_capacity(self.repeat);
        loop {
            self.take(run, l, &mut batch);
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
                        l.replica,
                    );
                    let r = user(run, &mut l.blocking[first_stage + i], || {
                        guarded(|| stage.process(&mut h.env.buf, &cx))
                    });
                    let now = Instant::now();
                    l.st.busy[first_stage + i] += now - l.mark;
                    l.mark = now;
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
                l.st.items += 1;
                if let Some(p) = l.policy.as_mut() {
                    let d = Depths {
                        input: self.input_depth(run, pipe),
                        output: out_depth,
                    };
                    if let Some(prio) = p.at_convey(d) {
                        run.apply(&self.name, prio);
                    }
                }
            }
            if l.ended && self.input.is_none() {
                return;
            }
        }
    }
}
