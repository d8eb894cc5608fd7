//! A described pipeline, and turning one or more of them into running nodes.

use std::sync::Arc;

use crate::builder::{validate_chain, validate_pooled, Builder, GroupSpec, Replicas, Spread};
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
/// (FG 2.0's intersecting pipelines): the shared stage's thread serves all
/// of them. All must have the same buffer type. The first failure in any of
/// them stops all of them.
pub fn run_all<B: Send + 'static>(
    mut pipelines: Vec<Pipeline<B>>,
) -> Result<Report, PipelineError> {
    if let Some(p) = pipelines.iter().find(|p| p.spec.workers.is_some()) {
        if pipelines.len() == 1 {
            let p = pipelines.pop().expect("one pipeline");
            let workers = p.spec.workers.clone().expect("pooled");
            return crate::exec::pooled::run(p.spec, workers);
        }
        return Err(PipelineError {
            pipeline: p.spec.name.clone(),
            stage: String::new(),
            round: None,
            step: Step::Init,
            cause: Cause::Failed(
                "a pooled pipeline runs alone (Pipeline::run), not with others in run_all".into(),
            ),
        });
    }
    crate::exec::threads::run(pipelines.into_iter().map(|p| p.spec).collect())
}
