//! A run of the benchmark: every implementation on every shape, interleaved; its results,
//! paired verdicts against the peers, and the table.

use super::*;

/// One implementation's result on one shape.
#[derive(Debug, Clone, Serialize)]
pub struct ImplResult {
    /// The implementation.
    #[serde(rename = "impl")]
    pub imp: String,
    /// Median items per second over the repeats.
    pub items_per_sec: f64,
    /// Every repeat's items per second.
    pub repeats: Vec<f64>,
    /// Median over the bound.
    pub of_bound: f64,
    /// Median CPU time of the process per item, microseconds (the stages'
    /// own work included: compare it with the shape's compute per item).
    pub cpu_us_per_item: f64,
    /// Median context switches of the process per item (every thread's).
    pub switches_per_item: f64,
    /// Median voluntary context switches per item (waits: parks, sleeps).
    pub voluntary_switches_per_item: f64,
    /// Median over the repeats of items/s over [`decoupled`]'s in the same
    /// repeat: the share of the no-hand-off throughput this row kept.
    pub of_decoupled: f64,
    /// Threads that ran the stage work ([`Impl::threads`]).
    pub threads: usize,
    /// A tidepool row against each peer, paired per repeat (this row's
    /// items/s over the peer's in the same repeat); empty for a peer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vs_peers: Vec<VsPeer>,
    /// The typed row against the buffer row (thread per stage), paired per
    /// repeat: the typed layer's cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_buffer: Option<VsPeer>,
}

/// One tidepool row against one peer ([`crate::paired`]).
#[derive(Debug, Clone, Serialize)]
pub struct VsPeer {
    /// The peer.
    pub peer: String,
    /// Its per-repeat ratio, summarised.
    #[serde(flatten)]
    pub ratio: Paired,
    /// What the interval says: `level` when it includes 1.0, `ahead` or
    /// `behind` when all of it lies on one side, `too few repeats` without
    /// one (fewer than 6 repeats).
    pub verdict: &'static str,
}

/// Row `row` against row `other`, paired per repeat.
fn versus(impls: &[Impl], samples: &[Vec<f64>], row: usize, other: usize) -> Option<VsPeer> {
    let ratio = paired_per_repeat(&samples[row], &samples[other])?;
    Some(VsPeer {
        peer: impls[other].name().into(),
        verdict: verdict(&ratio),
        ratio,
    })
}

/// Each of tidepool's rows against each peer: `samples[i][r]` is
/// implementation `i`'s items/s in repeat `r`.
pub(super) fn vs_peers(impls: &[Impl], samples: &[Vec<f64>], row: usize) -> Vec<VsPeer> {
    if impls[row].is_peer() {
        return Vec::new();
    }
    (0..impls.len())
        .filter(|&j| impls[j].is_peer())
        .filter_map(|j| versus(impls, samples, row, j))
        .collect()
}

/// One shape's results.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    /// The shape.
    pub name: String,
    /// Its throughput bound: the shape's limit on this machine's cores
    /// ([`bound`]), with each blocking stage's cost the median of its
    /// measurements over the repeats.
    pub bound_items_per_sec: f64,
    /// The [`oracle`]'s median items per second (interleaved with the
    /// implementations): what the CPUs this process got did with the
    /// shape's work and no hand-off at all. Not a bound on a loaded
    /// machine (threads that block get a larger share of the CPUs than
    /// threads that never do), but it shows how much CPU the run got.
    pub oracle_items_per_sec: f64,
    /// Every repeat's oracle items per second.
    pub oracle_repeats: Vec<f64>,
    /// The oracle's median CPU time per item, µs: the shape's work itself.
    pub oracle_cpu_us_per_item: f64,
    /// The oracle's median context switches per item.
    pub oracle_switches_per_item: f64,
    /// [`decoupled`]'s median items per second: the shape's groups on
    /// their own threads with no hand-off (run at the start of each
    /// repeat, before the balanced order).
    pub decoupled_items_per_sec: f64,
    /// Every repeat's decoupled items per second.
    pub decoupled_repeats: Vec<f64>,
    /// tidepool-pipeline over the best peer, per repeat (each repeat runs
    /// all of them back to back, in a balanced order).
    pub tidepool_over_best_peer: Vec<f64>,
    /// One entry per implementation.
    pub results: Vec<ImplResult>,
}

/// The whole benchmark's output.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineBench {
    /// One entry per shape.
    pub scenarios: Vec<ScenarioResult>,
    /// Items per run.
    pub items: usize,
    /// Items in flight (buffers, queue capacities).
    pub in_flight: usize,
    /// Repeats per implementation and shape.
    pub repeats: usize,
    /// Logical CPUs.
    pub cores: usize,
    /// The 1-minute load average before the run.
    pub load_before: Option<f64>,
    /// The 1-minute load average after the run.
    pub load_after: Option<f64>,
    /// The busy loop's error, in percent, before and after the run: the
    /// median CPU time of a 2 ms spin against 2 ms (as long as the
    /// calibration's own trials, so that both see the same interrupts;
    /// a 20 µs spin, rarely interrupted, reads ~5% fast). The loop
    /// is calibrated once, at the start; on this VM it once came out
    /// 20–30% off for a whole run (cause not found), and then
    /// the compute shapes' bound (and every "% of bound") is off by as
    /// much. The ratios between
    /// implementations are not.
    pub spin_error_pct: [f64; 2],
}

/// The busy loop's error on a 2 ms spin, in percent.
fn spin_error_pct() -> f64 {
    BusyLoop::global()
        .verify(Duration::from_millis(2), 15)
        .error_pct
}

/// Beyond this |error|, the table warns that "% of bound" is off.
const SPIN_ERROR_WARN_PCT: f64 = 5.0;

/// Run every shape × implementation `repeats` times, interleaved: each
/// repeat runs them back to back in the order [`balanced_order`] gives, so
/// that over the repeats each one follows every other equally often, each
/// on a thread of its own.
///
/// `only` names the shapes to run (empty: all).
pub fn run(
    items: usize,
    in_flight: usize,
    repeats: usize,
    impls: &[Impl],
    only: &[String],
    quiet: bool,
) -> PipelineBench {
    BusyLoop::global(); // calibrated here, outside any measurement
    let spin_before = spin_error_pct();
    let cores = tidepool::sys::cores();
    let load_before = tidepool::sys::load_average().map(|l| l[0]);
    let mut scenarios = Vec::new();
    for mut shape in shapes(cores) {
        shape.in_flight = in_flight;
        if !only.is_empty() && !only.iter().any(|n| n == shape.name) {
            continue;
        }
        let blocks: Vec<u64> = shape
            .stages
            .iter()
            .filter_map(|s| match s.work {
                Work::Block(us) => Some(us),
                Work::Spin(_) => None,
            })
            .collect();
        let mut block_cost: std::collections::HashMap<u64, Vec<f64>> = Default::default();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
        let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
        let mut oracle_ips = Vec::new();
        let mut oracle_cpu = Vec::new();
        let mut sw: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
        let mut vol: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
        let mut oracle_sw = Vec::new();
        let mut decoupled_ips = Vec::new();
        // Warm-up: one short run each.
        for imp in impls {
            imp.run(&shape, items / 10 + 1);
        }
        // Each repeat measures the blocking calls' cost again, runs the
        // decoupled groups, then the oracle and every implementation once,
        // in a balanced order.
        for rep in 0..repeats {
            for &us in &blocks {
                let c = measure_block(us).as_secs_f64();
                block_cost.entry(us).or_default().push(c);
            }
            decoupled_ips.push(decoupled(&shape, items));
            for i in balanced_order(impls.len() + 1, rep) {
                if i == impls.len() {
                    let (ips, cost) = oracle(&shape, items);
                    oracle_cpu.push(cost.cpu_us);
                    oracle_sw.push(cost.switches);
                    if !quiet {
                        eprintln!(
                            "  {:<26} {:<18} repeat {}/{repeats}: {ips:>9.0} items/s",
                            shape.name,
                            "oracle",
                            rep + 1
                        );
                    }
                    oracle_ips.push(ips);
                    continue;
                }
                let (ips, cost) = impls[i].run(&shape, items);
                cpu[i].push(cost.cpu_us);
                sw[i].push(cost.switches);
                vol[i].push(cost.voluntary);
                if !quiet {
                    eprintln!(
                        "  {:<26} {:<18} repeat {}/{repeats}: {ips:>9.0} items/s",
                        shape.name,
                        impls[i].name(),
                        rep + 1,
                    );
                }
                samples[i].push(ips);
            }
        }
        let block_median: std::collections::HashMap<u64, f64> = block_cost
            .iter()
            .map(|(&us, v)| (us, median(v.iter().copied()).unwrap_or(0.0)))
            .collect();
        let structural = bound(&shape, cores, |us| {
            Duration::from_secs_f64(block_median[&us])
        });
        let oracle_median = median(oracle_ips.iter().copied()).unwrap_or(0.0);
        let bound = structural;
        let tp = impls.iter().position(|&i| i == Impl::Tidepool);
        let tidepool_over_best_peer: Vec<f64> = match tp {
            Some(t) if impls.iter().any(|i| i.is_peer()) => (0..repeats)
                .map(|r| {
                    let best = (0..impls.len())
                        .filter(|&i| impls[i].is_peer())
                        .map(|i| samples[i][r])
                        .fold(0.0, f64::max);
                    samples[t][r] / best
                })
                .collect(),
            _ => Vec::new(),
        };
        let vs: Vec<Vec<VsPeer>> = (0..impls.len())
            .map(|i| vs_peers(impls, &samples, i))
            .collect();
        let vs_buffer: Vec<Option<VsPeer>> = (0..impls.len())
            .map(|i| match tp {
                Some(t) if impls[i] == Impl::TidepoolTyped => versus(impls, &samples, i, t),
                _ => None,
            })
            .collect();
        let results = impls
            .iter()
            .zip(samples)
            .zip(cpu)
            .zip(sw)
            .zip(vol)
            .zip(vs)
            .zip(vs_buffer)
            .map(|((((((imp, v), c), w), vo), vs_peers), vs_buffer)| {
                let m = median(v.iter().copied()).unwrap_or(0.0);
                let of_decoupled =
                    median(v.iter().zip(&decoupled_ips).map(|(a, d)| a / d)).unwrap_or(0.0);
                ImplResult {
                    imp: imp.name().into(),
                    items_per_sec: m,
                    repeats: v,
                    of_bound: m / bound,
                    cpu_us_per_item: median(c.iter().copied()).unwrap_or(0.0),
                    switches_per_item: median(w.iter().copied()).unwrap_or(0.0),
                    voluntary_switches_per_item: median(vo.iter().copied()).unwrap_or(0.0),
                    of_decoupled,
                    threads: imp.threads(&shape, cores),
                    vs_peers,
                    vs_buffer,
                }
            })
            .collect();
        scenarios.push(ScenarioResult {
            name: shape.name.into(),
            bound_items_per_sec: bound,
            oracle_items_per_sec: oracle_median,
            oracle_repeats: oracle_ips,
            oracle_cpu_us_per_item: median(oracle_cpu.iter().copied()).unwrap_or(0.0),
            oracle_switches_per_item: median(oracle_sw.iter().copied()).unwrap_or(0.0),
            decoupled_items_per_sec: median(decoupled_ips.iter().copied()).unwrap_or(0.0),
            decoupled_repeats: decoupled_ips,
            tidepool_over_best_peer,
            results,
        });
    }
    PipelineBench {
        scenarios,
        items,
        in_flight,
        repeats,
        cores,
        load_before,
        load_after: tidepool::sys::load_average().map(|l| l[0]),
        spin_error_pct: [spin_before, spin_error_pct()],
    }
}

/// The readable table.
pub fn table(b: &PipelineBench) -> String {
    let mut out = format!(
        "pipeline: {} items per run, {} in flight, median of {} interleaved repeats, {} cores, load {:.2} → {:.2}\n\
         (\"% of bound\" is reported, not a goal; a row is ahead of or behind a peer only when the 95% interval of its paired per-repeat ratios lies on one side of 1, else level)\n",
        b.items,
        b.in_flight,
        b.repeats,
        b.cores,
        b.load_before.unwrap_or(f64::NAN),
        b.load_after.unwrap_or(f64::NAN)
    );
    let [before, after] = b.spin_error_pct;
    if before.abs().max(after.abs()) > SPIN_ERROR_WARN_PCT {
        out += &format!(
            "warning: the busy loop is {:+.1}% / {:+.1}% off its calibration (CPU time of a 2 ms spin, before / after the run): the compute shapes' \"% of bound\" is off by as much; ratios between implementations are not\n",
            before, after
        );
    }
    for s in &b.scenarios {
        let ratios = &s.tidepool_over_best_peer;
        // Only when the thread-per-stage row and a peer both ran.
        let over_best = median(ratios.iter().copied()).map_or(String::new(), |m| {
            format!(
                "; tidepool / best peer per repeat: median {m:.3}, {:.3}..{:.3}",
                ratios.iter().copied().fold(f64::INFINITY, f64::min),
                ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )
        });
        out += &format!(
            "\n{} (bound {:.0} items/s; decoupled {:.0} items/s; oracle {:.0} items/s, {:.1} µs CPU/item, {:.2} switches/item{over_best})\n",
            s.name,
            s.bound_items_per_sec,
            s.decoupled_items_per_sec,
            s.oracle_items_per_sec,
            s.oracle_cpu_us_per_item,
            s.oracle_switches_per_item,
        );
        let best_peer = s
            .results
            .iter()
            .filter(|r| !r.imp.starts_with("tidepool-pipeline"))
            .map(|r| r.items_per_sec)
            .fold(0.0, f64::max);
        for r in &s.results {
            let lo = r.repeats.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.repeats.iter().copied().fold(0.0, f64::max);
            out += &format!(
                "  {:<24} {:>2} threads {:>9.0} items/s  {:>5.1}% of bound  {:>5.1}% of decoupled  {:>6.1} µs CPU/item  {:>5.2} switches/item  (range {:.0}..{:.0}){}\n",
                r.imp,
                r.threads,
                r.items_per_sec,
                100.0 * r.of_bound,
                100.0 * r.of_decoupled,
                r.cpu_us_per_item,
                r.switches_per_item,
                lo,
                hi,
                if r.imp.starts_with("tidepool-pipeline") && best_peer > 0.0 {
                    format!("  {:.3}x best peer", r.items_per_sec / best_peer)
                } else {
                    String::new()
                }
            );
            for v in r.vs_peers.iter().chain(&r.vs_buffer) {
                let p = &v.ratio;
                let ci = p.ci95.map_or("too few repeats for 95%".into(), |(lo, hi)| {
                    format!("95% CI {lo:.3}–{hi:.3}")
                });
                out += &format!(
                    "      ÷ {:<24} per repeat: median {:.3} ({ci}): {}; won {}, lost {}; sign test p {:.3}\n",
                    v.peer, p.median, v.verdict, p.won, p.lost, p.sign_p
                );
            }
        }
    }
    out
}
