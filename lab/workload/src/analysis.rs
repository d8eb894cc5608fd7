//! Sweep analysis: throughput, AIT, RAIT and p99 wait against static pool
//! size; the thesis's stable point, degradation point and safe zone; and the
//! oracle (best static size).
//!
//! **Rule (Xu 2004, §6.2.2, made exact).** Let `T_max` be the highest
//! throughput in the sweep and `band = (1 − tolerance) · T_max` (tolerance 5 %
//! by default, the noise of a real run). Sort the points by size. The **safe
//! zone** is the longest run of consecutive points, all with throughput ≥
//! `band`, that contains the smallest size reaching `T_max`. Its first size is
//! the **stable point** (where throughput stops growing and "maintains a
//! relatively steady value"); its last size is the **degradation point**
//! when the sweep goes further and the next size falls below the band ("the
//! performance will drop after this point"); when the band lasts to the end
//! of the sweep, the degradation point was not reached and is `None`.
//!
//! **Oracle.** In an open-loop replay every size that keeps up completes the
//! same tasks, so throughput alone ties. The oracle is the size *of the safe
//! zone* with the lowest mean turnaround (ties: the smaller size). A size
//! that reaches the band only beyond a dip (a noisy sweep: 16 in band, 32
//! below, 64 in band again) is not the oracle, even with a lower turnaround.

use serde::{Deserialize, Serialize};

use crate::result::RunResult;

/// One static pool size's measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Pool size.
    pub size: usize,
    /// Completed tasks per second.
    pub throughput: f64,
    /// Mean time in queue, µs (AIT).
    pub mean_wait_us: f64,
    /// 99th percentile time in queue, µs.
    pub p99_wait_us: f64,
    /// Mean turnaround, µs.
    pub mean_turnaround_us: f64,
    /// 99th percentile turnaround, µs.
    pub p99_turnaround_us: f64,
}

impl SweepPoint {
    /// The point of a run at a static `size`.
    pub fn from_run(size: usize, r: &RunResult) -> SweepPoint {
        SweepPoint {
            size,
            throughput: r.throughput,
            mean_wait_us: r.mean_wait_us,
            p99_wait_us: r.p99_wait_us,
            mean_turnaround_us: r.mean_turnaround_us,
            p99_turnaround_us: r.p99_turnaround_us,
        }
    }
}

/// A sweep point with its derived numbers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// The measurements.
    #[serde(flatten)]
    pub point: SweepPoint,
    /// `RAIT_i = AIT_first / AIT_i` (the smallest size's AIT over this
    /// one's); `None` when either AIT is zero.
    pub rait: Option<f64>,
    /// Throughput relative to the best, 0–1.
    pub relative_throughput: f64,
    /// True when the throughput is within the tolerance band.
    pub in_band: bool,
}

/// Result of [`analyze_sweep`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SweepAnalysis {
    /// Rows sorted by size.
    pub rows: Vec<SweepRow>,
    /// Tolerance used (fraction, e.g. 0.05).
    pub tolerance: f64,
    /// Highest throughput.
    pub best_throughput: f64,
    /// Smallest size reaching the highest throughput.
    pub best_throughput_size: usize,
    /// First size of the safe zone.
    pub stable_point: usize,
    /// Last size of the safe zone, if the sweep saw throughput drop after it.
    pub degradation_point: Option<usize>,
    /// Safe zone `[lo, hi]`, inclusive.
    pub safe_zone: (usize, usize),
    /// The best static size (see module docs).
    pub oracle_size: usize,
}

/// RAIT of each point (sorted by size): `AIT_first / AIT_i`.
///
/// ```
/// use tidepool_workload::analysis::rait;
/// assert_eq!(rait(&[100.0, 50.0, 25.0, 0.0]), vec![Some(1.0), Some(2.0), Some(4.0), None]);
/// ```
pub fn rait(aits: &[f64]) -> Vec<Option<f64>> {
    let first = aits.first().copied().unwrap_or(0.0);
    aits.iter()
        .map(|&a| (a > 0.0 && first > 0.0).then(|| first / a))
        .collect()
}

/// Analyse a sweep; `None` when it holds no point or no positive throughput.
///
/// ```
/// use tidepool_workload::analysis::{analyze_sweep, SweepPoint};
/// let pts: Vec<SweepPoint> = [100.0, 200.0, 300.0, 300.0, 295.0, 200.0]
///     .iter().enumerate()
///     .map(|(i, &t)| SweepPoint { size: i + 1, throughput: t, mean_wait_us: 1.0,
///         p99_wait_us: 1.0, mean_turnaround_us: 10.0, p99_turnaround_us: 10.0 })
///     .collect();
/// let a = analyze_sweep(&pts, 0.05).unwrap();
/// assert_eq!(a.stable_point, 3);
/// assert_eq!(a.degradation_point, Some(5));
/// assert_eq!(a.safe_zone, (3, 5));
/// ```
pub fn analyze_sweep(points: &[SweepPoint], tolerance: f64) -> Option<SweepAnalysis> {
    let mut pts = points.to_vec();
    pts.sort_by_key(|p| p.size);
    let best = pts.iter().map(|p| p.throughput).fold(0.0, f64::max);
    if pts.is_empty() || best <= 0.0 {
        return None;
    }
    let tol = tolerance.clamp(0.0, 1.0);
    let band = (1.0 - tol) * best;
    let m = pts.iter().position(|p| p.throughput >= best)?;
    let in_band = |i: usize| pts[i].throughput >= band;
    let (mut lo, mut hi) = (m, m);
    while lo > 0 && in_band(lo - 1) {
        lo -= 1;
    }
    while hi + 1 < pts.len() && in_band(hi + 1) {
        hi += 1;
    }
    let raits = rait(&pts.iter().map(|p| p.mean_wait_us).collect::<Vec<_>>());
    let rows: Vec<SweepRow> = pts
        .iter()
        .zip(raits)
        .enumerate()
        .map(|(i, (p, r))| SweepRow {
            point: *p,
            rait: r,
            relative_throughput: p.throughput / best,
            in_band: in_band(i),
        })
        .collect();
    let oracle = rows[lo..=hi]
        .iter()
        .min_by(|a, b| {
            a.point
                .mean_turnaround_us
                .total_cmp(&b.point.mean_turnaround_us)
                .then(a.point.size.cmp(&b.point.size))
        })
        .map_or(pts[m].size, |r| r.point.size);
    Some(SweepAnalysis {
        tolerance: tol,
        best_throughput: best,
        best_throughput_size: pts[m].size,
        stable_point: pts[lo].size,
        degradation_point: (hi + 1 < pts.len()).then(|| pts[hi].size),
        safe_zone: (pts[lo].size, pts[hi].size),
        oracle_size: oracle,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(f: impl Fn(usize) -> f64, sizes: std::ops::RangeInclusive<usize>) -> Vec<SweepPoint> {
        sizes
            .map(|s| SweepPoint {
                size: s,
                throughput: f(s),
                mean_wait_us: 1000.0 / s as f64,
                p99_wait_us: 0.0,
                mean_turnaround_us: 100.0 + (s as f64 - 20.0).abs(),
                p99_turnaround_us: 0.0,
            })
            .collect()
    }

    #[test]
    fn thesis_shaped_curve() {
        // linear to 13, flat to 40, then falling (figure 6.6 / 6.7)
        let t = |s: usize| {
            if s <= 40 {
                s.min(13) as f64 * 100.0
            } else {
                1300.0 - (s - 40) as f64 * 30.0
            }
        };
        let a = analyze_sweep(&curve(t, 1..=55), 0.05).unwrap();
        assert_eq!(a.stable_point, 13);
        assert_eq!(a.degradation_point, Some(42)); // 1240 ≥ 1235 > 1210
        assert_eq!(a.safe_zone, (13, 42));
        assert_eq!(a.best_throughput_size, 13);
        assert_eq!(a.oracle_size, 20); // lowest turnaround in band
        assert_eq!(a.rows.len(), 55);
        assert_eq!(a.rows[0].rait, Some(1.0));
        assert!((a.rows[9].rait.unwrap() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn noisy_plateau_stays_one_zone_and_no_degradation_when_never_dropping() {
        let noise = [0.0, 0.02, -0.02, 0.01, -0.01, 0.02, -0.02];
        let t = |s: usize| {
            let base = s.min(4) as f64 * 250.0;
            if s >= 4 {
                base * (1.0 + noise[s % noise.len()])
            } else {
                base
            }
        };
        let a = analyze_sweep(&curve(t, 1..=16), 0.05).unwrap();
        assert_eq!(a.stable_point, 4);
        assert_eq!(a.degradation_point, None);
        assert_eq!(a.safe_zone, (4, 16));
    }

    #[test]
    fn unsorted_input_sparse_sizes_and_peak_in_the_middle() {
        let mut pts = curve(|s| [0.0, 10.0, 50.0, 99.0, 100.0, 60.0][s.min(5)], 1..=5);
        for (p, size) in pts.iter_mut().zip([1, 2, 4, 8, 16]) {
            p.size = size;
        }
        pts.reverse();
        let a = analyze_sweep(&pts, 0.05).unwrap();
        assert_eq!(
            a.rows.iter().map(|r| r.point.size).collect::<Vec<_>>(),
            vec![1, 2, 4, 8, 16]
        );
        // sizes 1,2,4,8,16 → throughput 10,50,99,100,60
        assert_eq!(a.best_throughput_size, 8);
        assert_eq!(a.safe_zone, (4, 8));
        assert_eq!(a.degradation_point, Some(8));
    }

    #[test]
    fn oracle_stays_in_the_safe_zone() {
        // A noisy sweep: 16 reaches the best, 32 dips out of the band, 64 is
        // back in it with a lower turnaround. The safe zone is [16, 16] and
        // the oracle must come from it.
        let mut pts = curve(|s| [1400.0, 1983.0, 1860.0, 1974.0][s - 1], 1..=4);
        for (p, (size, ta)) in
            pts.iter_mut()
                .zip([(8, 450.0), (16, 8370.0), (32, 53890.0), (64, 7035.0)])
        {
            p.size = size;
            p.mean_turnaround_us = ta;
        }
        let a = analyze_sweep(&pts, 0.05).unwrap();
        assert_eq!(a.safe_zone, (16, 16));
        assert!(a.rows[3].in_band);
        assert_eq!(a.oracle_size, 16);
    }

    #[test]
    fn degenerate_inputs() {
        assert!(analyze_sweep(&[], 0.05).is_none());
        assert!(analyze_sweep(&curve(|_| 0.0, 1..=3), 0.05).is_none());
        let one = analyze_sweep(&curve(|_| 5.0, 2..=2), 0.05).unwrap();
        assert_eq!(
            (one.stable_point, one.degradation_point, one.oracle_size),
            (2, None, 2)
        );
    }
}
