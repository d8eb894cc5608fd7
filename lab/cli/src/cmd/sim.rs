//! `tidepool sim`: the comparison of `compare` in virtual time
//! (`tidepool-sim`), its validation against queueing theory, its benchmark,
//! and the measurement of the costs it models.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use tidepool::policy::PolicySpec;
use tidepool_sim::load::{interleave_clients, superpose};
use tidepool_sim::validate::{self, Basis, Effort, Validation};
use tidepool_sim::{simulate, Costs, ExecutorModel, SimConfig};
use tidepool_workload::analysis::{analyze_sweep, SweepPoint};
use tidepool_workload::replay::ReplayOptions;
use tidepool_workload::sweep::SizedRun;
use tidepool_workload::{GenSpec, RunResult, TaskSpec, TraceStats};

use super::compare::{command_line, present, Measured, Present, DEFAULT_POLICIES};
use crate::comparison::WorkloadRuns;
use crate::error::{usage, Interrupted};
use crate::lists::{self, PolicyList, Sizes};
use crate::source::{self, Workload};
use crate::table::{fmt_pct, Table};
use crate::{cancel, print};

const EXAMPLES: &str = "\
Examples:
  tidepool sim -w suite --cores 64                         # the compare tables, in virtual time
  tidepool sim -w io --cores 256 --policies auto,hisdyn,tpr --sizes 16..1024:x2
  tidepool sim -w 'poisson:rate=100000,n=10000000,service=exp:20ms,free=95' --cores 64 --policies auto
  tidepool sim --validate                                  # the closed-form table (minutes)
  tidepool sim --validate --quick --json
  tidepool sim --bench                                     # simulated tasks per second
  tidepool sim --measure-costs                             # the costs below, measured here

The simulator runs the same policies through the same control rules as the pool
(tidepool::control) on a modelled machine: --cores cores shared by the runnable workers
(processor sharing), task bodies of compute and sleep slices as the replay runs them,
thread start, wake-up and oversleep delays and the CPU of sleeps and hand-offs as
measured on this machine (or given), and the replay driver's spin before each arrival
(--driver-spin 0s leaves it out); --ideal sets every one of these costs to zero. Each workload is swept over --sizes on static pools
(the oracle), then each policy runs; the tables and --out report are those of
`tidepool compare`. Runs are deterministic: the
same command prints the same numbers. Generator specs are streamed: ten million tasks
need no more memory than ten thousand. See docs/sim.md.";

/// Options of `tidepool sim`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct SimArgs {
    /// Workload: suite name, generator spec or trace file; repeat, list with
    /// commas, or `suite` for all twelve.
    #[arg(long, short, value_name = "NAME_OR_SPEC")]
    pub workload: Vec<String>,
    /// Cores of the simulated machine.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub cores: usize,
    /// Policy specs, comma-separated (repeatable).
    #[arg(long, short, value_name = "SPECS", default_value = DEFAULT_POLICIES, value_parser = lists::parse_policy_list)]
    pub policies: Vec<PolicyList>,
    /// Static pool sizes swept to find the oracle.
    #[arg(long, short, value_name = "SIZES", default_value = "1,2,4,8,16,32", value_parser = lists::parse_sizes)]
    pub sizes: Sizes,
    /// Throughput band of the sweep's safe zone (fraction of the best).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.05)]
    pub tolerance: f64,
    /// Length factor for suite workloads.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub scale: f64,
    /// Offered load factor: run K shifted copies of each workload side by
    /// side (K times the arrivals and work, bursts and steps where they
    /// were), e.g. `--load 32` on 64 cores for the suite's 2-core load.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub load: usize,
    /// Upper bound of adaptive pools.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_threads: usize,
    /// Lower bound of adaptive pools.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_threads: usize,
    /// The textbook machine: every cost below zero (thread start, wake-up,
    /// hand-off, oversleep, slice, preemption, the driver's spin, a sleep's
    /// CPU); a cost option given as well still sets its own.
    #[arg(long, conflicts_with_all = ["validate", "bench", "measure_costs"])]
    pub ideal: bool,
    /// Thread start cost (default: measured on the project's machine).
    #[arg(long, value_name = "DURATION", value_parser = cost)]
    pub spawn_cost: Option<Duration>,
    /// Wake-up cost of a parked worker.
    #[arg(long, value_name = "DURATION", value_parser = cost)]
    pub wake_cost: Option<Duration>,
    /// Oversleep of each sleep of a task body.
    #[arg(long, value_name = "DURATION", value_parser = cost)]
    pub oversleep: Option<Duration>,
    /// Longest wait for a core of a thread that becomes runnable while every
    /// core computes (0s: processor sharing from the first moment).
    #[arg(long, value_name = "DURATION", value_parser = cost)]
    pub preempt: Option<Duration>,
    /// The scheduler's slice: a thread that becomes runnable while every
    /// core computes waits for the compute part on the core it lands on to
    /// end, at most this long (default: this machine's EEVDF base slice,
    /// 1400us; 0s: processor sharing from the first moment).
    #[arg(long, value_name = "DURATION", value_parser = cost)]
    pub slice: Option<Duration>,
    /// How long the replay's driver spins on a core before each arrival
    /// (default: the replay's, 100us; 0s: arrivals cost no CPU).
    #[arg(long, value_name = "DURATION", value_parser = cost)]
    pub driver_spin: Option<Duration>,
    /// CPU a thread spends on each sleep besides sleeping.
    #[arg(long, value_name = "DURATION", value_parser = cost)]
    pub sleep_cpu: Option<Duration>,
    /// CPU a worker spends parking and being woken for a task, beyond taking
    /// it while spinning.
    #[arg(long, value_name = "DURATION", value_parser = cost)]
    pub handoff_cpu: Option<Duration>,
    /// Print one JSON object on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write a report folder (as `compare --out`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the validation against closed forms instead.
    #[arg(long, conflicts_with_all = ["bench", "measure_costs"])]
    pub validate: bool,
    /// With --validate: a representative subset, shorter runs (seconds).
    #[arg(long, requires = "validate")]
    pub quick: bool,
    /// Print the simulator's speed instead (tasks per second).
    #[arg(long, conflicts_with = "measure_costs")]
    pub bench: bool,
    /// Tasks per benchmark scenario.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10_000_000,
        requires = "bench"
    )]
    pub bench_tasks: usize,
    /// Measure the thread start, wake-up, oversleep, preemption, sleep-CPU
    /// and hand-off-CPU costs on this machine.
    #[arg(long)]
    pub measure_costs: bool,
    /// No progress notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Run `tidepool sim`.
pub fn run(a: SimArgs) -> anyhow::Result<()> {
    if a.measure_costs {
        return measure_costs(a.json);
    }
    if a.validate {
        return run_validate(a.quick, a.json, a.quiet);
    }
    if a.bench {
        return run_bench(a.bench_tasks, a.json);
    }
    if a.workload.is_empty() {
        return Err(usage(
            "give a workload (-w), or --validate, --bench or --measure-costs",
        ));
    }
    if !(1..=1_000_000).contains(&a.cores) {
        return Err(usage(format!(
            "--cores {} must be between 1 and 1000000",
            a.cores
        )));
    }
    if !(0.0..1.0).contains(&a.tolerance) {
        return Err(usage(format!(
            "--tolerance {} must be a fraction in [0, 1)",
            a.tolerance
        )));
    }
    if a.min_threads == 0 || a.min_threads > a.max_threads || a.max_threads > tidepool::MAX_THREADS
    {
        return Err(usage(format!(
            "--min-threads {} and --max-threads {} must satisfy 1 <= min <= max <= {}",
            a.min_threads,
            a.max_threads,
            tidepool::MAX_THREADS
        )));
    }
    if !(1..=100_000).contains(&a.load) {
        return Err(usage(format!(
            "--load {} must be between 1 and 100000",
            a.load
        )));
    }
    let costs = costs(&a)?;
    // Ctrl-C (or SIGTERM) ends the current simulation's arrivals, skips the
    // rest, presents what was simulated and exits 130.
    let _ = cancel::flag();
    let policies: Vec<PolicySpec> = a.policies.iter().flat_map(|l| l.0.clone()).collect();
    let names = source::expand(&a.workload);
    let mut all = Vec::new();
    for name in &names {
        let src = Source::load(name, a.scale)?.scaled(a.load);
        let sim = |spec: &PolicySpec| -> RunResult {
            let start = Instant::now();
            let executor = ExecutorModel::for_spec(spec, a.min_threads, a.max_threads);
            let mut config = SimConfig::new(a.cores, executor)
                .with_costs(costs)
                .with_clients(src.clients());
            config.keep_records = src.len <= 100_000;
            let arrivals = src.tasks().take_while(|_| !cancel::requested());
            let mut r = simulate(arrivals, &src.name, config).result;
            r.executor = spec.to_string();
            if !a.quiet {
                eprintln!(
                    "  {} · {spec}: {} tasks in {:.2} s",
                    src.label,
                    r.completed,
                    start.elapsed().as_secs_f64()
                );
            }
            r
        };
        let sweep: Vec<SizedRun> = a
            .sizes
            .0
            .iter()
            .take_while(|_| !cancel::requested())
            .map(|&size| SizedRun {
                size,
                result: sim(&PolicySpec::Fixed(size)),
            })
            .collect();
        if sweep.is_empty() {
            break; // stopped before the first run of this workload
        }
        let points: Vec<SweepPoint> = sweep
            .iter()
            .map(|r| SweepPoint::from_run(r.size, &r.result))
            .collect();
        let analysis = analyze_sweep(&points, a.tolerance);
        let runs = policies
            .iter()
            .take_while(|_| !cancel::requested())
            .map(sim)
            .collect();
        all.push(WorkloadRuns {
            workload: src.label.clone(),
            trace: src.stats,
            sweep,
            analysis,
            policies: runs,
        });
    }
    let mut measured = Measured::default();
    measured.add(all, false);
    present(
        measured,
        &Present {
            json: a.json,
            out: a.out.as_deref(),
            command: command_line(),
            quiet: a.quiet,
            repeats: 1,
        },
    )?;
    if cancel::requested() {
        return Err(Interrupted.into());
    }
    Ok(())
}

/// A machine cost option (`--spawn-cost 40us`): 0s..=1s, with a unit.
fn cost(s: &str) -> Result<Duration, String> {
    tidepool_cluster::duration::parse_within(s, Duration::ZERO..=Duration::from_secs(1))
}

/// The costs asked for: the calibrated defaults (all zero with `--ideal`),
/// overridden one by one.
fn costs(a: &SimArgs) -> anyhow::Result<Costs> {
    let (d, driver) = if a.ideal {
        (Costs::ZERO, Duration::ZERO)
    } else {
        // The replay's own spin: what the real runs pay per arrival.
        (Costs::CALIBRATED, ReplayOptions::default().spin)
    };
    Ok(Costs {
        spawn: a.spawn_cost.unwrap_or(d.spawn),
        wake: a.wake_cost.unwrap_or(d.wake),
        oversleep: a.oversleep.unwrap_or(d.oversleep),
        preempt: a.preempt.unwrap_or(d.preempt),
        slice: a.slice.unwrap_or(d.slice),
        driver: a.driver_spin.unwrap_or(driver),
        sleep_cpu: a.sleep_cpu.unwrap_or(d.sleep_cpu),
        handoff_cpu: a.handoff_cpu.unwrap_or(d.handoff_cpu),
    })
}

/// A workload for the simulator: a generator spec streams its tasks
/// (any length in constant memory); suite workloads and files are loaded.
struct Source {
    label: String,
    name: String,
    len: usize,
    stats: TraceStats,
    kind: SourceKind,
    /// Copies run side by side (`--load`) and their shift unit.
    load: usize,
    gap: Duration,
}

enum SourceKind {
    Stream(GenSpec),
    Loaded(Workload),
}

impl Source {
    fn load(arg: &str, scale: f64) -> anyhow::Result<Source> {
        let is_spec = !std::path::Path::new(arg).exists()
            && arg
                .split_once(':')
                .is_some_and(|(k, _)| !k.contains(['/', '.']));
        if is_spec {
            let spec: GenSpec = arg
                .parse()
                .map_err(|e| usage(format!("invalid workload `{arg}`: {e}")))?;
            let stats = TraceStats::of(spec.stream());
            return Ok(Source {
                label: arg.to_string(),
                name: spec.to_string(),
                len: stats.tasks,
                stats,
                kind: SourceKind::Stream(spec),
                load: 1,
                gap: Duration::ZERO,
            });
        }
        let w = source::load(arg, scale)?;
        Ok(Source {
            label: w.label.clone(),
            name: w.trace.name.clone(),
            len: w.trace.len(),
            stats: w.trace.stats(),
            kind: SourceKind::Loaded(w),
            load: 1,
            gap: Duration::ZERO,
        })
    }

    /// The same workload with `k` times the offered load
    /// ([`tidepool_sim::load::superpose`]).
    fn scaled(mut self, k: usize) -> Source {
        if k <= 1 {
            return self;
        }
        self.gap = Duration::from_secs_f64(
            (self.stats.span_s / self.stats.tasks.saturating_sub(1).max(1) as f64).max(0.0),
        );
        self.load = k;
        self.label = format!("{} x{k}", self.label);
        self.name = format!("{} x{k}", self.name);
        self.stats = TraceStats::of(self.tasks());
        self.len = self.stats.tasks;
        self
    }

    /// A closed loop's clients (`--load K` runs K times as many).
    fn clients(&self) -> Option<usize> {
        let clients = match &self.kind {
            SourceKind::Stream(spec) => match spec.arrivals {
                tidepool_workload::generate::Arrivals::Closed { clients, .. } => Some(clients),
                _ => None,
            },
            SourceKind::Loaded(w) => w.trace.clients,
        };
        clients.map(|c| c * self.load)
    }

    fn tasks(&self) -> Box<dyn Iterator<Item = TaskSpec> + '_> {
        let (k, gap) = (self.load, self.gap);
        if let (Some(clients), true) = (self.clients(), k > 1) {
            let each = clients / k;
            return match &self.kind {
                SourceKind::Stream(spec) => Box::new(interleave_clients(k, each, || spec.stream())),
                SourceKind::Loaded(w) => Box::new(interleave_clients(k, each, || {
                    w.trace.tasks.iter().copied()
                })),
            };
        }
        match &self.kind {
            SourceKind::Stream(spec) if k > 1 => Box::new(superpose(k, gap, || spec.stream())),
            SourceKind::Stream(spec) => Box::new(spec.stream()),
            SourceKind::Loaded(w) if k > 1 => {
                Box::new(superpose(k, gap, || w.trace.tasks.iter().copied()))
            }
            SourceKind::Loaded(w) => Box::new(w.trace.tasks.iter().copied()),
        }
    }
}

fn measure_costs(json: bool) -> anyhow::Result<()> {
    eprintln!("measuring thread start, wake-up, oversleep and preemption (50 rounds each)…");
    let c = Costs::measure(50);
    let load = tidepool::sys::load_average();
    if json {
        print(&format!(
            "{}\n",
            serde_json::json!({ "costs": c, "load_average": load })
        ));
    } else {
        print(&format!(
            "spawn {:.1} µs, wake {:.1} µs, oversleep {:.1} µs (medians), \
             preempt {:.1} µs (mean), slice {:.0} µs (the kernel's base slice), \
             sleep CPU {:.1} µs, hand-off CPU {:.1} µs (load average {})\n\
             use with: --spawn-cost {:.0}us --wake-cost {:.0}us --oversleep {:.0}us --preempt {:.0}us \
             --slice {:.0}us --sleep-cpu {:.1}us --handoff-cpu {:.1}us\n\
             (the hand-off CPU here is an isolated condvar ping-pong's, a lower bound: \
             the defaults of oversleep, sleep CPU and hand-off CPU, 61, 25 and 29 µs, were \
             measured in the replay by tidepool-sim's wait_probe example; \
             docs/notebook/sim.md)\n",
            c.spawn.as_secs_f64() * 1e6,
            c.wake.as_secs_f64() * 1e6,
            c.oversleep.as_secs_f64() * 1e6,
            c.preempt.as_secs_f64() * 1e6,
            c.slice.as_secs_f64() * 1e6,
            c.sleep_cpu.as_secs_f64() * 1e6,
            c.handoff_cpu.as_secs_f64() * 1e6,
            load.map_or("?".into(), |l| format!("{:.2}", l[0])),
            c.spawn.as_secs_f64() * 1e6,
            c.wake.as_secs_f64() * 1e6,
            c.oversleep.as_secs_f64() * 1e6,
            c.preempt.as_secs_f64() * 1e6,
            c.slice.as_secs_f64() * 1e6,
            c.sleep_cpu.as_secs_f64() * 1e6,
            c.handoff_cpu.as_secs_f64() * 1e6,
        ));
    }
    Ok(())
}

/// The subset `--validate --quick` runs (and the tests): every model, the
/// M/M/c corners that converge fast.
pub fn quick_cases() -> Vec<validate::Case> {
    validate::all_cases()
        .into_iter()
        .filter(|c| match c.model {
            validate::Model::MMc => [1, 8, 64].contains(&c.c) && c.rho <= 0.9,
            validate::Model::MMInf => c.c <= 10,
            _ => c.rho <= 0.9,
        })
        .collect()
}

fn run_validate(quick: bool, json: bool, quiet: bool) -> anyhow::Result<()> {
    let (cases, effort) = if quick {
        (
            quick_cases(),
            Effort {
                replications: 10,
                scale: 0.1,
                ..Effort::default()
            },
        )
    } else {
        (validate::all_cases(), Effort::default())
    };
    let started = Instant::now();
    let total = cases.len();
    let v = validate::validate(&cases, effort, |i, c| {
        if !quiet {
            eprintln!(
                "[{}/{total}] {} c={} rho={}",
                i + 1,
                c.model.name(),
                c.c,
                c.rho
            );
        }
    });
    if !quiet {
        eprintln!("validated in {:.1} s", started.elapsed().as_secs_f64());
    }
    if json {
        print(&format!("{}\n", serde_json::to_string(&v)?));
    } else {
        print(&validation_table(&v));
    }
    if v.failed > 0 {
        anyhow::bail!("{} of {} validation rows failed", v.failed, v.cases.len());
    }
    Ok(())
}

/// The validation as a table.
pub fn validation_table(v: &Validation) -> String {
    let mut t = Table::new([
        "model",
        "c",
        "rho",
        "metric",
        "analytic",
        "simulated",
        "rel error",
        "99% CI",
        "pass",
        "tasks/rep",
    ])
    .left_align(0)
    .left_align(3);
    for r in &v.cases {
        t.row([
            r.model.clone(),
            r.c.map_or("-".into(), |c| c.to_string()),
            r.rho.map_or("-".into(), |x| format!("{x}")),
            r.metric.clone(),
            format!("{:.6e}", r.analytic),
            format!("{:.6e}", r.simulated),
            fmt_pct(r.rel_error),
            format!("{:.4e}..{:.4e}", r.ci99[0], r.ci99[1]),
            match (r.pass, r.basis) {
                (true, Some(Basis::Tolerance)) => "yes",
                (true, Some(Basis::Interval)) => "yes (CI)",
                (true, Some(Basis::Floor)) => "yes (<1e-6)",
                _ => "NO",
            }
            .to_string(),
            r.tasks.to_string(),
        ]);
    }
    format!(
        "{}\n{} of {} rows pass (within {} / {} at rho 0.99, or analytic inside the 99% CI, or both below 1e-6); Little's law held in every run: {}\n",
        t.render(),
        v.passed,
        v.cases.len(),
        fmt_pct(0.01),
        fmt_pct(0.03),
        v.cases.iter().all(|r| r.littles_law)
    )
}

/// One benchmark scenario's result.
#[derive(Debug, serde::Serialize)]
struct BenchRow {
    scenario: String,
    cores: usize,
    threads: usize,
    tasks: u64,
    events: u64,
    cpu_s: f64,
    wall_s: f64,
    tasks_per_s: f64,
    events_per_s: f64,
    max_queue: usize,
    peak_rss_mib: Option<f64>,
}

fn run_bench(tasks: usize, json: bool) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for s in tidepool_sim::bench::scenarios(tasks) {
        eprintln!("bench: {} ({tasks} tasks)…", s.name);
        let m = tidepool_sim::bench::run(&s).map_err(|e| anyhow::anyhow!("{e}"))?;
        rows.push(BenchRow {
            scenario: s.name.to_string(),
            cores: s.cores,
            threads: s.threads,
            tasks: m.tasks,
            events: m.events,
            cpu_s: m.cpu.as_secs_f64(),
            wall_s: m.wall.as_secs_f64(),
            tasks_per_s: m.tasks_per_s(),
            events_per_s: m.events_per_s(),
            max_queue: m.max_queue,
            peak_rss_mib: peak_rss_mib(),
        });
    }
    if json {
        print(&format!(
            "{}\n",
            serde_json::json!({ "rows": rows, "load_average": tidepool::sys::load_average() })
        ));
        return Ok(());
    }
    let mut t = Table::new([
        "scenario",
        "tasks",
        "events",
        "CPU s",
        "wall s",
        "tasks/s (CPU)",
        "events/s (CPU)",
        "max queue",
        "peak RSS MiB",
    ])
    .left_align(0);
    for r in &rows {
        t.row([
            r.scenario.clone(),
            r.tasks.to_string(),
            r.events.to_string(),
            format!("{:.2}", r.cpu_s),
            format!("{:.2}", r.wall_s),
            format!("{:.2} M", r.tasks_per_s / 1e6),
            format!("{:.1} M", r.events_per_s / 1e6),
            r.max_queue.to_string(),
            r.peak_rss_mib.map_or("?".into(), |m| format!("{m:.0}")),
        ]);
    }
    print(&format!(
        "{}load average {:?}\n",
        t.render(),
        tidepool::sys::load_average()
    ));
    Ok(())
}

/// The process's peak resident memory (Linux), MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
