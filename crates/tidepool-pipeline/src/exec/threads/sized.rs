//! A self-sizing stage: one dispatcher thread turns the stage's buffers
//! into tasks of a tidepool pool whose size the stage's policy sets.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{guarded, Cause, Step};
use crate::priority::PrioritySpec;
use crate::queue::Pop;
use crate::report::DepthSeries;
use crate::stage::{Context, Stage};

use super::env::Empty;
use super::node::{Held, Node, Stats};
use super::state::Run;

impl<B: Send + 'static> Node<B> {
    /// The dispatcher of a self-sizing stage: its buffers become tasks of a
    /// tidepool pool sized by the stage's policy.
    pub(super) fn dispatch(
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
                    .record_live_threads_series(true)
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
            .live_threads_series()
            .iter()
            .map(|s| s.live_threads)
            .max()
            .unwrap_or(1)
            .max(1);
        total.sizes = pool
            .live_threads_series()
            .iter()
            .map(|s| (s.at.as_secs_f64(), s.live_threads))
            .collect();
        total.wait_input = st.wait_input;
        total.cpu = ps.worker_cpu_time;
        total.depth = depth.points;
    }

    /// One buffer of a self-sizing stage, on a pool worker.
    pub(super) fn sized_task(
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
pub(super) struct Instance<B> {
    stage: Box<dyn Stage<B>>,
    inited: bool,
    busy: Duration,
    items: u64,
    replica: usize,
}
