//! The benchmark's output: a JSON document of per-scenario medians, and a
//! readable table with ratios.
//!
//! JSON shape (latency fields only where the scenario measures latency; the
//! `_min`/`_max` fields and `load_average` were added later, alongside):
//!
//! ```json
//! {"scenarios": [{"name": "empty-1-submitter",
//!                 "results": [{"impl": "tidepool", "tasks_per_sec": 1.0e6,
//!                              "tasks_per_sec_min": 0.9e6, "tasks_per_sec_max": 1.1e6}]},
//!                {"name": "latency-idle",
//!                 "results": [{"impl": "tidepool", "tasks_per_sec": 1.0e4,
//!                              "tasks_per_sec_min": 0.9e4, "tasks_per_sec_max": 1.1e4,
//!                              "p50_ns": 9000, "p99_ns": 30000,
//!                              "p50_ns_min": 8000, "p50_ns_max": 9500}]}],
//!  "load_average": {"start": [1.0, 0.8, 0.5], "end": [1.2, 0.9, 0.5]}}
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::harness::{cost_percent, median_u64, ratio_higher_better, ratio_lower_better, spread};
use crate::scenario::{Sample, Scenario};
use crate::subjects::Impl;

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// One entry per scenario, in run order.
    pub scenarios: Vec<ScenarioReport>,
    /// The machine's load averages when the run started and ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_average: Option<LoadAverage>,
}

/// The 1-, 5- and 15-minute load averages at the start and end of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadAverage {
    /// When the run started.
    pub start: [f64; 3],
    /// When it ended.
    pub end: [f64; 3],
}

/// The results of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// Scenario name (`empty-1-submitter`, …).
    pub name: String,
    /// One entry per implementation.
    pub results: Vec<ImplResult>,
}

/// One implementation's medians in one scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImplResult {
    /// Implementation name (`tidepool`, `rayon`, …).
    #[serde(rename = "impl")]
    pub name: String,
    /// Median tasks per second over the repeats.
    pub tasks_per_sec: f64,
    /// The lowest tasks per second of the repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks_per_sec_min: Option<f64>,
    /// The highest tasks per second of the repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks_per_sec_max: Option<f64>,
    /// Median over the repeats of the per-run p50 latency, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ns: Option<u64>,
    /// Median over the repeats of the per-run p99 latency, in nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ns: Option<u64>,
    /// The lowest per-run p50 of the repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ns_min: Option<u64>,
    /// The highest per-run p50 of the repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ns_max: Option<u64>,
    /// Spread of the main metric over the repeats, `(max - min) / median`
    /// (shown in the table as a noise indicator; not part of the JSON).
    #[serde(skip)]
    pub spread: Option<f64>,
    /// Median process CPU time per task in ns (throughput scenarios; shown in
    /// the table, not part of the JSON).
    #[serde(skip)]
    pub cpu_ns_per_task: Option<f64>,
    /// The main metric of every repeat, in repeat order (tasks per second,
    /// or p50 ns for latency scenarios): per-repeat ratios between impls
    /// that ran side by side (not part of the JSON).
    #[serde(skip)]
    pub per_repeat: Vec<f64>,
}

/// Raw samples keyed by scenario and implementation.
pub type Samples = HashMap<(Scenario, Impl), Vec<Sample>>;

impl Report {
    /// Reduce the repeated `samples` to medians, in the order of `scenarios`
    /// and `impls` (pairs without samples are left out).
    pub fn from_samples(scenarios: &[Scenario], impls: &[Impl], samples: &Samples) -> Report {
        let scenarios = scenarios
            .iter()
            .map(|&sc| ScenarioReport {
                name: sc.name().to_string(),
                results: impls
                    .iter()
                    .filter_map(|&im| {
                        let runs = samples.get(&(sc, im))?;
                        let tps: Vec<f64> = runs.iter().map(|r| r.tasks_per_sec).collect();
                        let p50: Vec<u64> = runs.iter().filter_map(|r| r.p50_ns).collect();
                        let p99: Vec<u64> = runs.iter().filter_map(|r| r.p99_ns).collect();
                        let cpu: Vec<f64> = runs.iter().filter_map(|r| r.cpu_ns_per_task).collect();
                        let main: Vec<f64> = if sc.measures_latency() {
                            p50.iter().map(|&x| x as f64).collect()
                        } else {
                            tps.clone()
                        };
                        Some(ImplResult {
                            name: im.name().to_string(),
                            tasks_per_sec: tidepool_workload::median(tps.iter().copied())?,
                            tasks_per_sec_min: tps.iter().copied().reduce(f64::min),
                            tasks_per_sec_max: tps.iter().copied().reduce(f64::max),
                            p50_ns: median_u64(&p50),
                            p99_ns: median_u64(&p99),
                            p50_ns_min: p50.iter().copied().min(),
                            p50_ns_max: p50.iter().copied().max(),
                            spread: spread(&main),
                            cpu_ns_per_task: tidepool_workload::median(cpu.iter().copied()),
                            per_repeat: main,
                        })
                    })
                    .collect(),
            })
            .collect();
        Report {
            scenarios,
            load_average: None,
        }
    }

    /// The report with the load averages at the start and end of the run.
    pub fn with_load_average(mut self, start: Option<[f64; 3]>, end: Option<[f64; 3]>) -> Self {
        self.load_average = start
            .zip(end)
            .map(|(start, end)| LoadAverage { start, end });
        self
    }

    /// "load average 5.1 4.2 3.9 → 6.0 4.5 4.0" (empty when not recorded).
    pub fn load_line(&self) -> String {
        let f = |l: &[f64; 3]| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]);
        self.load_average
            .as_ref()
            .map(|l| format!("load average (1/5/15 min) {} → {}", f(&l.start), f(&l.end)))
            .unwrap_or_default()
    }

    /// The scenario called `name`.
    pub fn scenario(&self, name: &str) -> Option<&ScenarioReport> {
        self.scenarios.iter().find(|s| s.name == name)
    }

    /// The report as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a report always serialises")
    }

    /// The statistics cost in percent on each throughput scenario: how much
    /// slower `with` is than `without` (e.g. `tidepool` vs `tidepool-nostats`).
    pub fn stats_cost(&self, with: &str, without: &str) -> Vec<(String, f64)> {
        self.scenarios
            .iter()
            .filter(|s| !s.is_latency())
            .filter_map(|s| {
                let w = s.get(with)?.tasks_per_sec;
                let wo = s.get(without)?.tasks_per_sec;
                Some((s.name.clone(), cost_percent(w, wo)?))
            })
            .collect()
    }

    /// A readable table: per scenario, each implementation's median and
    /// min–max over the repeats, CPU per task, and how many times better
    /// `tidepool` is (above 1: tidepool wins); then a summary of tidepool
    /// against the best peer (with the spread of the per-repeat ratio) and
    /// the statistics cost.
    pub fn to_table(&self, header: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{header}");
        let load = self.load_line();
        if !load.is_empty() {
            let _ = writeln!(out, "{load}");
        }
        let _ = writeln!(
            out,
            "min–max: over the repeats; cpu/task: process CPU time (all threads) per task; \
             tidepool ×: how many times better tidepool is (> 1: tidepool ahead)"
        );
        for sc in &self.scenarios {
            let latency = sc.is_latency();
            let tp = sc.get("tidepool");
            let _ = writeln!(out, "\n== {} ==", sc.name);
            let _ = writeln!(
                out,
                "{:<18} {:>14} {:>19} {:>10} {:>10} {:>10} {:>12}",
                "impl",
                if latency { "p50" } else { "tasks/s" },
                "min–max",
                "p99",
                "spread",
                "cpu/task",
                "tidepool ×"
            );
            for r in &sc.results {
                let adv = tp.and_then(|t| sc.advantage(t, r));
                let _ = writeln!(
                    out,
                    "{:<18} {:>14} {:>19} {:>10} {:>10} {:>10} {:>12}",
                    r.name,
                    sc.main_value(r),
                    sc.main_range(r),
                    r.p99_ns.map(fmt_ns).unwrap_or_else(|| "-".into()),
                    r.spread
                        .map(|x| format!("{:.0}%", x * 100.0))
                        .unwrap_or_else(|| "-".into()),
                    r.cpu_ns_per_task
                        .map(|c| format!("{c:.0} ns"))
                        .unwrap_or_else(|| "-".into()),
                    adv.map(|a| format!("{a:.2}")).unwrap_or_else(|| "-".into()),
                );
            }
        }
        let _ = writeln!(
            out,
            "\n== summary: tidepool vs the best peer (above 1.00: tidepool ahead; \
             in brackets the min–max of the ratio within each repeat) =="
        );
        for sc in &self.scenarios {
            let (Some(tp), Some(best)) = (sc.get("tidepool"), sc.best_peer()) else {
                continue;
            };
            let what = if sc.is_latency() {
                "p50 latency"
            } else {
                "throughput"
            };
            let fmt_adv =
                |a: Option<f64>| a.map(|a| format!("{a:.2}×")).unwrap_or_else(|| "-".into());
            let mut line = format!(
                "{:<20} {:>6} {:<13} (best peer: {}, {})",
                sc.name,
                fmt_adv(sc.advantage(tp, best)),
                sc.ratio_range(tp, best)
                    .map(|(lo, hi)| format!("[{lo:.2}–{hi:.2}]"))
                    .unwrap_or_default(),
                best.name,
                what
            );
            let per_repeat: Vec<String> = sc
                .ratios(tp, best)
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect();
            if per_repeat.len() > 1 {
                line += &format!("; per repeat {}", per_repeat.join(" "));
            }
            if let Some(bt) = sc.best_tidepool() {
                if bt.name != tp.name {
                    line += &format!(
                        "; best tidepool variant {}: {}",
                        bt.name,
                        fmt_adv(sc.advantage(bt, best))
                    );
                }
            }
            // The default pool sizes itself: how it fares beside the fixed N.
            if let Some(auto) = sc.get("tidepool-auto") {
                line += &format!(
                    "; default pool tidepool-auto: {} {}",
                    fmt_adv(sc.advantage(auto, best)),
                    sc.ratio_range(auto, best)
                        .map(|(lo, hi)| format!("[{lo:.2}–{hi:.2}]"))
                        .unwrap_or_default()
                );
            }
            if let Some(floor) = sc.get(crate::subjects::FLOOR) {
                line += &format!(
                    "; floor {} (tidepool {}, best peer {} of it)",
                    floor.p50_ns.map(fmt_ns).unwrap_or_else(|| "-".into()),
                    fmt_adv(sc.advantage(tp, floor)),
                    fmt_adv(sc.advantage(best, floor))
                );
            }
            let _ = writeln!(out, "{line}");
        }
        let cost = self.stats_cost("tidepool", "tidepool-nostats");
        if !cost.is_empty() {
            let _ = writeln!(
                out,
                "\n== statistics cost (tidepool vs tidepool-nostats, throughput) =="
            );
            for (name, pct) in cost {
                let _ = writeln!(out, "{name:<20} {pct:>6.1} %");
            }
        }
        out
    }
}

impl Report {
    /// A Markdown table for `docs/benchmarks.md`: one row per implementation,
    /// one column per scenario, each cell the median, its min–max over the
    /// repeats, and its ratio to the best peer on the scenario's main metric
    /// (above 1.00: better than every peer).
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let load = self.load_line();
        if !load.is_empty() {
            let _ = writeln!(out, "{load}\n");
        }
        let mut names: Vec<&str> = Vec::new();
        for sc in &self.scenarios {
            for r in &sc.results {
                if !names.contains(&r.name.as_str()) {
                    names.push(&r.name);
                }
            }
        }
        let _ = write!(out, "| impl |");
        for sc in &self.scenarios {
            let unit = if sc.is_latency() {
                "p50 / p99"
            } else {
                "tasks/s"
            };
            let _ = write!(out, " {} ({unit}) |", sc.name);
        }
        let _ = write!(out, "\n|---|");
        for _ in &self.scenarios {
            let _ = write!(out, "---:|");
        }
        out.push('\n');
        for name in names {
            let _ = write!(out, "| {name} |");
            for sc in &self.scenarios {
                let cell = sc.get(name).map(|r| {
                    let value = if sc.is_latency() {
                        format!(
                            "{} / {}",
                            r.p50_ns.map(fmt_ns).unwrap_or_default(),
                            r.p99_ns.map(fmt_ns).unwrap_or_default()
                        )
                    } else {
                        fmt_rate(r.tasks_per_sec)
                    };
                    let ratio = sc
                        .best_peer()
                        .and_then(|b| sc.advantage(r, b))
                        .map(|a| format!(" ({a:.2}×)"))
                        .unwrap_or_default();
                    format!("{value}{ratio} [{}]", sc.main_range(r))
                });
                let _ = write!(out, " {} |", cell.unwrap_or_else(|| "-".into()));
            }
            out.push('\n');
        }
        out
    }
}

impl ScenarioReport {
    /// `r`'s median on the main metric, formatted.
    fn main_value(&self, r: &ImplResult) -> String {
        if self.is_latency() {
            r.p50_ns.map(fmt_ns).unwrap_or_else(|| "-".into())
        } else {
            fmt_rate(r.tasks_per_sec)
        }
    }

    /// `r`'s min–max over the repeats on the main metric, formatted.
    fn main_range(&self, r: &ImplResult) -> String {
        let range = if self.is_latency() {
            r.p50_ns_min
                .zip(r.p50_ns_max)
                .map(|(lo, hi)| (fmt_ns(lo), fmt_ns(hi)))
        } else {
            r.tasks_per_sec_min
                .zip(r.tasks_per_sec_max)
                .map(|(lo, hi)| (fmt_rate(lo), fmt_rate(hi)))
        };
        range
            .map(|(lo, hi)| format!("{lo}–{hi}"))
            .unwrap_or_else(|| "-".into())
    }

    /// The ratio of `a` to `b` (above 1: `a` better) within each repeat (the
    /// two ran side by side there), in repeat order; empty unless both have
    /// every repeat's sample.
    pub fn ratios(&self, a: &ImplResult, b: &ImplResult) -> Vec<f64> {
        if a.per_repeat.len() != b.per_repeat.len() {
            return Vec::new();
        }
        a.per_repeat
            .iter()
            .zip(&b.per_repeat)
            .filter_map(|(&x, &y)| {
                if self.is_latency() {
                    ratio_lower_better(x, y)
                } else {
                    ratio_higher_better(x, y)
                }
            })
            .collect()
    }

    /// The lowest and highest of [`ratios`](Self::ratios).
    pub fn ratio_range(&self, a: &ImplResult, b: &ImplResult) -> Option<(f64, f64)> {
        let ratios = self.ratios(a, b);
        let lo = ratios.iter().copied().reduce(f64::min)?;
        let hi = ratios.iter().copied().reduce(f64::max)?;
        Some((lo, hi))
    }

    /// The result of implementation `name`.
    pub fn get(&self, name: &str) -> Option<&ImplResult> {
        self.results.iter().find(|r| r.name == name)
    }

    /// Whether this scenario is judged on latency (lower p50 is better)
    /// rather than throughput.
    pub fn is_latency(&self) -> bool {
        self.results.iter().any(|r| r.p50_ns.is_some())
    }

    /// How many times better `a` is than `b` on this scenario's main metric
    /// (throughput, or p50 latency for latency scenarios).
    pub fn advantage(&self, a: &ImplResult, b: &ImplResult) -> Option<f64> {
        if self.is_latency() {
            ratio_lower_better(a.p50_ns? as f64, b.p50_ns? as f64)
        } else {
            ratio_higher_better(a.tasks_per_sec, b.tasks_per_sec)
        }
    }

    /// The best implementation that is not a tidepool variant (nor the
    /// floor, which is a reference, not a pool).
    pub fn best_peer(&self) -> Option<&ImplResult> {
        self.best_of(|r| !r.name.starts_with("tidepool") && r.name != crate::subjects::FLOOR)
    }

    /// The best tidepool variant (default or otherwise configured).
    pub fn best_tidepool(&self) -> Option<&ImplResult> {
        self.best_of(|r| r.name.starts_with("tidepool"))
    }

    fn best_of(&self, keep: impl Fn(&ImplResult) -> bool) -> Option<&ImplResult> {
        let peers = self.results.iter().filter(|r| keep(r));
        if self.is_latency() {
            peers
                .filter(|r| r.p50_ns.is_some())
                .min_by_key(|r| r.p50_ns)
        } else {
            peers.max_by(|a, b| a.tasks_per_sec.total_cmp(&b.tasks_per_sec))
        }
    }
}

/// `1234567.0` → `1.23 M`.
pub fn fmt_rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// `12345` → `12.3 µs`.
pub fn fmt_ns(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(tps: f64, lat: Option<(u64, u64)>) -> Sample {
        Sample {
            tasks_per_sec: tps,
            p50_ns: lat.map(|l| l.0),
            p99_ns: lat.map(|l| l.1),
            cpu_ns_per_task: None,
        }
    }

    fn report() -> Report {
        let mut s = Samples::new();
        s.insert(
            (Scenario::Empty1, Impl::Tidepool),
            vec![sample(3e6, None), sample(1e6, None), sample(2e6, None)],
        );
        s.insert((Scenario::Empty1, Impl::Rayon), vec![sample(1e6, None)]);
        s.insert(
            (Scenario::Empty1, Impl::TidepoolAuto),
            vec![sample(1.5e6, None)],
        );
        s.insert(
            (Scenario::Empty1, Impl::TidepoolNoStats),
            vec![sample(2.5e6, None)],
        );
        s.insert(
            (Scenario::LatencyIdle, Impl::Tidepool),
            vec![
                sample(1e4, Some((5_000, 9_000))),
                sample(1e4, Some((7_000, 11_000))),
            ],
        );
        s.insert(
            (Scenario::LatencyIdle, Impl::Rayon),
            vec![sample(1e4, Some((10_000, 20_000)))],
        );
        Report::from_samples(
            &[Scenario::Empty1, Scenario::LatencyIdle],
            &[
                Impl::Tidepool,
                Impl::TidepoolNoStats,
                Impl::TidepoolAuto,
                Impl::Rayon,
                Impl::Crossbeam,
            ],
            &s,
        )
    }

    #[test]
    fn json_has_the_agreed_shape() {
        let json: serde_json::Value = serde_json::from_str(&report().to_json()).unwrap();
        let obj = json.as_object().unwrap();
        assert_eq!(obj.keys().collect::<Vec<_>>(), vec!["scenarios"]);
        let scenarios = obj["scenarios"].as_array().unwrap();
        assert_eq!(scenarios.len(), 2);
        assert_eq!(scenarios[0]["name"], "empty-1-submitter");
        let r0 = &scenarios[0]["results"][0];
        assert_eq!(r0["impl"], "tidepool");
        assert_eq!(r0["tasks_per_sec"], 2e6); // the median of 3
        assert_eq!(r0["tasks_per_sec_min"], 1e6);
        assert_eq!(r0["tasks_per_sec_max"], 3e6);
        assert!(r0.get("p50_ns").is_none() && r0.get("p99_ns").is_none());
        assert!(r0.get("p50_ns_min").is_none());
        // crossbeam had no samples: left out.
        assert_eq!(scenarios[0]["results"].as_array().unwrap().len(), 4);
        let l0 = &scenarios[1]["results"][0];
        assert_eq!(l0["p50_ns"], 6_000);
        assert_eq!(l0["p99_ns"], 10_000);
        assert_eq!(
            (&l0["p50_ns_min"], &l0["p50_ns_max"]),
            (&5_000.into(), &7_000.into())
        );
        assert!(l0["tasks_per_sec"].is_f64());
        // Round trip.
        let back: Report = serde_json::from_value(json).unwrap();
        let mut expected = report();
        for sc in &mut expected.scenarios {
            for r in &mut sc.results {
                r.spread = None; // not serialised
                r.cpu_ns_per_task = None;
                r.per_repeat.clear();
            }
        }
        assert_eq!(back, expected);
    }

    /// The floor is shown beside the latency scenario but never taken for
    /// the best peer, however fast it is.
    #[test]
    fn floor_is_a_reference_not_a_peer() {
        let mut s = Samples::new();
        s.insert(
            (Scenario::LatencyIdle, Impl::Tidepool),
            vec![sample(1e4, Some((6_000, 9_000)))],
        );
        s.insert(
            (Scenario::LatencyIdle, Impl::Rayon),
            vec![sample(1e4, Some((8_000, 9_000)))],
        );
        s.insert(
            (Scenario::LatencyIdle, Impl::Floor),
            vec![sample(1e4, Some((4_000, 9_000)))],
        );
        let r = Report::from_samples(
            &[Scenario::LatencyIdle],
            &[Impl::Tidepool, Impl::Rayon, Impl::Floor],
            &s,
        );
        let l = r.scenario("latency-idle").unwrap();
        assert_eq!(l.best_peer().unwrap().name, "rayon");
        let table = r.to_table("hdr");
        assert!(
            table.contains("floor 4.0 µs (tidepool 0.67×, best peer 0.50× of it)"),
            "{table}"
        );
    }

    #[test]
    fn ratios_stats_cost_and_table() {
        let r = report();
        let e = r.scenario("empty-1-submitter").unwrap();
        assert_eq!(e.best_peer().unwrap().name, "rayon");
        assert_eq!(e.best_tidepool().unwrap().name, "tidepool-nostats");
        assert_eq!(
            e.advantage(e.get("tidepool").unwrap(), e.best_peer().unwrap()),
            Some(2.0)
        );
        let l = r.scenario("latency-idle").unwrap();
        assert!(l.is_latency() && !e.is_latency());
        // 10 µs vs 6 µs p50: tidepool 1.67× better.
        let adv = l
            .advantage(l.get("tidepool").unwrap(), l.best_peer().unwrap())
            .unwrap();
        assert!((adv - 10.0 / 6.0).abs() < 1e-9);
        let cost = r.stats_cost("tidepool", "tidepool-nostats");
        assert_eq!(cost.len(), 1);
        assert!((cost[0].1 - 20.0).abs() < 1e-9);
        let table = r.to_table("hdr");
        assert!(table.contains("empty-1-submitter") && table.contains("2.00×"));
        assert!(table.contains("20.0 %"));
        assert!(table.contains("default pool tidepool-auto: 1.50×"));
        let md = r.to_markdown();
        assert!(md.starts_with("| impl | empty-1-submitter (tasks/s) | latency-idle (p50 / p99) |"));
        assert!(md.contains(
            "| tidepool | 2.00 M (2.00×) [1.00 M–3.00 M] | 6.0 µs / 10.0 µs (1.67×) [5.0 µs–7.0 µs] |"
        ));
        // Within-repeat ratios need every repeat of both impls.
        assert_eq!(
            e.ratio_range(e.get("tidepool").unwrap(), e.get("rayon").unwrap()),
            None
        );
        let mut both = Samples::new();
        both.insert(
            (Scenario::Empty1, Impl::Tidepool),
            vec![sample(3e6, None), sample(1e6, None)],
        );
        both.insert(
            (Scenario::Empty1, Impl::Crossbeam),
            vec![sample(1e6, None), sample(2e6, None)],
        );
        let two = Report::from_samples(
            &[Scenario::Empty1],
            &[Impl::Tidepool, Impl::Crossbeam],
            &both,
        )
        .with_load_average(Some([1.0, 2.0, 3.0]), Some([4.0, 5.0, 6.0]));
        let sc = &two.scenarios[0];
        assert_eq!(
            sc.ratio_range(sc.get("tidepool").unwrap(), sc.get("crossbeam").unwrap()),
            Some((0.5, 3.0))
        );
        assert!(two
            .to_markdown()
            .starts_with("load average (1/5/15 min) 1.00 2.00 3.00 → 4.00 5.00 6.00"));
        let json: serde_json::Value = serde_json::from_str(&two.to_json()).unwrap();
        assert_eq!(json["load_average"]["end"][2], 6.0);
        assert_eq!(e.get("tidepool").unwrap().spread, Some(1.0)); // (3-1)/2
        assert_eq!(fmt_ns(12_345), "12.3 µs");
        assert_eq!(fmt_rate(1_234_567.0), "1.23 M");
    }
}
