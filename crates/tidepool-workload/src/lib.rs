//! tmp
pub mod dist;
pub mod error;
pub mod format;
pub mod generate;
pub mod import;
pub mod trace;
pub use dist::Dist;
pub use error::{SpecError, TraceError};
pub use generate::GenSpec;
pub use trace::{TaskSpec, Trace, TraceStats};
