//! Thread-per-stage execution: every thread group of every pipeline runs on
//! threads of its own, wired by queues (see `queue.rs` for the
//! end-of-stream protocol and `running.rs` for deferred wake-ups).

mod compile;
mod env;
mod node;
mod route;
mod sized;
mod state;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::builder::{Builder, Replicas};
use crate::error::{panic_message, spawn_error, Cause, PipelineError, Step};
use crate::report::{PipelineReport, Report, StageReport};

use node::Node;
use state::Run;

/// Run the pipelines described by `specs` together, a thread per group.
pub(crate) fn run<B: Send + 'static>(specs: Vec<Builder<B>>) -> Result<Report, PipelineError> {
    let (nodes, run) = compile::compile(specs);
    execute(nodes, Arc::new(run))
}

/// Start every node's threads, wait for all of them, and report.
fn execute<B: Send + 'static>(
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
                    run.fail(spawn_error(pipe, &node.name, e));
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
            rounds: p.rounds.load(Ordering::Relaxed),
            buffers: p.buffers,
            stopped: p.stopper.stopped(),
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
