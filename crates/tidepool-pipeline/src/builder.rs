//! Describing a pipeline: its buffers, its source, its thread groups.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tidepool::policy::PolicySpec;

use crate::priority::PrioritySpec;
use crate::stage::{BoxError, Context, Source, Stage};
use crate::stop::StopHandle;

/// Makes one instance of a stage (one per thread that runs it).
pub(crate) type Maker<B> = Arc<Mutex<dyn FnMut() -> Box<dyn Stage<B>> + Send>>;

/// A fork's routing function: which branch a buffer takes.
pub(crate) type Route<B> = Box<dyn FnMut(&B, &Context) -> usize + Send>;

/// A broadcast fork's copy function: fill branch `b`'s buffer from the
/// original.
pub(crate) type CopyFn<B> = Box<dyn FnMut(&B, &mut B, usize) + Send>;

/// A broadcast join's merge function: fold branch `b`'s buffer into the
/// original.
pub(crate) type MergeFn<B> = Box<dyn FnMut(&mut B, &B, usize) -> Result<(), BoxError> + Send>;

/// Whether a replicated stage (or a join) keeps its input order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Buffers leave in the order they arrived (oneTBB `serial_in_order`
    /// downstream, FastFlow's ordered farm).
    #[default]
    Ordered,
    /// Buffers leave as soon as they are done.
    Unordered,
}

/// Pooled mode's workers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Workers {
    /// A worker per group instance, as many of them running at once as
    /// `policy` decides, at most `compute` of them running computing groups
    /// (the run's module doc, "Blocking stages").
    Sized { policy: PolicySpec, compute: usize },
    /// This many workers, each running any task.
    Fixed(usize),
}

/// How many threads run a thread group.
#[derive(Debug, Clone, PartialEq)]
pub enum Replicas {
    /// A fixed number of threads.
    Fixed(usize),
    /// As many as a tidepool sizing policy decides, between 1 and `max`:
    /// the stage's buffers are tasks of a tidepool pool run by that policy.
    Sized {
        /// The sizing policy (`auto` by default).
        policy: PolicySpec,
        /// The most threads the policy may use.
        max: usize,
    },
}

pub(crate) struct StageSpec<B> {
    pub(crate) name: String,
    pub(crate) make: Maker<B>,
    /// One instance only (`stage`, `then`): it cannot run on several threads.
    pub(crate) single: bool,
}

/// How a fork spreads its buffers over its branches.
pub(crate) enum Spread<B> {
    /// Each buffer down the one branch `route` picks.
    Route(Route<B>),
    /// Each buffer down every branch: branch 0 gets the original, every
    /// other branch a copy; the join merges the copies into the original.
    Broadcast { copy: CopyFn<B>, merge: MergeFn<B> },
}

pub(crate) struct ForkSpec<B> {
    pub(crate) spread: Spread<B>,
    pub(crate) branches: Vec<Builder<B>>,
    pub(crate) order: Order,
}

/// A thread group: consecutive stages run by the same thread(s).
pub(crate) struct GroupSpec<B> {
    pub(crate) stages: Vec<StageSpec<B>>,
    pub(crate) replicas: Replicas,
    pub(crate) order: Order,
    pub(crate) repeat: usize,
    pub(crate) priority: Option<PrioritySpec>,
    pub(crate) shared: Option<SharedStage<B>>,
    pub(crate) fork: Option<ForkSpec<B>>,
}

impl<B> GroupSpec<B> {
    /// The group's name in messages: its first stage's, or the shared
    /// stage's (the source group without `then` stages: "source").
    fn name(&self) -> String {
        self.stages
            .first()
            .map(|s| s.name.clone())
            .or_else(|| self.shared.as_ref().map(|s| s.inner.name.clone()))
            .unwrap_or_else(|| "source".into())
    }

    fn new(stages: Vec<StageSpec<B>>) -> Self {
        GroupSpec {
            stages,
            replicas: Replicas::Fixed(1),
            order: Order::Ordered,
            repeat: 1,
            priority: None,
            shared: None,
            fork: None,
        }
    }
}

/// A stage that two or more pipelines share (FG 2.0's intersecting
/// pipelines): one thread serves the buffers of all of them, each going on
/// along its own pipeline. Clone the handle into each pipeline's builder
/// with [`Builder::shared`] and run the pipelines with [`crate::run_all`]
/// (thread per stage, or all [`pooled`](Builder::pooled) alike: then the
/// pooled workers run its one instance, or its replicas, for every
/// pipeline).
pub struct SharedStage<B> {
    pub(crate) inner: Arc<SharedInner<B>>,
}

pub(crate) struct SharedInner<B> {
    pub(crate) name: String,
    /// The one instance of a single-threaded shared stage (handed back
    /// after each run).
    pub(crate) stage: Mutex<Option<Box<dyn Stage<B>>>>,
    /// A replicated shared stage: `replicas` threads, an instance each.
    pub(crate) make: Option<Maker<B>>,
    pub(crate) replicas: usize,
    pub(crate) order: Order,
    pub(crate) priority: Option<PrioritySpec>,
}

impl<B> Clone for SharedStage<B> {
    fn clone(&self) -> Self {
        SharedStage {
            inner: self.inner.clone(),
        }
    }
}

impl<B: 'static> SharedStage<B> {
    /// A shared stage running `stage` on one thread.
    pub fn new(name: impl Into<String>, stage: impl Stage<B> + 'static) -> Self {
        Self::with_priority(name, stage, None)
    }

    /// A shared stage whose thread runs at a priority.
    pub fn with_priority(
        name: impl Into<String>,
        stage: impl Stage<B> + 'static,
        priority: Option<PrioritySpec>,
    ) -> Self {
        SharedStage {
            inner: Arc::new(SharedInner {
                name: name.into(),
                stage: Mutex::new(Some(Box::new(stage))),
                make: None,
                replicas: 1,
                order: Order::Ordered,
                priority,
            }),
        }
    }

    /// A shared stage on `replicas` threads, each with its own instance
    /// from `make`. With [`Order::Ordered`], each pipeline's buffers leave
    /// it in the order they arrived (pipelines do not wait for each other);
    /// each pipeline's last-buffer notice reaches exactly one replica.
    pub fn replicated<S: Stage<B> + 'static>(
        name: impl Into<String>,
        replicas: usize,
        order: Order,
        priority: Option<PrioritySpec>,
        make: impl FnMut() -> S + Send + 'static,
    ) -> Self {
        SharedStage {
            inner: Arc::new(SharedInner {
                name: name.into(),
                stage: Mutex::new(None),
                make: Some(per_thread(make)),
                replicas,
                order,
                priority,
            }),
        }
    }
}

/// Describes a pipeline ([`crate::Pipeline::builder`]) or a fork's branch
/// ([`Builder::branch`]): a chain of thread groups.
///
/// Every [`stage`](Builder::stage) starts a new thread group (one thread per
/// stage by default); [`then`](Builder::then) puts a stage on the previous
/// stage's thread (a multistage thread; [`then_each`](Builder::then_each) on
/// each thread of a replicated stage); the modifiers
/// ([`replicated`](Builder::replicated), [`repeat`](Builder::repeat),
/// [`priority`](Builder::priority), …) apply to the latest group.
pub struct Builder<B> {
    pub(crate) name: String,
    pub(crate) buffers: Option<(usize, Box<dyn FnMut() -> B + Send>)>,
    pub(crate) source: Option<(String, Box<dyn Source<B>>)>,
    pub(crate) groups: Vec<GroupSpec<B>>,
    pub(crate) errors: Vec<String>,
    /// Pooled mode's workers (`None`: a thread per stage).
    pub(crate) workers: Option<Workers>,
    /// Stops the run from outside (`Pipeline::stop_handle`).
    pub(crate) stop: StopHandle,
    /// The whole run's deadline, from its start.
    pub(crate) deadline: Option<Duration>,
}

fn single<B: 'static>(stage: impl Stage<B> + 'static) -> Maker<B> {
    let mut once = Some(Box::new(stage) as Box<dyn Stage<B>>);
    Arc::new(Mutex::new(move || {
        once.take()
            .expect("a single-instance stage is made once (replicas need a factory)")
    }))
}

/// A maker for a stage with an instance per thread (replicas, `then_each`).
fn per_thread<B: 'static, S: Stage<B> + 'static>(
    mut make: impl FnMut() -> S + Send + 'static,
) -> Maker<B> {
    Arc::new(Mutex::new(move || Box::new(make()) as Box<dyn Stage<B>>))
}

impl<B: Send + 'static> Builder<B> {
    pub(crate) fn new(name: impl Into<String>) -> Self {
        Builder {
            name: name.into(),
            buffers: None,
            source: None,
            groups: Vec::new(),
            errors: Vec::new(),
            workers: None,
            stop: StopHandle::default(),
            deadline: None,
        }
    }

    /// A fork's branch: a chain of stages without source or buffers.
    pub fn branch() -> Self {
        Self::new("branch")
    }

    /// The buffer pool: `count` buffers made once by `make` before the run,
    /// then recycled. It bounds the buffers in flight.
    pub fn buffers(mut self, count: usize, make: impl FnMut() -> B + Send + 'static) -> Self {
        self.buffers = Some((count, Box::new(make)));
        self
    }

    /// A deadline for the whole run, counted from its start: once it has
    /// passed, the run stops as with [`StopHandle::stop`] (the source is
    /// asked for no more items, the items in flight finish every stage).
    pub fn deadline(mut self, after: Duration) -> Self {
        self.deadline = Some(after);
        self
    }

    /// The source stage, on its own thread (add stages to that thread with
    /// [`then`](Builder::then)).
    pub fn source(mut self, name: impl Into<String>, source: impl Source<B> + 'static) -> Self {
        if self.source.is_some() {
            self.errors.push("a pipeline has one source".into());
        }
        if !self.groups.is_empty() {
            self.errors
                .push("the source comes before every stage".into());
        }
        self.source = Some((name.into(), Box::new(source)));
        self.groups.push(GroupSpec::new(Vec::new()));
        self
    }

    /// A stage on a thread group of its own.
    pub fn stage(mut self, name: impl Into<String>, stage: impl Stage<B> + 'static) -> Self {
        self.groups.push(GroupSpec::new(vec![StageSpec {
            name: name.into(),
            make: single(stage),
            single: true,
        }]));
        self
    }

    /// A stage on the previous stage's thread: a multistage thread. On a
    /// replicated group's threads use [`then_each`](Builder::then_each).
    pub fn then(self, name: impl Into<String>, stage: impl Stage<B> + 'static) -> Self {
        self.join_group("then", name.into(), single(stage), true)
    }

    /// A stage on the previous stage's thread(s), each thread with its own
    /// instance from `make`: a multistage thread that a replicated group
    /// can take (e.g. `.replicated("sort", 2, make_sort).then_each("write",
    /// make_write)` runs sort and write on each of the two threads, with
    /// no hand-off between them).
    pub fn then_each<S: Stage<B> + 'static>(
        self,
        name: impl Into<String>,
        make: impl FnMut() -> S + Send + 'static,
    ) -> Self {
        self.join_group("then_each", name.into(), per_thread(make), false)
    }

    fn join_group(mut self, how: &str, name: String, make: Maker<B>, single: bool) -> Self {
        match self.groups.last_mut() {
            Some(g) if g.shared.is_none() && g.fork.is_none() => {
                g.stages.push(StageSpec { name, make, single })
            }
            _ => self
                .errors
                .push(format!("`{how}({name})` needs a previous stage of this chain to join (not a shared stage or a fork)")),
        }
        self
    }

    /// A stage run by `replicas` threads, each with its own instance from
    /// `make` ([`Order::Ordered`] by default; see [`order`](Builder::order)).
    pub fn replicated<S: Stage<B> + 'static>(
        mut self,
        name: impl Into<String>,
        replicas: usize,
        make: impl FnMut() -> S + Send + 'static,
    ) -> Self {
        let mut g = GroupSpec::new(vec![StageSpec {
            name: name.into(),
            make: per_thread(make),
            single: false,
        }]);
        g.replicas = Replicas::Fixed(replicas);
        self.groups.push(g);
        self
    }

    /// A self-sizing replicated stage: its buffers run as tasks of a tidepool
    /// pool whose size `policy` sets at run time (`auto` grows it while the
    /// stage blocks, keeps it near the core count while it computes), up to
    /// `max` threads; each thread makes its own instance with `make`.
    pub fn sized<S: Stage<B> + 'static>(
        mut self,
        name: impl Into<String>,
        policy: PolicySpec,
        max: usize,
        make: impl FnMut() -> S + Send + 'static,
    ) -> Self {
        let mut g = GroupSpec::new(vec![StageSpec {
            name: name.into(),
            make: per_thread(make),
            single: false,
        }]);
        g.replicas = Replicas::Sized { policy, max };
        self.groups.push(g);
        self
    }

    /// The output order of the latest (replicated) group.
    pub fn order(mut self, order: Order) -> Self {
        if let Some(g) = self.last("order") {
            g.order = order;
        }
        self
    }

    /// Multistage repeat: the latest group takes `k` buffers per round and
    /// runs each of its stages on all of them before the next stage (e.g. a
    /// read+write thread does two reads, then two writes).
    pub fn repeat(mut self, k: usize) -> Self {
        if let Some(g) = self.last("repeat") {
            g.repeat = k;
        }
        self
    }

    /// The priority policy of the latest group's threads.
    pub fn priority(mut self, spec: PrioritySpec) -> Self {
        if let Some(g) = self.last("priority") {
            g.priority = Some(spec);
        }
        self
    }

    /// A stage shared with other pipelines (see [`SharedStage`]).
    pub fn shared(mut self, stage: &SharedStage<B>) -> Self {
        let mut g = GroupSpec::new(Vec::new());
        g.priority = stage.inner.priority;
        g.shared = Some(stage.clone());
        self.groups.push(g);
        self
    }

    /// Fork after the latest group: `route` sends each buffer down one of
    /// `branches`, and the branches join again before the next stage (in
    /// the fork's order if `order` is [`Order::Ordered`]). Branch stages
    /// that the stream's last buffer does not pass get an empty last buffer
    /// ([`Context::is_empty`]) so that they too get the last-buffer notice.
    /// A branch may fork again (forks nest); see also
    /// [`broadcast`](Builder::broadcast).
    pub fn fork(
        self,
        route: impl FnMut(&B, &Context) -> usize + Send + 'static,
        branches: Vec<Builder<B>>,
        order: Order,
    ) -> Self {
        self.add_fork(ForkSpec {
            spread: Spread::Route(Box::new(route)),
            branches,
            order,
        })
    }

    /// Broadcast after the latest group: every buffer goes down *every*
    /// branch, and the join waits until all branches are done with it
    /// before it passes it on, in order.
    ///
    /// Branch 0 works on the buffer itself; each other branch `b` works on
    /// a buffer of its own, filled from the original by `copy(original,
    /// copy, b)` on the fork's thread. These copy buffers are made once,
    /// with the pipeline's `make`, `branches − 1` per pipeline buffer (so
    /// a round never waits for one), and recycled. Once every branch is
    /// done with a round, `merge(original, copy, b)` folds each copy back
    /// into the original (on the thread of the branch that finished last,
    /// in branch order), the copies go back to their pool, and the
    /// original goes on. Neither is called for an empty buffer
    /// ([`Context::is_empty`]). Every branch's stages see every round, and
    /// the last-buffer notice, exactly once.
    ///
    /// ```
    /// use tidepool_pipeline::{BoxError, Builder, Context, Flow, Pipeline};
    ///
    /// type R = Result<(), BoxError>;
    /// let mut sums = Vec::new();
    /// let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    /// let o = out.clone();
    /// Pipeline::builder("both")
    ///     .buffers(3, || [0u64; 2])
    ///     .source("read", |b: &mut [u64; 2], cx: &Context| {
    ///         *b = [cx.round(), 0];
    ///         Ok(if cx.round() == 9 { Flow::Last } else { Flow::More })
    ///     })
    ///     .broadcast(
    ///         vec![
    ///             Builder::branch().stage("double", |b: &mut [u64; 2], _: &Context| -> R {
    ///                 b[1] += 2 * b[0];
    ///                 Ok(())
    ///             }),
    ///             Builder::branch().stage("square", |b: &mut [u64; 2], _: &Context| -> R {
    ///                 b[1] += b[0] * b[0];
    ///                 Ok(())
    ///             }),
    ///         ],
    ///         |orig: &[u64; 2], copy: &mut [u64; 2], _| *copy = *orig,
    ///         |orig: &mut [u64; 2], copy: &[u64; 2], _| -> R {
    ///             orig[1] += copy[1];
    ///             Ok(())
    ///         },
    ///     )
    ///     .stage("write", move |b: &mut [u64; 2], _: &Context| -> R {
    ///         o.lock().unwrap().push(b[1]);
    ///         Ok(())
    ///     })
    ///     .build()?
    ///     .run()?;
    /// sums.extend((0..10).map(|r| 2 * r + r * r));
    /// assert_eq!(*out.lock().unwrap(), sums); // both branches, in order
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn broadcast(
        self,
        branches: Vec<Builder<B>>,
        copy: impl FnMut(&B, &mut B, usize) + Send + 'static,
        merge: impl FnMut(&mut B, &B, usize) -> Result<(), BoxError> + Send + 'static,
    ) -> Self {
        self.add_fork(ForkSpec {
            spread: Spread::Broadcast {
                copy: Box::new(copy),
                merge: Box::new(merge),
            },
            branches,
            order: Order::Ordered,
        })
    }

    fn add_fork(mut self, spec: ForkSpec<B>) -> Self {
        match self.groups.last_mut() {
            Some(g) if g.fork.is_none() => g.fork = Some(spec),
            _ => self.errors.push(
                "`fork` needs a previous stage of this chain (and one fork per stage)".into(),
            ),
        }
        self
    }

    fn last(&mut self, what: &str) -> Option<&mut GroupSpec<B>> {
        if self.groups.is_empty() {
            self.errors.push(format!(
                "`{what}` applies to the latest stage, and there is none"
            ));
        }
        self.groups.last_mut()
    }

    /// Pooled mode, on workers that size themselves: any worker
    /// runs any stage (oneTBB `parallel_pipeline` style) instead of a
    /// thread per stage. The same program gives the same results: a stage
    /// still takes one buffer at a time in order (at most its replica count
    /// at once if replicated), `then` groups stay fused, `repeat` works.
    /// Hand-offs cost a lock instead of a context switch, so compute-bound
    /// pipelines with more stages than cores get closer to their bound.
    ///
    /// Stages that block (I/O) hold a worker while they block, so the
    /// tasks running at once follow tidepool's `auto` sizing policy, fed
    /// with the stages' measured busy and CPU time (see
    /// [`pooled_policy`](Builder::pooled_policy)), and at most one computing
    /// task per core runs at a time: a task of a blocking stage runs on a
    /// worker of its own, as with `pooled_threads(cores + blocking stages)`
    /// set by hand. [`pooled_threads`](Builder::pooled_threads) fixes the
    /// count instead. Forks and broadcasts work as with a thread per stage.
    /// Shared stages work too: pipelines that share one run together with
    /// [`run_all`](crate::run_all), all pooled, on one set of workers.
    /// `build()` refuses what needs a thread per stage: priorities and
    /// self-sizing stages.
    ///
    /// ```
    /// use tidepool_pipeline::{BoxError, Context, Flow, Order, Pipeline};
    ///
    /// let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    /// let o = out.clone();
    /// let report = Pipeline::builder("squares")
    ///     .buffers(8, || vec![0u64; 512])
    ///     .source("read", |b: &mut Vec<u64>, cx: &Context| -> Result<Flow, BoxError> {
    ///         b.fill(cx.round());
    ///         Ok(if cx.round() == 999 { Flow::Last } else { Flow::More })
    ///     })
    ///     .stage("square", |b: &mut Vec<u64>, _: &Context| -> Result<(), BoxError> {
    ///         b.iter_mut().for_each(|x| *x = x.wrapping_mul(*x));
    ///         Ok(())
    ///     })
    ///     .replicated("hash", 2, || |b: &mut Vec<u64>, _: &Context| -> Result<(), BoxError> {
    ///         b[0] = b.iter().fold(0, |h, x| h ^ x.rotate_left(7));
    ///         Ok(())
    ///     })
    ///     .order(Order::Ordered)
    ///     .stage("write", move |b: &mut Vec<u64>, cx: &Context| -> Result<(), BoxError> {
    ///         o.lock().unwrap().push((cx.round(), b[0]));
    ///         Ok(())
    ///     })
    ///     .pooled() // workers that size themselves
    ///     .build()?
    ///     .run()?;
    /// let out = out.lock().unwrap();
    /// assert!(out.iter().map(|r| r.0).eq(0..1000)); // in order
    /// assert!(report.notes[0].starts_with("pooled"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pooled(self) -> Self {
        self.pooled_policy(PolicySpec::Auto)
    }

    /// Pooled mode (see [`pooled`](Builder::pooled)) whose workers follow
    /// the tidepool sizing policy `policy` instead of `auto`: the policy is
    /// fed what the workers measure (tasks done, their busy time and
    /// sampled CPU time, the buffers waiting, the tasks running), as a
    /// pool's policy is, and its decision is how many tasks may run at once
    /// (its spawn limit while it grows on demand, else its target; e.g.
    /// `fixed:2` runs at most two). Computing tasks still never outnumber
    /// the cores. `tpr` is not a pool policy and is refused.
    pub fn pooled_policy(mut self, policy: PolicySpec) -> Self {
        self.workers = Some(Workers::Sized {
            policy,
            compute: tidepool::sys::cores(),
        });
        self
    }

    /// Self-sizing pooled mode with at most `compute` computing tasks at
    /// once (the loom models' small machine, with their scripted policy).
    #[cfg(all(test, loom))]
    pub(crate) fn pooled_compute(mut self, compute: usize) -> Self {
        self.workers = Some(Workers::Sized {
            policy: PolicySpec::Auto,
            compute,
        });
        self
    }

    /// Pooled mode (see [`pooled`](Builder::pooled)) on `workers` workers,
    /// e.g. the cores plus one per blocking stage.
    pub fn pooled_threads(mut self, workers: usize) -> Self {
        self.workers = Some(Workers::Fixed(workers));
        self
    }
}

pub(crate) fn validate_chain<B>(b: &Builder<B>, in_branch: bool, errors: &mut Vec<String>) {
    errors.extend(b.errors.iter().cloned());
    if in_branch && b.workers.is_some() {
        errors
            .push("a fork's branch cannot be pooled: `pooled` applies to a whole pipeline".into());
    }
    for (i, g) in b.groups.iter().enumerate() {
        let name = g.name();
        if g.repeat == 0 {
            errors.push(format!("stage `{name}`: repeat must be at least 1"));
        }
        // A repeating group waits for a round of buffers while the ones it
        // let through wait downstream for the one it holds (a reorder ring,
        // an ordered join): no buffer count breaks that cycle.
        if g.repeat > 1 && in_branch {
            errors.push(format!(
                "stage `{name}`: a stage inside a fork's branch cannot repeat (the join would \
                 wait for a buffer it holds); repeat before the fork or after the join"
            ));
        }
        if g.repeat > 1
            && g.order == Order::Ordered
            && matches!(g.replicas, Replicas::Fixed(n) if n > 1)
        {
            errors.push(format!(
                "stage `{name}`: an ordered replicated stage cannot repeat (its reorder ring \
                 would wait for a buffer a replica holds); use `.order(Order::Unordered)`"
            ));
        }
        match &g.replicas {
            Replicas::Fixed(0) => errors.push(format!("stage `{name}`: replicas must be at least 1")),
            Replicas::Fixed(n) if *n > 1 && g.fork.is_some() => errors.push(format!(
                "stage `{name}`: a fork routes from a single thread; put the fork after the replicated stage"
            )),
            Replicas::Sized { max, .. } => {
                if *max == 0 {
                    errors.push(format!("stage `{name}`: a self-sizing stage needs max >= 1"));
                }
                if g.repeat > 1 || g.fork.is_some() {
                    errors.push(format!(
                        "stage `{name}`: a self-sizing stage takes neither repeat nor fork"
                    ));
                }
                if !matches!(g.priority, None | Some(PrioritySpec::Fixed(_))) {
                    errors.push(format!(
                        "stage `{name}`: a self-sizing stage takes a fixed priority only (nice:N, batch, idle)"
                    ));
                }
            }
            _ => {}
        }
        match g.replicas {
            Replicas::Sized { .. } if g.stages.len() > 1 => errors.push(format!(
                "stage `{name}`: a self-sizing stage runs alone (no `then` or `then_each`)"
            )),
            Replicas::Fixed(n) if n > 1 => {
                for s in g.stages.iter().filter(|s| s.single) {
                    errors.push(format!(
                        "stage `{}`: `then` on replicated stage `{name}`'s {n} threads needs an instance per thread: use `then_each(name, make)`",
                        s.name
                    ));
                }
            }
            _ => {}
        }
        if i == 0 && !in_branch && b.source.is_some() && g.replicas != Replicas::Fixed(1) {
            errors.push("the source runs on one thread".into());
        }
        if let Some(sh) = &g.shared {
            if sh.inner.replicas == 0 {
                errors.push(format!(
                    "shared stage `{name}`: replicas must be at least 1"
                ));
            }
        }
        if g.shared.is_some() && in_branch {
            errors.push(format!("shared stage `{name}`: not inside a fork's branch"));
        }
        if let Some(f) = &g.fork {
            if g.shared.is_some() {
                errors.push(format!("shared stage `{name}` cannot fork"));
            }
            if f.branches.len() < 2 {
                errors.push(format!("fork after `{name}`: needs two or more branches"));
            }
            for br in &f.branches {
                if br.source.is_some() || br.buffers.is_some() {
                    errors.push(format!(
                        "fork after `{name}`: a branch has no source or buffers of its own"
                    ));
                }
                if br.groups.is_empty() {
                    errors.push(format!("fork after `{name}`: a branch needs a stage"));
                }
                validate_chain(br, true, errors);
            }
        }
    }
}

/// What pooled mode refuses: each needs a thread per stage (or exceeds the
/// run's small counters).
pub(crate) fn validate_pooled<B>(b: &Builder<B>, errors: &mut Vec<String>) {
    let name = &b.name;
    let workers = match &b.workers {
        None => return,
        Some(Workers::Fixed(n)) => *n,
        Some(Workers::Sized { policy, .. }) => {
            if policy.build().is_none() {
                errors.push(format!(
                    "pipeline `{name}`: pooled_policy `{}` is not a pool sizing policy; use \
                     auto, fixed:N, watermark:MIN..MAX, xu-bode, hisdyn, frequency or hill-climb",
                    policy.name()
                ));
            }
            1
        }
    };
    if workers == 0 {
        errors.push(format!(
            "pipeline `{name}`: pooled_threads must be at least 1"
        ));
    }
    // The run's counters are small integers (pooled.rs, "Layout").
    if workers > usize::from(u16::MAX) {
        errors.push(format!(
            "pipeline `{name}`: pooled_threads must be at most {}",
            u16::MAX
        ));
    }
    if let Some((count, _)) = &b.buffers {
        // Every buffer, fork notice and broadcast copy has a u32 id.
        let ids = ids_needed(&b.groups, *count);
        if ids.is_none_or(|n| n >= u32::MAX as usize) {
            errors.push(format!(
                "pipeline `{name}`: a pooled pipeline takes fewer than {} buffers (counting \
                 each broadcast's copies: buffers × branches)",
                u32::MAX
            ));
        }
    }
    validate_pooled_groups(&b.groups, errors);
}

fn validate_pooled_groups<B>(groups: &[GroupSpec<B>], errors: &mut Vec<String>) {
    for g in groups {
        let stage = g.name();
        if g.priority.is_some() {
            errors.push(format!(
                "stage `{stage}`: priorities apply to a stage's own threads, and a pooled \
                 pipeline runs every stage on any worker; drop `priority` or `pooled` \
                 (thread per stage)"
            ));
        }
        if matches!(g.replicas, Replicas::Sized { .. }) {
            errors.push(format!(
                "stage `{stage}`: a self-sizing stage sizes its own threads, not available in \
                 a pooled pipeline; use `replicated(name, n, make)` and size the pool with \
                 `pooled_threads(n)`, or drop `pooled`"
            ));
        }
        if matches!(g.replicas, Replicas::Fixed(n) if n > usize::from(u16::MAX)) {
            errors.push(format!(
                "stage `{stage}`: a pooled pipeline runs at most {} replicas of a stage",
                u16::MAX
            ));
        }
        if let Some(f) = &g.fork {
            if f.branches.len() > usize::from(u16::MAX) {
                errors.push(format!(
                    "fork after `{stage}`: a pooled pipeline's fork has at most {} branches",
                    u16::MAX
                ));
            }
            for br in &f.branches {
                validate_pooled_groups(&br.groups, errors);
            }
        }
        if let Some(sh) = &g.shared {
            if sh.inner.replicas > usize::from(u16::MAX) {
                errors.push(format!(
                    "shared stage `{stage}`: a pooled pipeline runs at most {} replicas of a \
                     stage",
                    u16::MAX
                ));
            }
        }
    }
}

/// How many ids a pooled pipeline of `buffers` buffers uses (its buffers,
/// fork notices and broadcast copies, as the pooled engine numbers them), `None` past `usize`.
fn ids_needed<B>(groups: &[GroupSpec<B>], buffers: usize) -> Option<usize> {
    fn walk<B>(groups: &[GroupSpec<B>], notices: &mut usize, per_root: &mut usize) -> Option<()> {
        for g in groups {
            if let Some(f) = &g.fork {
                let n = f.branches.len().saturating_sub(1);
                match f.spread {
                    Spread::Route(_) => *notices = notices.checked_add(n)?,
                    Spread::Broadcast { .. } => *per_root = per_root.checked_add(n)?,
                }
                for b in &f.branches {
                    walk(&b.groups, notices, per_root)?;
                }
            }
        }
        Some(())
    }
    let (mut notices, mut per_root) = (0usize, 1usize);
    walk(groups, &mut notices, &mut per_root)?;
    buffers.checked_add(notices)?.checked_mul(per_root)
}
