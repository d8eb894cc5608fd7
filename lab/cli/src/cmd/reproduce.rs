//! `tidepool reproduce [xu|oh-kim|bahadur|all]`: run the papers' headline
//! experiments on this machine, print each claim beside ours with a
//! verdict, and write a Markdown page with the tables and the sweep plots
//! into the folder `--out` names (the experiments and verdicts are
//! `tidepool_workload::reproduce`). The default folder is
//! `tidepool-reproduction/` in the current directory, so a run never
//! overwrites a checkout's documentation unless asked to.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use tidepool_workload::reproduce::{Claim, Paper, Reproduction, Setup, XuRuns};

use super::compare::command_line;
use crate::cmd::sweep::sweep_table;
use crate::error::{usage, Interrupted};
use crate::plot::{self, ChartSpec, Legend, Series};
use crate::table::{fmt_rate, fmt_us, Table};
use crate::{cancel, output, print, report};

const EXAMPLES: &str = "\
Examples:
  tidepool reproduce                    # all three papers, about 3 minutes, writes tidepool-reproduction/
  tidepool reproduce bahadur --out /tmp/repro   # one paper, page in /tmp/repro/reproduction.md
  tidepool reproduce xu --scale 0.2     # Xu & Bode only, longer runs
  tidepool reproduce all --json         # {\"claims\": [...]} on stdout

Xu & Bode: static sweeps of the suite's sat100, sat50 and sat10 (free_workload 100, 50,
10) over sizes 1..64: threshold (stable point), RAIT against throughput (Spearman's rank
correlation), degradation point; xu-bode starting from 1 thread against fixed:1.
Oh & Kim: hisdyn against watermark:3..100 on the load-step workload, medians of
--repeats (default 5) interleaved runs: threads created, threads kept, throughput. Bahadur et al.:
a 32-thread pool with a mutex queue against the hybrid (spin 3 times, sleep 10 ms)
queue on Poisson 200/s of 100 ms tasks, and the frequency tuner's pool size against the
request rate. Verdicts: reproduced, not reproduced, or not comparable, each with why.";

/// The folder `reproduce` writes into when `--out` is not given: relative
/// to the current directory.
pub const DEFAULT_OUT: &str = "tidepool-reproduction";

/// The page's file name inside the `--out` folder.
pub const PAGE: &str = "reproduction.md";

/// Options of `tidepool reproduce`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct ReproduceArgs {
    /// Which paper: xu, oh-kim, bahadur, or all.
    #[arg(value_name = "PAPER", default_value = "all")]
    pub paper: String,
    /// Print `{"claims": [...]}` on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Folder to write `reproduction.md` and its plots into (created if
    /// missing; files of the same names in it are replaced).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// Length factor of the traces (0.1: about 3 minutes for all).
    #[arg(long, value_name = "X", default_value_t = 0.1)]
    pub scale: f64,
    /// Interleaved runs per policy in the Oh & Kim comparison (1 to 9).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub repeats: u32,
    /// No progress output on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// What `--json` prints.
#[derive(Debug, Serialize)]
pub struct ClaimsJson<'a> {
    /// Every claim, in order.
    pub claims: &'a [Claim],
}

/// Run `tidepool reproduce`.
pub fn run(a: ReproduceArgs) -> anyhow::Result<()> {
    let papers: Vec<Paper> = match a.paper.as_str() {
        "all" => Paper::ALL.to_vec(),
        p => vec![p.parse::<Paper>().map_err(usage)?],
    };
    if !(a.scale.is_finite() && a.scale > 0.0 && a.scale <= 1.0) {
        return Err(usage(format!(
            "--scale {} must be in (0, 1] (0.1 takes about 3 minutes)",
            a.scale
        )));
    }
    if a.out.is_file() {
        return Err(usage(format!(
            "--out `{}` is a file: --out names a folder (default `{DEFAULT_OUT}`)",
            a.out.display()
        )));
    }
    output::check_out_dir(&a.out)?;
    let setup = Setup {
        scale: a.scale,
        replay: tidepool_workload::ReplayOptions {
            cancel: Some(cancel::flag()),
            drain_timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        },
        repeats: a.repeats as usize,
    };
    let start = Instant::now();
    let quiet = a.quiet;
    let mut on_run = |label: &str, r: &tidepool_workload::RunResult| {
        if !quiet {
            eprintln!(
                "  {label}: {}, mean turnaround {}, {} threads created ({:.0} s)",
                fmt_rate(r.throughput),
                fmt_us(r.mean_turnaround_us),
                r.threads_created,
                start.elapsed().as_secs_f64()
            );
        }
    };
    let r = Reproduction::run(&papers, &setup, &mut on_run);
    if cancel::requested() {
        return Err(Interrupted.into());
    }
    let claims = r.claims();
    let md = write_page(&a.out, &r, &claims, &command_line(), a.scale)?;
    if !a.quiet {
        eprintln!(
            "reproduce took {:.0} s; wrote {}",
            start.elapsed().as_secs_f64(),
            md.display()
        );
    }
    if a.json {
        print(&format!(
            "{}\n",
            serde_json::to_string(&ClaimsJson { claims: &claims })?
        ));
    } else {
        print(&claims_table(&claims, false).render_for_stdout());
    }
    Ok(())
}

/// One row per claim; with `why`, the reasons too (for the Markdown page).
pub fn claims_table(claims: &[Claim], why: bool) -> Table {
    let mut headers = vec!["paper", "claim", "paper's value", "ours", "verdict"];
    if why {
        headers.push("why");
    }
    let mut t = Table::new(headers)
        .left_align(1)
        .left_align(2)
        .left_align(3)
        .left_align(4)
        .left_align(5);
    for c in claims {
        let mut row = vec![
            c.paper.clone(),
            c.claim.clone(),
            c.paper_value.clone(),
            c.ours.clone(),
            c.verdict.to_string(),
        ];
        if why {
            row.push(c.why.clone());
        }
        t.row(row);
    }
    t
}

/// Throughput and RAIT against pool size for each `free`, in one chart
/// each (RAIT on its own log-scale chart), written into `dir` beside the
/// page; returns (caption, file name) pairs.
fn xu_plots(dir: &Path, x: &XuRuns) -> anyhow::Result<Vec<(String, String)>> {
    let mut tput = Vec::new();
    let mut rait = Vec::new();
    for (free, s) in &x.sweeps {
        let Some(a) = &s.analysis else { continue };
        tput.push(Series {
            name: format!("free {free}"),
            points: a
                .rows
                .iter()
                .map(|r| (r.point.size as f64, r.point.throughput))
                .collect(),
            markers: true,
        });
        rait.push(Series {
            name: format!("free {free}"),
            points: a
                .rows
                .iter()
                .filter_map(|r| r.rait.map(|v| (r.point.size as f64, v)))
                .collect(),
            markers: true,
        });
    }
    let spec = |title: &str, y: &str, log_y: bool| ChartSpec {
        title: title.into(),
        x_label: "pool size (threads, log scale)".into(),
        y_label: y.into(),
        log_x: true,
        log_x_base: 2.0,
        log_y,
        y_from_zero: !log_y,
        legend: Legend::LowerRight,
        ..ChartSpec::default()
    };
    plot::line_chart(
        &dir.join("xu-throughput.svg"),
        &spec(
            "Xu & Bode figs. 6.1-6.3 on this machine: throughput vs pool size",
            "throughput (tasks/s)",
            false,
        ),
        &tput,
    )?;
    plot::line_chart(
        &dir.join("xu-rait.svg"),
        &spec(
            "Xu & Bode figs. 6.4-6.5 on this machine: RAIT vs pool size",
            "RAIT = AIT(size 1) / AIT(size), log scale",
            true,
        ),
        &rait,
    )?;
    Ok(vec![
        (
            "throughput vs pool size, free 100/50/10".into(),
            "xu-throughput.svg".into(),
        ),
        (
            "RAIT vs pool size, free 100/50/10".into(),
            "xu-rait.svg".into(),
        ),
    ])
}

/// Write the Markdown page (`dir/reproduction.md`) and its plots into
/// `dir`; returns the page's path.
pub fn write_page(
    dir: &Path,
    r: &Reproduction,
    claims: &[Claim],
    command: &str,
    scale: f64,
) -> anyhow::Result<PathBuf> {
    output::ensure_dir(dir)?;
    let path = dir.join(PAGE);
    let load = tidepool::sys::load_average().map_or("-".into(), |l| {
        format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])
    });
    let cores = tidepool::sys::cores();
    let count = |v| claims.iter().filter(|c| c.verdict == v).count();
    use tidepool_workload::reproduce::Verdict;
    let mut md = format!(
        "# The papers reproduced\n\nCommand: `{command}`  \nDate: {} · {cores} cores · load \
         average at the end: {load} · trace scale {scale}\n\n**{} claims: {} reproduced, {} not \
         reproduced, {} not comparable.** Each row is a paper's headline claim, the paper's \
         number, ours on this machine, and the verdict with why. Where a paper left its setup \
         open, the choice made is in *why*. A loaded machine (see the load average) makes \
         single runs noisy.\n\n",
        report::today(),
        claims.len(),
        count(Verdict::Reproduced),
        count(Verdict::NotReproduced),
        count(Verdict::NotComparable),
    );
    md.push_str(&claims_table(claims, true).markdown());
    md.push_str(
        "\n*AIT*: average idle time, the mean time a task waits in the queue. *RAIT*: AIT at \
         size 1 over AIT at size i (Xu & Bode's reciprocal AIT). *Stable point*: the smallest \
         size within 5% of the best throughput; *degradation point*: the last size of that \
         band when a larger size falls below it. *Threads kept*: live threads sampled every \
         1 ms (Oh & Kim).\n\n",
    );
    if let Some(x) = &r.xu {
        md.push_str("## Xu & Bode: throughput and RAIT against pool size\n\n");
        for (caption, file) in xu_plots(dir, x)? {
            md.push_str(&format!("![{caption}]({file})\n"));
        }
        for (free, s) in &x.sweeps {
            if let Some(a) = &s.analysis {
                md.push_str(&format!("\n### free_workload {free}\n\n"));
                md.push_str(&sweep_table(a).markdown());
            }
        }
        md.push_str(&format!(
            "\nDynamic pool: `{}` from 1 thread: {} tasks/s, {} threads created, {:.1} on average.\n\n",
            x.dynamic.executor,
            fmt_rate(x.dynamic.throughput),
            x.dynamic.threads_created,
            x.dynamic.avg_threads
        ));
    }
    if let Some(o) = &r.oh_kim {
        md.push_str(&format!(
            "## Oh & Kim: HisDyn against watermark\n\nWorkload `{}`; every run:\n\n",
            o.workload
        ));
        let mut t = Table::new([
            "policy",
            "throughput",
            "threads created",
            "threads kept",
            "mean turnaround",
        ]);
        for r in o.hisdyn.iter().chain(&o.watermark) {
            t.row([
                r.executor.clone(),
                fmt_rate(r.throughput),
                r.threads_created.to_string(),
                format!("{:.1}", r.avg_threads),
                fmt_us(r.mean_turnaround_us),
            ]);
        }
        md.push_str(&t.markdown());
        md.push('\n');
    }
    if let Some(b) = &r.bahadur {
        md.push_str(&format!(
            "## Bahadur et al.: hybrid against mutex queue lock, and the frequency tuner\n\nWorkload `{}`:\n\n",
            b.workload
        ));
        let mut t = Table::new([
            "run",
            "mean turnaround",
            "p99 turnaround",
            "mean wait",
            "p99 wait",
            "max threads",
        ]);
        for (label, r) in [
            ("mutex queue", &b.mutex),
            ("hybrid queue", &b.hybrid),
            ("frequency tuner", &b.frequency),
        ] {
            t.row([
                format!("{label} ({})", r.executor),
                fmt_us(r.mean_turnaround_us),
                fmt_us(r.p99_turnaround_us),
                fmt_us(r.mean_wait_us),
                fmt_us(r.p99_wait_us),
                r.max_threads.to_string(),
            ]);
        }
        md.push_str(&t.markdown());
        md.push('\n');
    }
    std::fs::write(&path, md).with_context(|| format!("cannot write `{}`", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidepool_workload::reproduce::{bahadur_claims, BahadurRuns, Reproduction};
    use tidepool_workload::RunResult;

    #[test]
    fn page_and_table_hold_every_claim() {
        let b = BahadurRuns {
            workload: "w".into(),
            mutex: RunResult::default(),
            hybrid: RunResult::default(),
            frequency: RunResult {
                max_threads: 200,
                ..RunResult::default()
            },
            rate: 200.0,
            busy_needed: 20.0,
        };
        let claims = bahadur_claims(&b);
        let r = Reproduction {
            bahadur: Some(b),
            ..Reproduction::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("nested").join("out");
        let path = write_page(&out, &r, &claims, "tidepool reproduce bahadur", 0.1).unwrap();
        assert_eq!(path, out.join(PAGE));
        let md = std::fs::read_to_string(&path).unwrap();
        assert!(md.contains("Command: `tidepool reproduce bahadur`"), "{md}");
        assert!(md.contains("3 claims:"), "{md}");
        assert!(md.contains("frequency tuner"), "{md}");
        let t = claims_table(&claims, false).render();
        assert_eq!(t.lines().count(), 2 + claims.len());
        let j = serde_json::to_string(&ClaimsJson { claims: &claims }).unwrap();
        assert!(
            j.starts_with("{\"claims\":[{\"paper\":\"Bahadur et al.\",\"claim\":"),
            "{j}"
        );
    }
}
