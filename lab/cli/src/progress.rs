//! Progress on stderr: indicatif bars when stderr is a terminal, one plain
//! line per finished run when it is not, nothing with `--quiet`.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tidepool_workload::{Progress, RunResult};

use crate::table::{fmt_rate, fmt_us};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Bars,
    Lines,
    Quiet,
}

/// Reports the progress of a command made of one or more replay runs.
pub struct Reporter {
    mode: Mode,
    multi: MultiProgress,
    overall: Option<ProgressBar>,
    done: usize,
    total: usize,
}

impl Reporter {
    /// A reporter for `total_runs` runs. `quiet` silences it.
    pub fn new(quiet: bool, total_runs: usize) -> Reporter {
        let mode = if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Bars
        } else {
            Mode::Lines
        };
        let multi = MultiProgress::with_draw_target(match mode {
            Mode::Bars => ProgressDrawTarget::stderr(),
            _ => ProgressDrawTarget::hidden(),
        });
        let overall = (mode == Mode::Bars && total_runs > 1).then(|| {
            let bar = multi.add(ProgressBar::new(total_runs as u64));
            bar.set_style(
                ProgressStyle::with_template("{prefix:>8.bold} [{bar:30.green/dim}] {pos}/{len} runs, {elapsed} elapsed, ~{eta} left")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            bar.set_prefix("total");
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Reporter {
            mode,
            multi,
            overall,
            done: 0,
            total: total_runs,
        }
    }

    /// A bar for one run of `tasks` tasks, labelled `label`.
    pub fn start_run(&self, label: &str, tasks: usize) -> RunBar {
        let bar = (self.mode == Mode::Bars).then(|| {
            let bar = self.multi.add(ProgressBar::new(tasks as u64));
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix:>8.cyan} [{bar:30.cyan/dim}] {pos}/{len} tasks {msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.set_prefix(shorten(label, 24));
            bar
        });
        RunBar { bar }
    }

    /// A run finished: clear its bar, advance the total, and in line mode
    /// print a one-line summary.
    pub fn finish_run(&mut self, bar: RunBar, label: &str, r: &RunResult) {
        self.done += 1;
        if let Some(b) = bar.bar {
            b.finish_and_clear();
            self.multi.remove(&b);
        }
        if let Some(o) = &self.overall {
            o.inc(1);
        }
        if self.mode == Mode::Lines {
            eprintln!(
                "[{}/{}] {label}: {} done, {}, mean wait {}, p99 wait {}, {} threads created{}",
                self.done,
                self.total.max(self.done),
                r.completed,
                fmt_rate(r.throughput),
                fmt_us(r.mean_wait_us),
                fmt_us(r.p99_wait_us),
                r.threads_created,
                if r.cancelled { " (stopped early)" } else { "" }
            );
        }
    }

    /// Print a note on stderr without breaking the bars.
    pub fn note(&self, msg: &str) {
        match self.mode {
            Mode::Quiet => {}
            Mode::Lines => eprintln!("{msg}"),
            Mode::Bars => {
                let _ = self.multi.println(msg);
            }
        }
    }

    /// Remove every bar.
    pub fn finish(self) {
        if let Some(o) = self.overall {
            o.finish_and_clear();
        }
        let _ = self.multi.clear();
    }
}

/// The bar of one run; feed it the replay's progress reports.
pub struct RunBar {
    bar: Option<ProgressBar>,
}

impl RunBar {
    /// Update from a replay progress report.
    pub fn update(&self, p: &Progress) {
        if let Some(b) = &self.bar {
            b.set_position(p.completed);
            b.set_message(format!(
                "{}{} threads, {} queued",
                if p.draining { "draining, " } else { "" },
                p.live_threads,
                p.queued
            ));
        }
    }
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_reporter_is_silent_and_counts() {
        let mut r = Reporter::new(true, 2);
        let bar = r.start_run("cpu · auto", 10);
        bar.update(&Progress {
            elapsed: Duration::ZERO,
            total: 10,
            submitted: 5,
            completed: 3,
            live_threads: 2,
            queued: 1,
            draining: false,
        });
        r.finish_run(bar, "cpu · auto", &RunResult::default());
        assert_eq!(r.done, 1);
        r.finish();
        assert_eq!(shorten("abcdef", 4), "abc…");
    }
}
