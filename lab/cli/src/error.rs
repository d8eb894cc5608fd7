//! Exit codes: 2 for what the user typed wrong (usage), 1 for what went
//! wrong while running, 130 after a Ctrl-C.

use std::fmt;

/// An error caused by the command line itself (a bad spec, an unknown
/// workload name): the process exits with code 2, like clap's own errors.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The run was stopped by Ctrl-C after writing what was measured: exit 130.
#[derive(Debug)]
pub struct Interrupted;

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("interrupted (Ctrl-C); partial results were written")
    }
}

impl std::error::Error for Interrupted {}

/// A usage error as an [`anyhow::Error`].
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// The exit code for an error: 2 for usage errors, 130 for Ctrl-C, 1 otherwise.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<UsageError>()) {
        2
    } else if e.chain().any(|c| c.is::<Interrupted>()) {
        130
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(exit_code(&usage("bad")), 2);
        assert_eq!(exit_code(&usage("bad").context("while parsing")), 2);
        assert_eq!(exit_code(&anyhow::Error::new(Interrupted)), 130);
        assert_eq!(exit_code(&anyhow::anyhow!("disk full")), 1);
    }
}
