//! What every thread of a run shares: the pipelines' free pools, the
//! queues, the running count and the first failure.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::error::PipelineError;
use crate::priority::Priority;
use crate::running::Running;
use crate::stop::Stopper;
use crate::sys;

use super::env::Q;

pub(crate) struct PipeRt<B> {
    pub(crate) name: String,
    pub(crate) free: Q<B>,
    pub(crate) buffers: usize,
    /// Written by the source every round: on a line of its own, away from
    /// the name and free queue that every stage reads every round.
    pub(crate) rounds: CachePadded<AtomicU64>,
    /// Asked by the source before each fill.
    pub(crate) stopper: Stopper,
}

/// What every thread of a run shares.
pub(crate) struct Run<B> {
    pub(crate) pipes: Vec<PipeRt<B>>,
    pub(crate) queues: Vec<Q<B>>,
    /// Stage threads holding a core, and owed wake-ups (`running.rs`).
    pub(crate) running: Arc<Running>,
    pub(crate) error: Mutex<Option<PipelineError>>,
    pub(crate) refused: AtomicBool,
    pub(crate) notes: Mutex<Vec<String>>,
    pub(crate) start: Instant,
}

impl<B: Send + 'static> Run<B> {
    /// Record the first failure and abort every queue: every thread blocked
    /// in the framework wakes and leaves.
    pub(super) fn fail(&self, e: PipelineError) {
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

    pub(super) fn failed(&self) -> bool {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Apply a priority to the calling thread; a refusal is noted once.
    pub(super) fn apply(&self, stage: &str, p: Priority) {
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
