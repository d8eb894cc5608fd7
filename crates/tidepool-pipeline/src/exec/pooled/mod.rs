//! Pooled execution: any worker runs any stage (oneTBB `parallel_pipeline`
//! style) instead of a thread per stage, on workers that follow the stages'
//! measured blocking share (`pooled`) or on a fixed number of them
//! (`pooled_threads`).
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
//! each group's `total` is the number of buffers that will reach it, set
//! before the one that completes it moves: the stream's round count, set by
//! the source's task before it conveys its last buffer, or a route fork's
//! count for its branch ("Forks and joins"). The run ends when the stream
//! has ended and every root (below) is back in the free stack, or at the
//! first failure. Several pipelines run together are one run ("Shared
//! stages").
//!
//! # Forks and joins
//!
//! Forks, broadcasts and their joins become fixed successors between
//! groups (`graph.rs` flattens the nested description into one list, the
//! branches after their fork, in pre-order, so "downstream first" still
//! scans the list backwards). A group's finished buffer goes to its `next`:
//! a group's input, the free stack, a fork, a route fork's join, or a
//! broadcast's gather. Everything below happens under the run's lock, in
//! the critical section that completes the task, except user code (a
//! route, a copy, a merge), which runs in tasks like a stage's.
//!
//! **Route forks.** A fork follows a single-instance group (the builder
//! insists), so the fork group's task calls `route` on each buffer after
//! its stages, in input order, and notes the branch in the buffer's batch
//! entry; its completion pushes the buffer into that branch's first group.
//! Each buffer records its position at the fork (its arrival index at the
//! fork group) in a slot per nesting depth. A branch's groups count
//! against the branch's own *scope*: when the fork conveys its last buffer
//! it sets every branch's groups' total (what reached the branch's first
//! group, plus one) and sends each other branch an empty *notice*, so that
//! every stage of every branch gets the last-buffer notice once. The
//! notices are buffers of their own, `branches − 1` per fork, made with the
//! pipeline's buffers and never used for data (their content, round and
//! emptiness are written by the fork group's task, which owns them until
//! its completion hands them on). The join is not a task: a branch's last
//! group delivers to it, and it drops its own notices (they go to the free
//! stack), reorders by position at the fork if the fork is ordered (a ring
//! like a replicated group's), and passes buffers on to what follows the
//! fork, whose groups count against the fork group's scope.
//!
//! **Broadcasts.** Copies are paired with buffers statically: every *root*
//! (a pipeline buffer or a notice) has `branches − 1` copies per broadcast,
//! made before the run, so a broadcast never waits for a free copy and
//! never allocates. A root has at most one buffer at a broadcast at a time
//! (the original comes back only after the gather released its copies), so
//! a copy is free whenever its root's buffer arrives. The fork group's task
//! fills the copies (`copy`) after its stages; its completion pushes the
//! original into branch 0 and copy `b` into branch `b`, each carrying the
//! original's positions. The gather counts, per position, the branches
//! that have delivered (a ring of counts and of the originals); a round
//! complete in position order goes to the broadcast's *merge group*, a
//! single-instance group without stages whose task folds the copies into
//! the original (`merge`, in branch order; not for empty buffers) and
//! conveys it on. The merge group is scheduled like any group (kind,
//! sizing), and is not a row of the report (as the join is not a stage
//! thread-per-stage).
//!
//! Every ring is `width` wide, the number of roots (of every pipeline of
//! the run): a group's input, a reorder ring and a join's ring never hold
//! two buffers of one root.
//! Nothing here waits: the new synchronisation is none, and the protocol
//! below is unchanged (a completion makes work runnable only under the
//! lock). The `loom` model `loom_pooled_fork_and_broadcast` runs a route
//! fork inside a broadcast on two workers.
//!
//! # Shared stages
//!
//! Pooled pipelines run together ([`crate::run_all`], all with the same
//! `pooled`, `pooled_policy` or `pooled_threads`; anything else is refused
//! by name) are one run: one lock, one state, one set of workers, one
//! sizing policy and one `compute` limit for all of them, as their stage
//! threads would share the machine. `graph.rs` flattens each pipeline in
//! turn into the one list of groups. Each pipeline has its own source group,
//! whose input ring is the pipeline's free stack, its own block of ids (its
//! buffers, notices and copies; `pipe_of` says whose an id is), and its own
//! scope, whose total its source's task sets when its stream ends (the
//! source group's own `total` is it). A buffer leaving its pipeline's last
//! group goes back to its own pipeline's free stack.
//!
//! **One group, a lane per pipeline.** A shared stage is one group, made
//! where the first pipeline passes it: its instances (the `SharedStage`'s
//! one instance, taken from it for the run and handed back after cleanup,
//! or `replicas` made by its maker), its idle stack, its kind, and one
//! input ring, into which every pipeline that passes it delivers. So it
//! serves buffers in the order they arrived, whatever their pipeline, at
//! most `replicas` at once, as its thread(s) serve its one queue. What that
//! queue and the wiring after it keep per pipeline, the pipeline's *lane*
//! keeps (a counter entry after the joins', not a task kind): the buffers
//! of that pipeline taken (their arrival index), its total (set in its
//! stream's scope, so that the pop that takes a pipeline's last buffer
//! carries its last-buffer notice: each pipeline's reaches exactly one
//! instance), for an ordered replicated stage a reorder ring of its own
//! (each pipeline keeps its order, and pipelines never wait for each
//! other), and its successor, the rest of that pipeline. A pick from the
//! shared group counts the buffer in its pipeline's lane; its completion
//! passes it through the lane's ring to the lane's successor.
//!
//! **Order across pipelines.** Priorities stay refused (a shared stage's
//! too: each is a thread's). The scan "downstream first" goes through the
//! groups by their distance from their pipeline's last group (a shared
//! stage by its largest), so every pipeline's downstream groups come before
//! any pipeline's upstream ones, and through the sources last, taking
//! turns (`turn`: after a source's pick, the next pipeline's source is
//! tried first). Without turns, one worker would keep filling the pipeline
//! scanned first and never serve another whose source is as runnable; with
//! the sources last every buffer already in flight drains first. One
//! pipeline's order is unchanged (its source was group 0).
//!
//! **End, failure and stop.** The run is over when every pipeline's stream
//! has ended and all its roots are back in its free stack, or at the first
//! failure in any pipeline: every worker returns and the run returns that
//! failure, named by the pipeline of the buffer it failed on, as "the first
//! failure in any of them stops all of them" thread per stage. A stop or a
//! deadline is one pipeline's (its source's task asks its own `Stopper`):
//! it ends that pipeline's stream as `Flow::End` would, the others run to
//! their own end, and the report says which stopped.
//!
//! **Synchronisation: none new.** All of this is decided under the run's
//! lock, in the critical sections that pick and complete tasks for one
//! pipeline: a shared group's input is a group's input, a lane's ring a
//! group's reorder ring, `turn` a scalar beside `limit`, and `over` reads
//! the source groups' counters. `runnable` is unchanged (a shared group
//! runs with an idle instance and a buffer in its ring), so the protocol
//! and its invariant below hold as they are. The `loom` models
//! `loom_pooled_shared_stage*` run two pipelines through one shared stage:
//! replicated and ordered on two workers, and on one instance with the
//! workers self-sizing.
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
//! word and the run's scalars (`parked`, `notified`, the spinner count,
//! `limit`, a failed flag, `turn`, the streams still open) fill one line of their own; a
//! pipeline's rounds filled and stream total are its source group's
//! `popped` and `total`. Each group's counters (its input ring's head and length,
//! `popped`, `total`, idle-instance count, reorder position, kind) are 32
//! bytes, two groups to a line (a join's release position takes an entry
//! after the groups', a shared stage's lane one after the joins'). The report's item counts are the groups' `popped`. The queues carry small ids, not buffers or
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
//! # Blocking stages: a sizing policy sizes the workers
//!
//! A worker blocked in a stage's I/O is a worker lost to the others: with
//! as many workers as cores, two blocking stages can leave no worker to
//! compute. So without a fixed count ([`crate::Builder::pooled`]) the run
//! starts one worker per group instance (no more tasks can run at once),
//! and two limits decide how many run: at most `limit` tasks, which a
//! tidepool sizing policy sets (`auto` unless
//! [`crate::Builder::pooled_policy`] names another), and at most `compute`
//! *computing* tasks (the cores), so that the workers that run are the
//! cores plus one per task blocked in a blocking group, which is the count
//! a user would set by hand (`pooled_threads(cores + blocking stages)`).
//! The rest stay parked.
//!
//! **The policy** (`sizing.rs`) is fed an `Observation` as a pool's is:
//! per window, the buffers done (arrivals equal completions: the pipeline
//! is a closed loop), the tasks' busy time, the thread CPU time of sampled
//! tasks (each worker's first four, then one in 16; each worker counts on a
//! line of its own), and, read under the lock, the buffers waiting in the
//! groups' inputs, the tasks running and the workers parked. It is called
//! once before any worker starts, then on its schedule's period, by the
//! worker that finishes a task once the time has come (the others see the
//! time has not come, or skip while one calls it), outside the run's lock.
//! Its decision becomes `limit`: its spawn limit while it grows on demand
//! (a runnable task waiting with every running worker busy is that demand),
//! else its target, between 1 and the workers. Under `loom` a scripted
//! policy runs one task at a time until the second completion, then raises
//! the limit to every worker.
//!
//! The protocol change is one rule: **a group is runnable only while fewer
//! than `limit` tasks run, and a computing group only while fewer than
//! `compute` computing tasks run** (no limits with `pooled_threads`). The
//! running tasks are counted from the groups' counters under the lock (a
//! group's instances not idle, for the computing ones the groups marked
//! computing), so the rule needs no state but `limit` and every decision
//! above reads it under the lock, as it reads the other conditions of
//! runnability. The invariant *if something is runnable and a worker is
//! parked, a wake-up is on its way* holds with this `runnable`: the counts
//! fall only when a task completes, under the lock, and the completing
//! worker then picks and wakes as for any completion (it takes the freed
//! place itself, or wakes a spare for it); `limit` rises only under the
//! lock, by the worker that applies a decision, which then wakes a parked
//! worker if something became runnable, as a completion does (and wake-ups
//! chain from there). A group whose kind changes at a completion is
//! likewise judged in that critical section. The `loom` models
//! `loom_pooled_self_sizing_*` run the real executor with the computing
//! limit at one task, a blocking group beside two computing ones, and the
//! scripted policy's limit raised from one task to every worker while
//! work waits for it.
//!
//! The spin before parking stays off when there are more workers than
//! cores (a spinning worker could hold a core a blocking worker wakes to).
//!
//! # What differs from thread-per-stage mode
//!
//! A stage's `init` runs on the thread that calls `run`, for every
//! instance, before any worker starts; `cleanup` runs there too, after
//! every worker has been joined. `process` runs on whichever worker holds
//! the instance (stages are `Send`). Stages never wait in this mode, so the
//! report's wait columns are zero; the workers' idle time (parked with
//! nothing runnable) and CPU time are in the report's notes.

mod graph;
mod sizing;
mod state;
mod worker;

use std::ops::DerefMut;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::builder::{Builder, SharedInner, Workers};
use crate::error::{guarded, panic_message, Cause, PipelineError, Step};
use crate::report::{DepthSeries, PipelineReport, Report, StageReport};
use crate::running::Blocking;
use crate::stop::Stopper;
use crate::sync::{lock, Condvar, Mutex, MutexGuard};
use crate::sys::SchedClass;

use graph::{Flat, ForkKind};
use sizing::Sizer;
use state::{Buf, Counters, GroupRt, Inst, LaneRt, Packed, PipeRt, Plan, State, NONE};
use tidepool::policy::Trigger;
use worker::{Cold, Shared};
/// Make and `init` every group's instances (each source goes to its
/// pipeline's source group, a fork's or gather's extra code to the group's
/// one instance, a single shared stage's instance is taken from it for the
/// run).
fn make_instances<B: Send + 'static>(
    pipes: &[String],
    sources: Vec<Box<dyn crate::stage::Source<B>>>,
    flat: &mut [Flat<B>],
    groups: &[GroupRt],
) -> (Vec<Vec<Inst<B>>>, Option<PipelineError>) {
    let err = |g: &GroupRt, stage: &str, step, cause| PipelineError {
        pipeline: pipes[g.pipe].clone(),
        stage: stage.to_string(),
        round: None,
        step,
        cause,
    };
    let mut sources: Vec<_> = sources.into_iter().map(Some).collect();
    let mut all = Vec::with_capacity(groups.len());
    for (gs, rt) in flat.iter_mut().zip(groups) {
        let mut insts = Vec::with_capacity(rt.instances);
        for replica in 0..rt.instances {
            let mut stages = Vec::with_capacity(gs.stages.len().max(1));
            for s in &gs.stages {
                let made = catch_unwind(AssertUnwindSafe(|| {
                    (s.make.lock().unwrap_or_else(|p| p.into_inner()))()
                }));
                match made {
                    Ok(st) => stages.push(st),
                    Err(p) => {
                        all.push(insts);
                        let c = Cause::Panicked(panic_message(&*p));
                        return (all, Some(err(rt, &s.name, Step::Init, c)));
                    }
                }
            }
            if let Some(sh) = gs.shared.as_ref().filter(|sh| sh.make.is_none()) {
                match sh.stage.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    Some(st) => stages.push(st),
                    None => {
                        all.push(insts);
                        let c = Cause::Failed(
                            "the shared stage is running in another run at the same time".into(),
                        );
                        return (all, Some(err(rt, &sh.name, Step::Init, c)));
                    }
                }
            }
            insts.push(Inst {
                source: if rt.source {
                    sources[gs.pipe].take()
                } else {
                    None
                },
                stages,
                extra: gs.extra.take(),
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
                    return (all, Some(err(rt, n, Step::Init, c)));
                }
                inst.inited += 1;
            }
            for (st, n) in inst.stages.iter_mut().zip(names) {
                if let Err(c) = guarded(|| st.init()) {
                    return (all, Some(err(rt, n, Step::Init, c)));
                }
                inst.inited += 1;
            }
        }
    }
    (all, None)
}

/// `cleanup` every instance whose `init` ran (its stages in order, then
/// the source, as a stage thread does); returns the first failure. A
/// single shared stage's instance goes back to it for its next run.
fn cleanup<B, I: DerefMut<Target = Inst<B>>>(
    pipes: &[String],
    all: &mut [Vec<I>],
    groups: &[GroupRt],
    handback: &[(usize, Arc<SharedInner<B>>)],
) -> Option<PipelineError> {
    let mut first = None;
    for (insts, rt) in all.iter_mut().zip(groups) {
        let name = &pipes[rt.pipe];
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
    for (g, sh) in handback {
        if let Some(st) = all.get_mut(*g).and_then(|i| i.first_mut()?.stages.pop()) {
            *sh.stage.lock().unwrap_or_else(|p| p.into_inner()) = Some(st);
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

/// Run checked pooled pipelines together on one set of workers (the
/// calling thread is one of them).
pub(crate) fn run<B: Send + 'static>(
    mut specs: Vec<Builder<B>>,
    workers: Workers,
) -> Result<Report, PipelineError> {
    let start = Instant::now();
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    let (mut flat, sources) = graph::flatten(&mut specs);
    if flat.roots.len() >= u32::MAX as usize {
        return Err(PipelineError {
            pipeline: names[0].clone(),
            stage: String::new(),
            round: None,
            step: Step::Init,
            cause: Cause::Failed(
                format!(
                    "pooled pipelines run together take fewer than {} buffers in all (counting \
                     each broadcast's copies: buffers × branches)",
                    u32::MAX
                )
                .into(),
            ),
        });
    }
    let width = flat.width;
    // The id regions: per group its input ring, idle stack and reorder
    // ring, per fork its join's region, then every id's positions.
    let mut at = 0;
    let groups: Vec<GroupRt> = flat
        .groups
        .iter()
        .map(|f| {
            let ring = at;
            let idle = ring + width;
            let reorder = idle + f.instances;
            at = reorder + if f.ordered { width } else { 0 };
            GroupRt {
                name: f.names.join("+"),
                stage_names: f.names.clone(),
                repeat: f.repeat,
                ordered: f.ordered,
                instances: f.instances,
                ring,
                idle,
                reorder,
                next: f.next,
                scope: f.scope,
                merge: f.merge,
                fork: f.fork,
                source: f.source,
                pipe: f.pipe,
                pipes: match f.lanes.is_empty() {
                    true => vec![f.pipe],
                    false => (0..f.lanes.len())
                        .filter(|&p| f.lanes[p] != graph::NO_LANE)
                        .collect(),
                },
                lanes: f.lanes.clone().into_boxed_slice(),
                next_turn: ((f.pipe + 1) % specs.len()) as u32,
            }
        })
        .collect();
    let handback: Vec<(usize, Arc<SharedInner<B>>)> = flat
        .groups
        .iter()
        .enumerate()
        .filter_map(|(g, f)| Some((g, f.shared.clone().filter(|sh| sh.make.is_none())?)))
        .collect();
    let mut gathers = Vec::new();
    for fk in &mut flat.forks {
        fk.region = at;
        at += match fk.kind {
            ForkKind::Route { ordered: true, .. } => width,
            ForkKind::Route { ordered: false, .. } => 0,
            ForkKind::Broadcast { .. } => {
                gathers.push(at);
                2 * width
            }
        };
    }
    // Each ordered lane's reorder ring.
    let lanes: Vec<LaneRt> = std::mem::take(&mut flat.lanes)
        .into_iter()
        .map(|lane| {
            let reorder = at;
            if lane.ordered {
                at += width;
            }
            LaneRt { lane, reorder }
        })
        .collect();
    let seqs = at;
    let ids_total = flat.roots.len();
    at += ids_total * flat.depths;
    // A worker per instance: no more tasks can run at once.
    let (workers, compute, policy) = match workers {
        Workers::Fixed(n) => (n, usize::MAX, None),
        Workers::Sized { compute, policy } => {
            let instances: usize = groups.iter().map(|g| g.instances).sum();
            // Under `loom`, a scripted policy that raises the limit once.
            #[cfg(loom)]
            let policy: Option<Box<dyn tidepool::policy::SizingPolicy>> = {
                let _ = policy;
                Some(Box::new(sizing::Script::default()))
            };
            #[cfg(not(loom))]
            let policy = policy.build();
            (
                instances.clamp(1, usize::from(u16::MAX) - 1),
                compute.max(1),
                policy,
            )
        }
    };
    // The policy's first decision, before any worker starts.
    let mut limit = u16::MAX;
    let sizer = policy.map(|p| {
        let mut sz = Sizer::new(p, workers);
        let now = sizing::Now {
            at: Duration::ZERO,
            queued: 0,
            running: 0,
            parked: 0,
            limit: workers,
        };
        let l = sz.decide(Trigger::Start, now, &[]).unwrap_or(workers);
        limit = l as u16; // at most `workers`, below u16::MAX
        sz
    });
    let (mut insts, error) = make_instances(&names, sources, &mut flat.groups, &groups);
    if let Some(e) = error {
        let mut refs: Vec<Vec<&mut Inst<B>>> =
            insts.iter_mut().map(|g| g.iter_mut().collect()).collect();
        cleanup(&names, &mut refs, &groups, &handback);
        return Err(e);
    }
    // Each pipeline's buffers, notices and copies, made by its maker.
    let mut bufs = Vec::with_capacity(ids_total);
    for (p, spec) in specs.iter_mut().enumerate() {
        let (_, make) = spec.buffers.as_mut().expect("validated");
        let ids = flat.pipe_of.iter().filter(|&&q| q as usize == p).count();
        bufs.extend((0..ids).map(|_| {
            Mutex::new(Buf {
                buf: make(),
                round: 0,
                empty: false,
            })
        }));
    }
    let mut ids = Packed::new(at, NONE);
    for &g in &gathers {
        for k in 0..width {
            ids[g + k] = 0; // no branch has brought the round yet
        }
    }
    let lane_at = groups.len() + flat.forks.len();
    let mut counters = Packed::new(
        lane_at + lanes.len(),
        Counters {
            total: u64::MAX,
            ..Counters::default()
        },
    );
    for (g, rt) in groups.iter().enumerate() {
        for i in 0..rt.instances {
            ids[rt.idle + i] = i as u32; // validated: fewer than u32::MAX
        }
        counters[g] = Counters {
            idle: rt.instances as u16, // validated: at most u16::MAX
            // Blocking until sampled; under `loom` (which samples nothing)
            // the kinds alternate, so that the model covers declining.
            blocks: !cfg!(loom) || g % 2 == 1,
            total: u64::MAX,
            ..Counters::default()
        };
    }
    // Every buffer starts in its pipeline's free stack (its source group's
    // ring).
    for p in &flat.pipes {
        for i in 0..p.buffers {
            ids[groups[p.source].ring + i] = p.base + i as u32;
        }
        counters[p.source].len = p.buffers as u32;
    }
    let pipes = flat
        .pipes
        .into_iter()
        .zip(&specs)
        .map(|(ids, spec)| PipeRt {
            name: spec.name.clone(),
            ids,
            stopper: Stopper::new(spec.stop.clone(), spec.deadline),
        })
        .collect();
    let shared = Arc::new(Shared {
        state: CachePadded::new(Mutex::new(State {
            groups: counters,
            ids,
            parked: 0,
            notified: 0,
            spinning: 0,
            limit,
            failed: false,
            turn: 0,
            open: specs.len() as u32, // run_all's pipelines, far fewer
        })),
        plan: Plan {
            groups,
            forks: flat.forks,
            width,
            roots: flat.roots,
            depths: flat.depths,
            seqs,
            pipes,
            pipe_of: flat.pipe_of.into_boxed_slice(),
            lanes,
            lane_at,
            order: flat.order,
        },
        cv: Condvar::new(),
        start,
        bufs: bufs.into_boxed_slice(),
        insts: insts
            .into_iter()
            .map(|g| g.into_iter().map(Mutex::new).collect())
            .collect(),
        cold: Mutex::new(Cold {
            error: None,
            idle: Duration::ZERO,
            cpu: Some(Duration::ZERO),
        }),
        epoch: CachePadded::new(std::sync::atomic::AtomicU64::new(0)),
        spin: !cfg!(loom) && workers <= tidepool::sys::cores(),
        compute,
        next_call: std::sync::atomic::AtomicU64::new(sizer.as_ref().map_or(u64::MAX, |s| {
            s.next_call(Duration::ZERO).as_nanos().min(u64::MAX as u128) as u64
        })),
        sizer: sizer.map(std::sync::Mutex::new),
        meters: (0..workers).map(|_| CachePadded::default()).collect(),
        classes: cfg!(loom) || matches!(crate::sys::sched_class(), Ok(Some(SchedClass::Other))),
    });
    let name = &names[0];
    let mut handles = Vec::with_capacity(workers.saturating_sub(1));
    for i in 1..workers {
        let sh = shared.clone();
        match spawn(
            &format!("{}-w{i}", name.chars().take(10).collect::<String>()),
            move || sh.worker_guarded(i),
        ) {
            Ok(h) => handles.push(h),
            Err(e) => {
                let mut s = lock(&shared.state);
                shared.fail(&mut s, crate::error::spawn_error(name, "pooled worker", e));
                drop(s);
                shared.cv.notify_all();
                break;
            }
        }
    }
    shared.worker_guarded(0);
    if shared.classes && !cfg!(loom) {
        // The calling thread was worker 0: back to its own class.
        let _ = crate::sys::set_sched_class(SchedClass::Other);
    }
    for h in handles {
        if h.join().is_err() {
            let e = shared.err(
                0,
                name,
                None,
                Step::Process,
                Cause::Panicked("internal: a pooled worker panicked".into()),
            );
            let mut s = lock(&shared.state);
            shared.fail(&mut s, e);
        }
    }
    // Every worker has returned: every instance is idle, in place.
    let s = lock(&shared.state);
    let mut retired: Vec<Vec<MutexGuard<'_, Inst<B>>>> = shared
        .insts
        .iter()
        .map(|g| g.iter().map(lock).collect())
        .collect();
    let cleanup_error = cleanup(&names, &mut retired, &shared.plan.groups, &handback);
    let mut cold = lock(&shared.cold);
    if let Some(e) = cold.error.take().or(cleanup_error) {
        return Err(e);
    }
    let elapsed = start.elapsed();
    let stages = shared
        .plan
        .groups
        .iter()
        .zip(&mut retired)
        .enumerate()
        .filter(|(_, (rt, _))| !rt.merge)
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
                pipelines: rt.pipes.iter().map(|&p| names[p].clone()).collect(),
                threads: rt.instances,
                // Every buffer taken was conveyed: the run is over.
                items: s.groups[g].popped,
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
    let pipelines = shared
        .plan
        .pipes
        .iter()
        .map(|p| PipelineReport {
            name: p.name.clone(),
            rounds: s.groups[p.ids.source].popped,
            buffers: p.ids.buffers,
            stopped: p.stopper.stopped(),
        })
        .collect();
    Ok(Report {
        elapsed,
        pipelines,
        stages,
        notes: vec![note],
        cores: tidepool::sys::cores(),
    })
}
