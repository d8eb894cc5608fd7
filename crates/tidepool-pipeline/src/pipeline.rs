//! A described pipeline, and turning one or more of them into running nodes.

use std::sync::Arc;

use crate::builder::{
    validate_chain, validate_pooled, Builder, GroupSpec, Replicas, Spread, Workers,
};
use crate::error::{BuildError, Cause, PipelineError, Step};
use crate::report::Report;
use crate::stop::StopHandle;

/// A pipeline, checked and ready to run.
pub struct Pipeline<B> {
    pub(crate) spec: Builder<B>,
}

impl<B: Send + 'static> Pipeline<B> {
    /// Start describing a pipeline.
    pub fn builder(name: impl Into<String>) -> Builder<B> {
        Builder::new(name)
    }

    pub(crate) fn new(spec: Builder<B>) -> Result<Self, BuildError> {
        let mut errors = Vec::new();
        let name = &spec.name;
        if spec.source.is_none() {
            errors.push(format!("pipeline `{name}` has no source"));
        }
        match &spec.buffers {
            None => errors.push(format!(
                "pipeline `{name}` has no buffers (Builder::buffers)"
            )),
            Some((0, _)) => errors.push(format!("pipeline `{name}`: buffers must be at least 1")),
            Some((n, _)) => {
                // A group waiting for `repeat` buffers holds up to `repeat - 1`
                // per thread, and a route fork holds the stream's last buffer
                // while it takes empty ones for the other branches (which
                // come back at its join): one buffer more than all of them
                // keeps the pipeline moving.
                let held = held_while_waiting(&spec.groups);
                if *n <= held {
                    errors.push(format!(
                        "pipeline `{name}`: {n} buffers, but groups that repeat or fork can hold \
                         {held} while they wait for more; use at least {}",
                        held + 1
                    ));
                }
            }
        }
        validate_chain(&spec, false, &mut errors);
        validate_pooled(&spec, &mut errors);
        let mut seen = Vec::new();
        for g in &spec.groups {
            if let Some(s) = &g.shared {
                let ptr = Arc::as_ptr(&s.inner) as *const ();
                if seen.contains(&ptr) {
                    errors.push(format!(
                        "pipeline `{name}` passes shared stage `{}` twice",
                        s.inner.name
                    ));
                }
                seen.push(ptr);
            }
        }
        if errors.is_empty() {
            Ok(Pipeline { spec })
        } else {
            Err(BuildError(errors.join("; ")))
        }
    }

    /// A handle that stops this pipeline's run from any thread (see
    /// [`StopHandle`]): the source is asked for no more items, the items in
    /// flight finish every stage, and `run` returns `Ok` with
    /// [`Report::stopped`] true.
    ///
    /// ```
    /// use tidepool_pipeline::{BoxError, Context, Flow, Pipeline};
    ///
    /// let pipeline = Pipeline::builder("endless")
    ///     .buffers(4, || 0u64)
    ///     .source("count", |b: &mut u64, cx: &Context| -> Result<Flow, BoxError> {
    ///         *b = cx.round();
    ///         Ok(Flow::More) // never ends by itself
    ///     })
    ///     .stage("sink", |_: &mut u64, _: &Context| -> Result<(), BoxError> { Ok(()) })
    ///     .build()?;
    /// let stop = pipeline.stop_handle();
    /// let stopper = std::thread::spawn(move || {
    ///     std::thread::sleep(std::time::Duration::from_millis(20));
    ///     stop.stop();
    /// });
    /// let report = pipeline.run()?;
    /// stopper.join().unwrap();
    /// assert!(report.stopped());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stop_handle(&self) -> StopHandle {
        self.spec.stop.clone()
    }

    /// The pipeline's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Run the pipeline to its end (or its first failure) and report.
    pub fn run(self) -> Result<Report, PipelineError> {
        run_all(vec![self])
    }
}

impl<B: Send + 'static> Builder<B> {
    /// Check the description and make the pipeline.
    pub fn build(self) -> Result<Pipeline<B>, BuildError> {
        Pipeline::new(self)
    }
}

fn held_while_waiting<B>(groups: &[GroupSpec<B>]) -> usize {
    groups
        .iter()
        .map(|g| {
            let threads = match g.replicas {
                Replicas::Fixed(n) => n,
                Replicas::Sized { .. } => 1,
            };
            threads * (g.repeat.max(1) - 1)
                + g.fork.as_ref().map_or(0, |f| {
                    // A broadcast takes its copies from a pool of its own.
                    usize::from(matches!(f.spread, Spread::Route(_)))
                        + f.branches
                            .iter()
                            .map(|b| held_while_waiting(&b.groups))
                            .sum::<usize>()
                })
        })
        .sum()
}

/// Run several pipelines at once, typically pipelines that share a stage
/// (FG 2.0's intersecting pipelines): the shared stage serves all of them.
/// All must have the same buffer type, and run the same way: all thread
/// per stage (the shared stage's threads serve every pipeline), or all
/// pooled with the same workers (one set of pooled workers and one sizing
/// policy serve every pipeline). The first failure in any of them stops all
/// of them.
pub fn run_all<B: Send + 'static>(pipelines: Vec<Pipeline<B>>) -> Result<Report, PipelineError> {
    let refuse = |p: &Pipeline<B>, why: String| PipelineError {
        pipeline: p.spec.name.clone(),
        stage: String::new(),
        round: None,
        step: Step::Init,
        cause: Cause::Failed(why.into()),
    };
    let Some(first) = pipelines.first() else {
        return Err(PipelineError {
            pipeline: String::new(),
            stage: String::new(),
            round: None,
            step: Step::Init,
            cause: Cause::Failed("run_all needs at least one pipeline".into()),
        });
    };
    let workers = first.spec.workers.clone();
    for p in &pipelines[1..] {
        if p.spec.workers != workers {
            let how = |p: &Pipeline<B>| match &p.spec.workers {
                None => "thread per stage".to_string(),
                Some(Workers::Fixed(n)) => format!("pooled_threads({n})"),
                Some(Workers::Sized { policy, .. }) => format!("pooled_policy({policy})"),
            };
            return Err(refuse(
                p,
                format!(
                    "pipelines run together run the same way: `{}` runs {}, `{}` {}; give \
                     every pipeline the same `pooled`, `pooled_policy` or `pooled_threads`, \
                     or none",
                    first.spec.name,
                    how(first),
                    p.spec.name,
                    how(p)
                ),
            ));
        }
    }
    let specs = pipelines.into_iter().map(|p| p.spec).collect();
    match workers {
        Some(w) => crate::exec::pooled::run(specs, w),
        None => crate::exec::threads::run(specs),
    }
}
