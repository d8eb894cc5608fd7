//! tmp
pub mod body;
pub mod dist;
pub mod error;
pub mod format;
pub mod generate;
pub mod import;
pub mod metrics;
pub mod replay;
pub mod result;
pub mod trace;
pub use dist::Dist;
pub use error::{SpecError, TraceError};
pub use generate::GenSpec;
pub use replay::{replay, replay_with, Progress, ReplayHooks, ReplayOptions};
pub use result::{DecisionEntry, RunResult};
pub use trace::{TaskSpec, Trace, TraceStats};
