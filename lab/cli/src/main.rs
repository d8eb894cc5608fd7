//! `tidepool`: run a workload against thread-pool sizing policies and show
//! which is best, and why. See `docs/cli.md` and `tidepool --help`.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;

use clap::Parser;

mod bar;
mod cancel;
mod cluster_replay;
mod cmd;
mod comparison;
mod error;
mod exec;
mod lists;
mod output;
mod plot;
mod progress;
mod repeats;
mod report;
mod source;
mod table;

/// The first error writing to stdout, reported when the command ends.
static STDOUT_ERROR: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// Write `text` to stdout. A closed pipe (`| head`) is not an error; any
/// other write error (a full disk, `> /dev/full`) makes the command fail
/// with exit code 1 when it ends, after it wrote its files.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            let mut first = STDOUT_ERROR.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert(e);
        }
        _ => {}
    }
}

fn main() -> ExitCode {
    let cli = cmd::Cli::parse();
    let result = cmd::dispatch(cli).and_then(|()| {
        match STDOUT_ERROR
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            Some(e) => Err(anyhow::Error::new(e).context("cannot write to standard output")),
            None => Ok(()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(error::exit_code(&e))
        }
    }
}
