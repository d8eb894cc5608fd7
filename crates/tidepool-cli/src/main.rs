//! `tidepool`: run a workload against thread-pool sizing policies and show
//! which is best, and why. See `docs/cli.md` and `tidepool --help`.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

mod bar;
mod cancel;
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

/// Write `text` to stdout; a closed pipe (`| head`) is not an error.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

fn main() -> ExitCode {
    let cli = cmd::Cli::parse();
    match cmd::dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(error::exit_code(&e))
        }
    }
}
