//! Errors of reading traces and parsing generator specs.

use thiserror::Error;

/// Reading or importing a trace failed.
///
/// Every parse error names the file (or source name), the 1-based line number
/// and the field, so a user can go straight to the bad spot:
///
/// ```
/// use tidepool_workload::format::parse_trace_str;
/// let err = parse_trace_str("1 1 0 200\n2 1 x 100\n", "t.trace").unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "t.trace:2: field `start_delay_us`: `x` is not a non-negative number of microseconds"
/// );
/// ```
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TraceError {
    /// A line could not be parsed.
    #[error("{file}:{line}: field `{field}`: {message}")]
    Parse {
        /// File name or source name given to the parser.
        file: String,
        /// 1-based line number.
        line: usize,
        /// Name of the offending field (column).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A line as a whole is unusable (too long, not UTF-8), or the trace
    /// as a whole is (more tasks than the limit).
    #[error("{file}:{line}: {message}")]
    Line {
        /// File name or source name given to the parser.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The file could not be read or written. The OS error is part of the
    /// message (and not also a `source()`, so a chain prints it once).
    #[error("{file}: {error}")]
    Io {
        /// File name or source name.
        file: String,
        /// The underlying error.
        error: std::io::Error,
    },
    /// An importer option is out of range (e.g. a non-positive time scale).
    #[error("invalid import option `{option}`: {message}")]
    Option {
        /// Name of the option.
        option: String,
        /// What is wrong with it.
        message: String,
    },
}

impl TraceError {
    pub(crate) fn parse(
        file: &str,
        line: usize,
        field: &str,
        message: impl Into<String>,
    ) -> TraceError {
        TraceError::Parse {
            file: file.to_string(),
            line,
            field: field.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn io(file: &str, error: std::io::Error) -> TraceError {
        TraceError::Io {
            file: file.to_string(),
            error,
        }
    }

    pub(crate) fn line(file: &str, line: usize, message: impl Into<String>) -> TraceError {
        TraceError::Line {
            file: file.to_string(),
            line,
            message: message.into(),
        }
    }

    /// The error for a trace that would hold more than `max` tasks.
    pub(crate) fn too_many_tasks(file: &str, line: usize, max: usize) -> TraceError {
        TraceError::line(
            file,
            line,
            format!("the trace has more than {max} tasks, the limit (raise it with --max-tasks)"),
        )
    }

    pub(crate) fn option(option: &str, message: impl Into<String>) -> TraceError {
        TraceError::Option {
            option: option.to_string(),
            message: message.into(),
        }
    }
}

/// A generator spec string, distribution or suite name could not be parsed.
///
/// ```
/// use tidepool_workload::GenSpec;
/// let err = "poisson:rate=fast".parse::<GenSpec>().unwrap_err();
/// assert!(err.to_string().contains("rate"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The spec has no `kind:` prefix or the kind is unknown.
    #[error("unknown workload kind `{0}` (expected one of: poisson, periodic, normal, lognormal, steps, onoff)")]
    UnknownKind(String),
    /// A `key=value` pair names a key this kind does not take.
    #[error("unknown key `{key}` for `{kind}` (allowed: {allowed})")]
    UnknownKey {
        /// The workload kind.
        kind: String,
        /// The key given.
        key: String,
        /// The keys this kind accepts.
        allowed: String,
    },
    /// A key's value is malformed or out of range.
    #[error("bad value for `{key}`: {message}")]
    BadValue {
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A required key is missing.
    #[error("missing required key `{0}`")]
    Missing(String),
    /// A `key=value` pair is malformed (no `=`) or given twice.
    #[error("malformed pair `{0}` (expected key=value, each key once)")]
    Malformed(String),
    /// Unknown suite name.
    #[error(
        "unknown suite workload `{0}` (expected one of: cpu, io, mixed, steps, bursty, azure)"
    )]
    UnknownSuite(String),
}

impl SpecError {
    pub(crate) fn bad(key: &str, message: impl Into<String>) -> SpecError {
        SpecError::BadValue {
            key: key.to_string(),
            message: message.into(),
        }
    }
}
