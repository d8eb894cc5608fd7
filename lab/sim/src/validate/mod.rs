//! The simulator against queueing theory: textbook models built from the
//! simulator's own parts (a static pool on as many cores as workers is
//! M/M/c; a bounded queue that rejects is M/M/c/K; a thread per request is
//! M/M/∞; one core shared by every task is processor sharing), each run as
//! seeded replications and compared with its closed form ([`formulas`]).
//!
//! A case passes when the simulated mean is within 1% of the analytic value
//! (3% at ρ = 0.99), or the analytic value lies inside the 99% confidence
//! interval of the replications' means (Student's t). Relative errors are
//! taken against the analytic value floored at 10⁻⁶ (in units of the mean
//! service time, or of probability): the M/M/c wait at c = 10,000, ρ = 0.5
//! is below 10⁻¹⁰⁰ and simulates as exactly zero. Every run also checks
//! Little's law.

pub mod formulas;
pub mod stationary;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use tidepool_workload::generate::Arrivals;
use tidepool_workload::{Dist, GenSpec, TaskSpec};

use crate::config::{ExecutorModel, PoolModel, SimConfig};
use crate::costs::Costs;
use crate::outcome::SimOutcome;
use crate::simulate;
use formulas::*;

/// Servers of the M/M/c table.
pub const MMC_SERVERS: [usize; 6] = [1, 2, 8, 64, 1000, 10_000];
/// Utilisations of the M/M/c table.
pub const MMC_RHOS: [f64; 5] = [0.5, 0.8, 0.9, 0.95, 0.99];

/// Values below this count as zero in relative errors.
const FLOOR: f64 = 1e-6;

/// A queueing model the simulator reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Model {
    /// Poisson arrivals, exponential service, `c` workers, unbounded queue.
    MMc,
    /// As M/M/c with at most `k` tasks in the system (a queue of `k − c`
    /// that rejects).
    MMcK {
        /// System capacity.
        k: usize,
    },
    /// The loss system M/M/c/c (no waiting room): Erlang B.
    ErlangB,
    /// A thread per request: M/M/∞.
    MMInf,
    /// One worker, constant service.
    MD1,
    /// One worker, general service (`scv`: squared coefficient of
    /// variation: log-normal for scv > 1, uniform on [0, 2/μ] for 1/3).
    MG1 {
        /// Squared coefficient of variation of the service time.
        scv: f64,
    },
    /// One core shared by every task (a thread per request on one core).
    MM1PS,
    /// A closed loop: `n` clients that think (exponential) and wait for one
    /// of `c` workers (exponential service): the machine-repairman model.
    /// `rho` is the load the clients would offer if they never waited,
    /// `n / ((Z + S)·c)`.
    MMcN {
        /// Clients.
        n: usize,
    },
}

impl Model {
    /// The model's name in tables and JSON.
    pub fn name(&self) -> String {
        match self {
            Model::MMc => "M/M/c".into(),
            Model::MMcK { .. } => "M/M/c/K".into(),
            Model::ErlangB => "M/M/c/c (Erlang B)".into(),
            Model::MMInf => "M/M/inf".into(),
            Model::MD1 => "M/D/1".into(),
            Model::MG1 { .. } => "M/G/1".into(),
            Model::MM1PS => "M/M/1-PS".into(),
            Model::MMcN { n } => format!("M/M/c//{n} (closed)"),
        }
    }

    /// Whether a replication starts in the stationary state (the Markovian
    /// models) rather than empty with a warm-up.
    pub fn starts_stationary(&self) -> bool {
        !matches!(self, Model::MD1 | Model::MG1 { .. } | Model::MMcN { .. })
    }
}

/// Why a row passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Within the relative tolerance.
    Tolerance,
    /// The analytic value lies inside the 99% confidence interval.
    Interval,
    /// Analytic and simulated values are both below 10⁻⁶ (probability, or
    /// mean service times): too rare to estimate by direct simulation; the
    /// simulated value is reported as measured.
    Floor,
}

/// One model at one load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Case {
    /// The model.
    pub model: Model,
    /// Servers (workers); for M/M/∞ the offered load in erlangs.
    pub c: usize,
    /// Offered load per server, `λ / (cμ)`.
    pub rho: f64,
}

/// One compared metric of one case: a row of `tidepool sim --validate`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// Model name.
    pub model: String,
    /// Servers (`null` for M/M/∞).
    pub c: Option<usize>,
    /// Per-server load (`null` for M/M/∞).
    pub rho: Option<f64>,
    /// What is compared (`mean_wait` and `wait_tail` in units of the mean
    /// service time, `blocking`, `mean_threads`, `slowdown[...]`).
    pub metric: String,
    /// The closed form.
    pub analytic: f64,
    /// Mean over the replications.
    pub simulated: f64,
    /// `|simulated − analytic| / max(analytic, 1e-6)`.
    pub rel_error: f64,
    /// 99% confidence interval of the mean over the replications.
    pub ci99: [f64; 2],
    /// Relative error accepted (1%, 3% at ρ = 0.99).
    pub tolerance: f64,
    /// Within tolerance, or the analytic value inside the interval (or
    /// both below 10⁻⁶), and Little's law held.
    pub pass: bool,
    /// Why it passed (`null`: it did not).
    pub basis: Option<Basis>,
    /// Seeded replications run.
    pub replications: usize,
    /// Arrivals measured per replication (after the warm-up, or from the
    /// stationary start).
    pub tasks: u64,
    /// Little's law held in every replication.
    pub littles_law: bool,
}

/// The validation table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Validation {
    /// Every row.
    pub cases: Vec<CaseResult>,
    /// Rows that passed.
    pub passed: usize,
    /// Rows that did not.
    pub failed: usize,
}

/// How long to run each case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Effort {
    /// Seeded replications per case (at least 2).
    pub replications: usize,
    /// Multiplies the tasks per replication (1.0: the full table).
    pub scale: f64,
    /// Replications run at once (results do not depend on it).
    pub threads: usize,
}

impl Default for Effort {
    fn default() -> Self {
        Effort {
            replications: 20,
            scale: 1.0,
            threads: tidepool::sys::cores(),
        }
    }
}

/// The full table: M/M/c over [`MMC_SERVERS`] × [`MMC_RHOS`], then M/M/c/K,
/// Erlang B, M/M/∞, M/D/1, M/G/1 and M/M/1-PS.
pub fn all_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for &c in &MMC_SERVERS {
        for &rho in &MMC_RHOS {
            cases.push(Case {
                model: Model::MMc,
                c,
                rho,
            });
        }
    }
    for (c, k) in [(1, 5), (8, 12), (8, 28)] {
        for rho in [0.8, 1.2] {
            cases.push(Case {
                model: Model::MMcK { k },
                c,
                rho,
            });
        }
    }
    for c in [1, 8, 64] {
        for rho in [0.5, 0.9] {
            cases.push(Case {
                model: Model::ErlangB,
                c,
                rho,
            });
        }
    }
    for a in [10, 1000] {
        cases.push(Case {
            model: Model::MMInf,
            c: a,
            rho: 0.0,
        });
    }
    for rho in [0.5, 0.8, 0.9, 0.95] {
        cases.push(Case {
            model: Model::MD1,
            c: 1,
            rho,
        });
    }
    for scv in [1.0 / 3.0, 4.0] {
        for rho in [0.5, 0.8, 0.9] {
            cases.push(Case {
                model: Model::MG1 { scv },
                c: 1,
                rho,
            });
        }
    }
    for rho in [0.5, 0.8, 0.9] {
        cases.push(Case {
            model: Model::MM1PS,
            c: 1,
            rho,
        });
    }
    for (c, n, rho) in [(1, 5, 0.9), (8, 32, 1.0), (64, 256, 1.2)] {
        cases.push(Case {
            model: Model::MMcN { n },
            c,
            rho,
        });
    }
    cases
}

/// Mean time between arrivals of every validation run, ns. A whole number
/// of nanoseconds, so the generator's mean gap (kept in whole ns) is exact:
/// a gap of 1 ms / 9,900 = 101.01 ns would run at 101 ns, 10⁻⁴ too fast,
/// and at ρ = 0.99 that moves the mean wait by 2%. The mean service time is
/// then `a · GAP_NS` ns for an offered load of `a` erlangs (whole ns too).
pub const GAP_NS: u64 = 1_000;

/// Tasks per replication and the warm-up, for per-server load `rho` and
/// `rare`, the analytic probability of the event the rows count (an
/// arrival waits, or is rejected).
///
/// The queue forgets its state in about `ρ / (1 − √ρ)²` arrivals (its
/// relaxation time, `1 / (μ(√c − √a)²)`, times `λ`), whatever `c`. The
/// Markovian models start in their stationary state (no warm-up, no bias:
/// [`stationary`]); M/D/1 and M/G/1 start empty and warm up for 50
/// relaxation times (e^−50 of the start is left). Each replication runs
/// about 400 relaxation times, between 200,000 and 4,000,000 arrivals; a
/// rare event gets enough arrivals to occur about 5,000 times (up to
/// 10,000,000 arrivals: the waits of 1,000 servers at ρ = 0.9 come in a few
/// long excursions, and their mean needs that many). Events rarer than
/// 10⁻⁶ are not chased (see [`Basis::Floor`]). Times `scale` (at least
/// 1,000 arrivals).
pub fn tasks_per_replication(model: Model, rho: f64, rare: f64, scale: f64) -> (u64, u64) {
    let relax = if rho < 1.0 {
        rho / (1.0 - rho.sqrt()).powi(2)
    } else {
        10.0
    };
    let warmup = match model {
        _ if model.starts_stationary() => 0.0,
        // A closed loop: at least 50 rounds of every client.
        Model::MMcN { n } => (50.0 * relax + 100.0).max(50.0 * n as f64),
        _ => 50.0 * relax + 100.0,
    };
    let mut n = (400.0 * relax).clamp(200_000.0, 4_000_000.0);
    if rare > FLOOR {
        n = n.max((5_000.0 / rare).min(10_000_000.0));
    }
    ((n * scale).max(1_000.0) as u64, warmup as u64)
}

/// A replication's seed: distinct for every case and replication.
fn seed(case: &Case, r: usize) -> u64 {
    let tag = match case.model {
        Model::MMc => 1,
        Model::MMcK { k } => 2 + 16 * k as u64,
        Model::ErlangB => 3,
        Model::MMInf => 4,
        Model::MD1 => 5,
        Model::MG1 { scv } => 6 + 16 * (scv * 100.0) as u64,
        Model::MM1PS => 7,
        Model::MMcN { n } => 8 + 16 * n as u64,
    };
    let mut x = tag ^ (case.c as u64) << 20 ^ ((case.rho * 1e4) as u64) << 40 ^ (r as u64) << 56;
    // splitmix64
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// One replication of `case`: its outcome.
fn replicate(case: &Case, r: usize, n: u64, warmup: u64, service_ns: u64) -> SimOutcome {
    let (c, model) = (case.c, case.model);
    if let Model::MMcN { n: clients } = model {
        let spec = GenSpec {
            arrivals: Arrivals::Closed {
                clients,
                think: Dist::exp(Duration::from_nanos(closed_think_ns(case))),
            },
            service: Dist::exp(Duration::from_nanos(CLOSED_SERVICE_NS)),
            // Clients finish at different times: the window ends `cool`
            // tasks before the stream does, while all of them still run.
            n: (n + warmup + closed_cooldown(n, clients)) as usize,
            free: 0.0,
            free_after: None,
            apps: 1,
            seed: seed(case, r),
        };
        let mut config = SimConfig::new(c, ExecutorModel::Pool(PoolModel::fixed(c)))
            .with_costs(Costs::ZERO)
            .with_clients(Some(clients));
        config.keep_decisions = false;
        config.sample_interval = Duration::from_secs(1);
        config.warmup_tasks = warmup;
        config.steady_tasks = Some(n);
        return simulate(spec.stream(), "validate", config);
    }
    let service_mean = Duration::from_nanos(service_ns);
    let service = match model {
        Model::MD1 => Dist::Const {
            value: service_mean,
        },
        Model::MG1 { scv } if scv > 1.0 => Dist::LogNormal {
            mean: service_mean,
            sd: service_mean.mul_f64(scv.sqrt()),
        },
        Model::MG1 { .. } => Dist::Uniform {
            lo: Duration::ZERO,
            hi: service_mean * 2,
        },
        _ => Dist::exp(service_mean),
    };
    let seed = seed(case, r);
    let rate = 1e9 / GAP_NS as f64;
    let spec = GenSpec::poisson(rate, service, (n + warmup) as usize).with_seed(seed);
    // The stationary start: tasks present at time 0, before the first arrival.
    let initial = if model.starts_stationary() {
        let a = service_ns as f64 / GAP_NS as f64;
        let (servers, cap) = match model {
            Model::MMcK { k } => (c, Some(k)),
            Model::ErlangB => (c, Some(c)),
            Model::MMInf => (usize::MAX, None),
            _ => (c, None),
        };
        let cdf = stationary::in_system_cdf(servers, cap, a);
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5354_4154_494F_4E41);
        let k = stationary::draw(&cdf, &mut rng);
        (0..k)
            .map(|i| TaskSpec {
                request_id: i as u64 + 1,
                app_id: 1,
                start_delay: Duration::ZERO,
                cpu: service.sample(&mut rng),
                blocked: Duration::ZERO,
            })
            .collect()
    } else {
        Vec::new()
    };
    let executor = match model {
        Model::MMc | Model::MD1 | Model::MG1 { .. } | Model::MMcN { .. } => {
            ExecutorModel::Pool(PoolModel::fixed(c))
        }
        Model::MMcK { k } => ExecutorModel::Pool(PoolModel::fixed(c).with_capacity(k - c)),
        Model::ErlangB => ExecutorModel::Pool(PoolModel::fixed(c).with_capacity(0)),
        Model::MMInf | Model::MM1PS => ExecutorModel::PerRequest,
    };
    let cores = match model {
        Model::MMInf => usize::MAX / 2,
        Model::MM1PS => 1,
        _ => c,
    };
    let a = service_ns as f64 / GAP_NS as f64;
    let tail_t = 1.0 / (c as f64 - a).max(1e-9);
    let mut config = SimConfig::new(cores, executor).with_costs(Costs::ZERO);
    config.keep_decisions = false;
    config.sample_interval = Duration::from_secs(1);
    config.warmup_tasks = warmup + initial.len() as u64;
    config.wait_threshold = Some(service_mean.mul_f64(tail_t));
    if model == Model::MM1PS {
        config.size_bins = PS_BINS.iter().map(|b| service_mean.mul_f64(*b)).collect();
    }
    simulate(initial.into_iter().chain(spec.stream()), "validate", config)
}

/// Tasks a closed-loop run streams beyond its measured window: 100 rounds
/// of every client, or a tenth of the window.
fn closed_cooldown(n: u64, clients: usize) -> u64 {
    (100 * clients as u64).max(n / 10)
}

/// Mean service time of the closed-loop runs, ns.
const CLOSED_SERVICE_NS: u64 = 10_000;

/// Mean think time of a closed-loop case, ns: `Z = n / (rho·c) − S`, so
/// that clients that never waited would offer `rho` per worker.
fn closed_think_ns(case: &Case) -> u64 {
    let Model::MMcN { n } = case.model else {
        return 0;
    };
    let z = n as f64 / (case.rho * case.c as f64) - 1.0;
    (z.max(0.0) * CLOSED_SERVICE_NS as f64).round() as u64
}

/// Upper edges of the M/M/1-PS size bins, in mean service times.
const PS_BINS: [f64; 2] = [0.5, 2.0];

/// Run `reps` replications on up to `threads` threads; results in
/// replication order (the same whatever the thread count).
fn replications<T: Send>(reps: usize, threads: usize, run: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, T)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.clamp(1, reps.max(1)))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let r = next.fetch_add(1, Ordering::Relaxed);
                        if r >= reps {
                            return mine;
                        }
                        mine.push((r, run(r)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    done.sort_by_key(|(r, _)| *r);
    done.into_iter().map(|(_, t)| t).collect()
}

/// The rows of one case.
pub fn run_case(case: &Case, effort: Effort) -> Vec<CaseResult> {
    let reps = effort.replications.max(2);
    let (c, rho) = (case.c, case.rho);
    let offered = if case.model == Model::MMInf {
        c as f64
    } else {
        rho * c as f64
    };
    // Whole nanoseconds: the offered load actually run is `a`.
    let service_ns = match case.model {
        Model::MMcN { .. } => CLOSED_SERVICE_NS,
        _ => (offered * GAP_NS as f64).round().max(1.0) as u64,
    };
    let a = service_ns as f64 / GAP_NS as f64;
    let rare = match case.model {
        Model::MMc => erlang_c(c, a),
        Model::MMcK { k } => mmck_blocking(c, k, a),
        Model::ErlangB => erlang_b(c, a),
        _ => 1.0,
    };
    let (n, warmup) = tasks_per_replication(case.model, rho, rare, effort.scale);
    let tail_t = 1.0 / (c as f64 - a).max(1e-9);
    let outs = replications(reps, effort.threads, |r| {
        let out = replicate(case, r, n, warmup, service_ns);
        (
            out.littles_law.holds(),
            metrics_of(case, &out, service_ns as f64),
        )
    });
    let littles = outs.iter().all(|(holds, _)| *holds);
    let mut samples: Vec<Vec<f64>> = Vec::new();
    for (_, values) in outs {
        if samples.is_empty() {
            samples = vec![Vec::new(); values.len()];
        }
        for (s, v) in samples.iter_mut().zip(values) {
            s.push(v);
        }
    }
    let analytic: Vec<(String, f64)> = match case.model {
        Model::MMc => vec![
            ("mean_wait".into(), mmc_mean_wait(c, a)),
            (
                format!("wait_tail(t={tail_t:.4})"),
                mmc_wait_tail(c, a, tail_t),
            ),
        ],
        Model::MMcK { k } => vec![("blocking".into(), mmck_blocking(c, k, a))],
        Model::ErlangB => vec![("blocking".into(), erlang_b(c, a))],
        Model::MMInf => vec![("mean_threads".into(), a)],
        Model::MD1 => vec![("mean_wait".into(), pk_mean_wait(a, 0.0))],
        Model::MG1 { scv } => vec![(format!("mean_wait(scv={scv:.2})"), pk_mean_wait(a, scv))],
        Model::MM1PS => vec![
            ("slowdown(x<0.5)".into(), ps_slowdown(a)),
            ("slowdown(0.5<=x<2)".into(), ps_slowdown(a)),
            ("slowdown(x>=2)".into(), ps_slowdown(a)),
        ],
        Model::MMcN { n } => {
            let z = closed_think_ns(case) as f64 / CLOSED_SERVICE_NS as f64;
            let (x, r) = machine_repairman(n, c, z);
            vec![
                (format!("mean_response(Z={z:.3})"), r),
                ("throughput".into(), x),
            ]
        }
    };
    let tolerance = if rho >= 0.99 && !matches!(case.model, Model::MMcN { .. }) {
        0.03
    } else {
        0.01
    };
    analytic
        .into_iter()
        .zip(samples)
        .map(|((metric, analytic), values)| {
            let (mean, half) = mean_ci99(&values);
            let rel_error = (mean - analytic).abs() / analytic.abs().max(FLOOR);
            let ci99 = [mean - half, mean + half];
            let basis = if rel_error <= tolerance {
                Some(Basis::Tolerance)
            } else if ci99[0] <= analytic && analytic <= ci99[1] {
                Some(Basis::Interval)
            } else if (mean - analytic).abs() <= FLOOR {
                Some(Basis::Floor)
            } else {
                None
            };
            CaseResult {
                model: case.model.name(),
                c: (case.model != Model::MMInf).then_some(c),
                rho: (case.model != Model::MMInf).then_some(rho),
                metric,
                analytic,
                simulated: mean,
                rel_error,
                ci99,
                tolerance,
                pass: basis.is_some() && littles,
                basis,
                replications: reps,
                tasks: n,
                littles_law: littles,
            }
        })
        .collect()
}

/// The measured values of one replication, in the order of the case's rows.
fn metrics_of(case: &Case, out: &SimOutcome, service_ns: f64) -> Vec<f64> {
    let s = &out.steady;
    let wait = s.wait_sum_ns as f64 / s.waited.max(1) as f64 / service_ns;
    match case.model {
        Model::MMc => vec![wait, s.wait_tail()],
        Model::MMcK { .. } | Model::ErlangB => vec![s.blocking()],
        Model::MMInf => vec![s.mean_threads()],
        Model::MD1 | Model::MG1 { .. } => vec![wait],
        Model::MM1PS => s.bins.iter().map(|b| b.slowdown()).collect(),
        Model::MMcN { .. } => {
            let response = s.turnaround_sum_ns as f64 / s.completed.max(1) as f64 / service_ns;
            let rate = s.submitted.saturating_sub(1) as f64 / s.span_ns.max(1) as f64;
            vec![response, rate * service_ns]
        }
    }
}

/// Mean and 99% confidence half-width (Student's t) of `v`.
pub fn mean_ci99(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, f64::INFINITY);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    (mean, t_995(n - 1) * (var / n as f64).sqrt())
}

/// The 0.995 quantile of Student's t with `df` degrees of freedom.
fn t_995(df: usize) -> f64 {
    const T: [f64; 30] = [
        63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012,
        2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779,
        2.771, 2.763, 2.756, 2.750,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        _ => 2.576,
    }
}

/// Run `cases` and tally them; `progress` is called before each case.
pub fn validate(
    cases: &[Case],
    effort: Effort,
    mut progress: impl FnMut(usize, &Case),
) -> Validation {
    let mut rows = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        progress(i, case);
        rows.extend(run_case(case, effort));
    }
    let passed = rows.iter().filter(|r| r.pass).count();
    Validation {
        failed: rows.len() - passed,
        passed,
        cases: rows,
    }
}
