//! Why a pipeline failed.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::stage::BoxError;

/// What went wrong in a stage.
#[derive(Debug)]
pub enum Cause {
    /// The stage returned an error.
    Failed(BoxError),
    /// The stage panicked; the panic's message.
    Panicked(String),
}

/// Which step of a stage failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `init`.
    Init,
    /// `process` or `fill`.
    Process,
    /// A fork's routing function.
    Route,
    /// A broadcast fork's copy function.
    Copy,
    /// A broadcast join's merge function.
    Merge,
    /// `cleanup`.
    Cleanup,
}

/// A pipeline run that stopped because a stage failed. The run has stopped
/// every thread and joined it before this is returned.
#[derive(Debug)]
pub struct PipelineError {
    /// The pipeline the failing stage was working for.
    pub pipeline: String,
    /// The failing stage.
    pub stage: String,
    /// The round of the buffer it was working on (`None` in init/cleanup).
    pub round: Option<u64>,
    /// What it was doing.
    pub step: Step,
    /// What went wrong.
    pub cause: Cause,
}

impl PipelineError {
    /// True if the stage panicked rather than returned an error.
    pub fn is_panic(&self) -> bool {
        matches!(self.cause, Cause::Panicked(_))
    }
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = match self.step {
            Step::Init => "init",
            Step::Process => "process",
            Step::Route => "route",
            Step::Copy => "copy",
            Step::Merge => "merge",
            Step::Cleanup => "cleanup",
        };
        write!(
            f,
            "pipeline `{}`, stage `{}` ({step}",
            self.pipeline, self.stage
        )?;
        if let Some(r) = self.round {
            write!(f, ", round {r}")?;
        }
        match &self.cause {
            Cause::Failed(e) => write!(f, "): {e}"),
            Cause::Panicked(m) => write!(f, ") panicked: {m}"),
        }
    }
}

impl std::error::Error for PipelineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            Cause::Failed(e) => Some(&**e),
            Cause::Panicked(_) => None,
        }
    }
}

/// A pipeline that cannot be built as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError(pub String);

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

/// The message of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}
/// Errors for a thread that could not be started.
pub(crate) fn spawn_error(pipeline: &str, stage: &str, e: std::io::Error) -> PipelineError {
    PipelineError {
        pipeline: pipeline.to_string(),
        stage: stage.to_string(),
        round: None,
        step: Step::Init,
        cause: Cause::Failed(format!("cannot start a thread: {e}").into()),
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
