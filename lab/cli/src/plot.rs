//! SVG charts (plotters, SVG backend): throughput / RAIT / p99 wait against
//! static pool size, pool size over time per policy, wait-time CCDFs per
//! policy, and the summary figure (policies × workloads). Each chart is one file; every function returns the path written.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use tidepool_workload::analysis::{SweepAnalysis, SweepRow};
use tidepool_workload::compare::bar::{BarCell, BarGrid, MAX_P99_TURNAROUND_VS_ORACLE};
use tidepool_workload::metrics::{SizePoint, TaskRecord};

/// Chart size in pixels.
pub const SIZE: (u32, u32) = (900, 540);

/// Tableau 10: distinct, readable line colours.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of the `i`-th series.
pub fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points, in drawing order.
    pub points: Vec<(f64, f64)>,
    /// Draw a dot at every point.
    pub markers: bool,
}

/// What a chart shows, besides its series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChartSpec {
    /// Title above the plot.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// Logarithmic x axis (values must be > 0).
    pub log_x: bool,
    /// Base of the logarithmic x axis' ticks: 2 for pool sizes; 0 means 10.
    pub log_x_base: f64,
    /// Logarithmic y axis (values must be > 0; for RAIT, which spans decades).
    pub log_y: bool,
    /// Force the y axis to start at zero.
    pub y_from_zero: bool,
    /// A shaded x interval with a legend text (e.g. the safe zone).
    pub band: Option<(f64, f64, String)>,
    /// Fixed y range (e.g. 0..1 for a CDF).
    pub y_range: Option<(f64, f64)>,
    /// Y values are whole numbers (thread counts): no fractional ticks.
    pub integer_y: bool,
    /// Where the legend goes.
    pub legend: Legend,
}

/// Legend corner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Legend {
    /// Top right (for falling curves).
    #[default]
    UpperRight,
    /// Bottom right (for rising curves).
    LowerRight,
}

fn extent(series: &[Series], f: impl Fn(&(f64, f64)) -> f64) -> Option<(f64, f64)> {
    let mut it = series
        .iter()
        .flat_map(|s| s.points.iter())
        .map(f)
        .filter(|v| v.is_finite());
    let first = it.next()?;
    Some(it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
}

fn plot_err<E: std::fmt::Debug>(path: &Path) -> impl Fn(E) -> anyhow::Error + '_ {
    move |e| anyhow!("cannot draw chart {}: {e:?}", path.display())
}

/// Draw a line chart to an SVG file at `path`.
pub fn line_chart(path: &Path, spec: &ChartSpec, series: &[Series]) -> anyhow::Result<PathBuf> {
    let (mut x0, mut x1) = extent(series, |p| p.0).unwrap_or((0.0, 1.0));
    if let Some((a, b, _)) = &spec.band {
        x0 = x0.min(*a);
        x1 = x1.max(*b);
    }
    let (y0, y1) = match spec.y_range {
        Some(r) => r,
        None if spec.log_y => {
            let (lo, hi) = extent(series, |p| p.1).unwrap_or((1.0, 10.0));
            let lo = lo.max(1e-9);
            (lo / 1.5, hi.max(lo * 2.0) * 1.5)
        }
        None => {
            let (lo, hi) = extent(series, |p| p.1).unwrap_or((0.0, 1.0));
            let lo = if spec.y_from_zero { lo.min(0.0) } else { lo };
            let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
            (if spec.y_from_zero { lo } else { lo - pad }, hi + pad)
        }
    };
    let base = if spec.log_x_base > 1.0 {
        spec.log_x_base
    } else {
        10.0
    };
    let (lx0, lx1) = (
        x0.max(1e-9),
        if x1 <= x0.max(1e-9) {
            x0.max(1e-9) * 2.0
        } else {
            x1
        },
    );
    let lx = (lx0 / 1.15..lx1 * 1.15).log_scale().base(base);
    let pad = ((x1 - x0) * 0.02).max(1e-9);
    let x = x0 - pad..x1 + pad;
    let ly = (y0..y1).log_scale();
    let yr = (y0, y1);
    match (spec.log_x, spec.log_y) {
        (true, true) => draw(path, spec, series, lx, ly, yr),
        (true, false) => draw(path, spec, series, lx, y0..y1, yr),
        (false, true) => draw(path, spec, series, x, ly, yr),
        (false, false) => draw(path, spec, series, x, y0..y1, yr),
    }
}

fn draw<X, Y>(
    path: &Path,
    spec: &ChartSpec,
    series: &[Series],
    x: X,
    y: Y,
    (y_start, y_end): (f64, f64),
) -> anyhow::Result<PathBuf>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let err = plot_err(path);
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&spec.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x, y)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .x_desc(spec.x_label.as_str())
        .y_desc(spec.y_label.as_str())
        .axis_desc_style(("sans-serif", 16))
        .label_style(("sans-serif", 13))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(210, 210, 210))
        .x_label_formatter(&|v| short_number(*v))
        .y_label_formatter(&|v| short_number(*v))
        .y_labels(if spec.integer_y {
            ((y_end - y_start).floor() as usize + 1).clamp(2, 11)
        } else {
            10
        })
        .draw()
        .map_err(&err)?;
    if let Some((a, b, label)) = &spec.band {
        let fill = RGBColor(44, 160, 44).mix(0.12);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(*a, y_start), (*b, y_end)],
                fill.filled(),
            )))
            .map_err(&err)?
            .label(label.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], fill.filled()));
    }
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        let style = c.stroke_width(2);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), style))
            .map_err(&err)?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        if s.markers {
            chart
                .draw_series(
                    s.points
                        .iter()
                        .map(|&(px, py)| Circle::new((px, py), 4, c.filled())),
                )
                .map_err(&err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(match spec.legend {
            Legend::UpperRight => SeriesLabelPosition::UpperRight,
            Legend::LowerRight => SeriesLabelPosition::LowerRight,
        })
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(path.to_path_buf())
}

/// `1500` → `1.5k`, `2000000` → `2M`, `0.25` → `0.25`.
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.1}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.1}"))
    } else {
        trim(format!("{v:.3}"))
    }
}

/// Which sweep quantity to plot against pool size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepMetric {
    /// Completed tasks per second.
    Throughput,
    /// Relative average idle time (`AIT_first / AIT_i`).
    Rait,
    /// 99th percentile wait.
    P99Wait,
}

type RowValue = fn(&SweepRow) -> Option<f64>;

/// A sweep chart: one metric against static pool size (log x), the safe
/// zone shaded.
pub fn sweep_chart(
    path: &Path,
    workload: &str,
    a: &SweepAnalysis,
    metric: SweepMetric,
) -> anyhow::Result<PathBuf> {
    let (name, y_label, value): (&str, &str, RowValue) = match metric {
        SweepMetric::Throughput => ("throughput", "throughput (tasks/s)", |r| {
            Some(r.point.throughput)
        }),
        SweepMetric::Rait => (
            "RAIT",
            "RAIT = AIT(smallest size) / AIT(size), log scale",
            |r| r.rait,
        ),
        SweepMetric::P99Wait => ("p99 wait", "p99 wait (µs)", |r| Some(r.point.p99_wait_us)),
    };
    let points: Vec<(f64, f64)> = a
        .rows
        .iter()
        .filter_map(|r| value(r).map(|v| (r.point.size as f64, v)))
        .collect();
    let (lo, hi) = a.safe_zone;
    let spec = ChartSpec {
        title: format!("{workload}: {name} vs static pool size"),
        x_label: "pool size (threads, log scale)".into(),
        y_label: y_label.into(),
        log_x: true,
        log_x_base: 2.0,
        log_y: metric == SweepMetric::Rait,
        y_from_zero: true,
        band: Some((
            lo as f64 * 0.97,
            hi as f64 * 1.03,
            format!("safe zone {lo}..{hi}, oracle {}", a.oracle_size),
        )),
        legend: if metric == SweepMetric::P99Wait {
            Legend::UpperRight
        } else {
            Legend::LowerRight
        },
        ..ChartSpec::default()
    };
    line_chart(
        path,
        &spec,
        &[Series {
            name: name.into(),
            points,
            markers: true,
        }],
    )
}

/// Turn change points into a step line (at most about `max_points` points).
pub fn step_points(series: &[SizePoint], max_points: usize) -> Vec<(f64, f64)> {
    let stride = (series.len() / max_points.max(2)).max(1);
    let kept: Vec<&SizePoint> = series
        .iter()
        .enumerate()
        .filter(|(i, _)| i % stride == 0 || *i + 1 == series.len())
        .map(|(_, p)| p)
        .collect();
    let mut out = Vec::with_capacity(kept.len() * 2);
    for (i, p) in kept.iter().enumerate() {
        if i > 0 {
            out.push((p.t_ms / 1e3, kept[i - 1].live as f64));
        }
        out.push((p.t_ms / 1e3, p.live as f64));
    }
    out
}

/// Pool size (live threads) over time, one line per run, on a log scale so
/// that a pool of 4 and one of 100 are both readable (0 is shown at 1).
pub fn size_chart(
    path: &Path,
    workload: &str,
    runs: &[(&str, &[SizePoint])],
) -> anyhow::Result<PathBuf> {
    let series: Vec<Series> = runs
        .iter()
        .map(|(name, s)| Series {
            name: name.to_string(),
            points: step_points(s, 3000)
                .into_iter()
                .map(|(t, live)| (t, live.max(1.0)))
                .collect(),
            markers: false,
        })
        .collect();
    let spec = ChartSpec {
        title: format!("{workload}: pool size over time"),
        x_label: "time since start of replay (s)".into(),
        y_label: "live threads (log scale)".into(),
        log_y: true,
        ..ChartSpec::default()
    };
    line_chart(path, &spec, &series)
}

/// The empirical CCDF of task wait times: `(x µs, share of tasks that
/// waited longer than x)`, waits floored at 1 µs, `points` points at most.
/// The last point's share is 1/n, not 0, so it stays on a log axis.
pub fn wait_ccdf(records: &[TaskRecord], points: usize) -> Vec<(f64, f64)> {
    let mut w: Vec<f64> = records
        .iter()
        .filter_map(TaskRecord::wait_ns)
        .map(|ns| (ns as f64 / 1e3).max(1.0))
        .collect();
    if w.is_empty() {
        return Vec::new();
    }
    w.sort_by(f64::total_cmp);
    let n = w.len();
    // Evenly spaced ranks, plus every rank of the last 1% (the tail).
    let k = points.clamp(2, n.max(2));
    let mut ranks: Vec<usize> = (0..k).map(|j| (j * (n - 1)) / (k - 1)).collect();
    ranks.extend(n - (n / 100).min(points) - 1..n);
    ranks.sort_unstable();
    ranks.dedup();
    let mut out: Vec<(f64, f64)> = ranks
        .into_iter()
        .map(|i| (w[i], ((n - i) as f64 / n as f64).max(1.0 / n as f64)))
        .collect();
    out.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    out
}

/// Wait-time CCDFs on log–log axes, one line per run: the tail is visible.
pub fn ccdf_chart(
    path: &Path,
    workload: &str,
    runs: &[(&str, &[TaskRecord])],
) -> anyhow::Result<PathBuf> {
    let series: Vec<Series> = runs
        .iter()
        .map(|(name, r)| Series {
            name: name.to_string(),
            points: wait_ccdf(r, 400),
            markers: false,
        })
        .collect();
    let spec = ChartSpec {
        title: format!("{workload}: wait time (queue) CCDF"),
        x_label: "wait x (µs, log scale; below 1 µs shown at 1)".into(),
        y_label: "share of tasks waiting longer than x (log scale)".into(),
        log_x: true,
        log_y: true,
        legend: Legend::UpperRight,
        ..ChartSpec::default()
    };
    line_chart(path, &spec, &series)
}

/// The summary figure: per policy and workload, p99 turnaround over the
/// oracle's (top, log scale, the bar as a grey line) and threads created
/// (bottom, log scale). Workloads along x; one colour per policy.
pub fn summary_chart(path: &Path, grid: &BarGrid) -> anyhow::Result<PathBuf> {
    let err = plot_err(path);
    let n = grid.workloads.len().max(1);
    let k = grid.rows.len().max(1);
    let width = (160 + 90 * n as u32).max(SIZE.0);
    let root = SVGBackend::new(path, (width, 760)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let (top, bottom) = root.split_vertically(470);
    let offset = |i: usize| (i as f64 - (k as f64 - 1.0) / 2.0) * (0.6 / k as f64);
    let label = |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < grid.workloads.len() {
            grid.workloads[i as usize].clone()
        } else {
            String::new()
        }
    };
    let points = |f: &dyn Fn(&BarCell) -> Option<f64>| -> Vec<Vec<(f64, f64)>> {
        grid.rows
            .iter()
            .enumerate()
            .map(|(i, (_, cells))| {
                cells
                    .iter()
                    .enumerate()
                    .filter_map(|(w, c)| {
                        let v = f(c.as_ref()?)?;
                        (v.is_finite() && v > 0.0).then(|| (w as f64 + offset(i), v))
                    })
                    .collect()
            })
            .collect()
    };
    let ratios = points(&|c| c.p99_turnaround_vs_oracle);
    let threads = points(&|c| Some(c.threads_created.max(1.0)));
    let span = |ps: &[Vec<(f64, f64)>], lo: f64, hi: f64| {
        ps.iter()
            .flatten()
            .fold((lo, hi), |(a, b), p| (a.min(p.1), b.max(p.1)))
    };
    let x = -0.6..(n as f64 - 0.4);
    let panels = [
        (
            top,
            "p99 turnaround vs oracle (log scale)",
            &ratios,
            span(&ratios, 0.8, MAX_P99_TURNAROUND_VS_ORACLE * 1.3),
            true,
        ),
        (
            bottom,
            "threads created (log scale)",
            &threads,
            span(&threads, 1.0, 10.0),
            false,
        ),
    ];
    for (area, y_desc, series, (lo, hi), first) in panels {
        let mut chart = ChartBuilder::on(&area)
            .caption(
                if first {
                    "policies against the oracle, per workload"
                } else {
                    ""
                },
                ("sans-serif", 22),
            )
            .margin(14)
            .x_label_area_size(if first { 10 } else { 40 })
            .y_label_area_size(72)
            .build_cartesian_2d(x.clone(), (lo / 1.2..hi * 1.2).log_scale())
            .map_err(&err)?;
        chart
            .configure_mesh()
            .y_desc(y_desc)
            .axis_desc_style(("sans-serif", 16))
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(210, 210, 210))
            .x_labels(n)
            .x_label_formatter(&|v| if first { String::new() } else { label(v) })
            .y_label_formatter(&|v| short_number(*v))
            .draw()
            .map_err(&err)?;
        if first {
            let bar = MAX_P99_TURNAROUND_VS_ORACLE;
            for (y, shade) in [(1.0, 150), (bar, 90)] {
                chart
                    .draw_series(LineSeries::new(
                        [(-0.6, y), (n as f64 - 0.4, y)],
                        RGBColor(shade, shade, shade).stroke_width(1),
                    ))
                    .map_err(&err)?;
            }
        }
        for (i, pts) in series.iter().enumerate() {
            let c = color(i);
            let drawn = chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 6, c.filled())))
                .map_err(&err)?;
            if first {
                drawn
                    .label(grid.rows[i].0.as_str())
                    .legend(move |(x, y)| Circle::new((x + 8, y), 6, c.filled()));
            }
        }
        if first {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(180, 180, 180))
                .label_font(("sans-serif", 14))
                .draw()
                .map_err(&err)?;
        }
    }
    root.present().map_err(&err)?;
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidepool_workload::analysis::{analyze_sweep, SweepPoint};

    fn is_svg(path: &Path) -> String {
        let s = std::fs::read_to_string(path).unwrap();
        assert!(s.len() > 500, "{} bytes", s.len());
        assert!(s.starts_with("<svg"), "{}", &s[..40]);
        assert!(s.trim_end().ends_with("</svg>"));
        s
    }

    #[test]
    fn line_chart_writes_an_svg_with_title_and_legend() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.svg");
        let series = [
            Series {
                name: "auto".into(),
                points: vec![(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)],
                markers: true,
            },
            Series {
                name: "xu-bode".into(),
                points: vec![(0.0, 2.0), (2.0, 4.0)],
                markers: false,
            },
        ];
        let spec = ChartSpec {
            title: "demo chart".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            ..ChartSpec::default()
        };
        line_chart(&p, &spec, &series).unwrap();
        let s = is_svg(&p);
        assert!(s.contains("demo chart") && s.contains("xu-bode"));
    }

    #[test]
    fn sweep_size_and_cdf_charts() {
        let dir = tempfile::tempdir().unwrap();
        let pts: Vec<SweepPoint> = [1usize, 2, 4, 8]
            .iter()
            .map(|&s| SweepPoint {
                size: s,
                throughput: 100.0 * (s.min(4) as f64),
                mean_wait_us: 1000.0 / s as f64,
                p99_wait_us: 5000.0 / s as f64,
                mean_turnaround_us: 2000.0 / s as f64,
                p99_turnaround_us: 1.0,
            })
            .collect();
        let a = analyze_sweep(&pts, 0.05).unwrap();
        for m in [
            SweepMetric::Throughput,
            SweepMetric::Rait,
            SweepMetric::P99Wait,
        ] {
            let p = dir.path().join(format!("{m:?}.svg"));
            sweep_chart(&p, "cpu", &a, m).unwrap();
            assert!(is_svg(&p).contains("safe zone 4..8"));
        }
        let sp = |t: f64, live| SizePoint {
            t_ms: t,
            live,
            target: None,
        };
        let series = [sp(0.0, 1), sp(500.0, 4), sp(1000.0, 2)];
        assert_eq!(
            step_points(&series, 100),
            vec![(0.0, 1.0), (0.5, 1.0), (0.5, 4.0), (1.0, 4.0), (1.0, 2.0)]
        );
        let p = dir.path().join("size.svg");
        size_chart(&p, "cpu", &[("auto", &series[..]), ("empty", &[])]).unwrap();
        is_svg(&p);
        let recs: Vec<TaskRecord> = (0..50u64)
            .map(|i| TaskRecord {
                request_id: i,
                app_id: 1,
                scheduled_ns: 0,
                submitted_ns: 0,
                accepted_ns: Some(0),
                started_ns: Some(i * 10_000),
                finished_ns: Some(i * 10_000 + 5),
            })
            .collect();
        let ccdf = wait_ccdf(&recs, 10);
        assert_eq!(ccdf.first().unwrap(), &(1.0, 1.0));
        assert_eq!(ccdf.last().unwrap(), &(490.0, 1.0 / 50.0));
        assert!(ccdf
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 >= w[1].1));
        let p = dir.path().join("ccdf.svg");
        ccdf_chart(&p, "cpu", &[("auto", &recs[..])]).unwrap();
        is_svg(&p);
        let cell = |p99: f64, created: f64| {
            Some(BarCell {
                throughput_vs_oracle: Some(1.0),
                turnaround_vs_oracle: Some(1.0),
                p99_turnaround_vs_oracle: Some(p99),
                p99_turnaround_range: None,
                threads_created: created,
            })
        };
        let grid = BarGrid {
            workloads: vec!["cpu".into(), "sat50".into()],
            rows: vec![
                ("auto".into(), vec![cell(1.1, 4.0), cell(2.5, 40.0)]),
                ("watermark:3..100".into(), vec![cell(0.9, 500.0), None]),
            ],
            repeats: 1,
        };
        let p = dir.path().join("summary.svg");
        summary_chart(&p, &grid).unwrap();
        let s = is_svg(&p);
        assert!(s.contains("sat50") && s.contains("watermark:3..100"));
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(1500.0), "1500");
        assert_eq!(short_number(15000.0), "15k");
        assert_eq!(short_number(2_500_000.0), "2.5M");
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(3.0), "3");
        assert_eq!(short_number(0.0), "0");
    }
}
