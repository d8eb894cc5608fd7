//! The verdict: a paragraph written from the numbers of a [`BarGrid`] —
//! which policy is best on what, at what cost in threads, how `auto` fares
//! against the bar and against `watermark`, and how much the repeats
//! disagree.

use super::bar::{
    BarGrid, Goals, Totals, MAX_P99_TURNAROUND_VS_ORACLE, MAX_THREADS_CREATED_SHARE,
    MIN_THROUGHPUT_VS_ORACLE,
};

/// The policy the verdict is about.
pub const SUBJECT: &str = "auto";

/// The policy it is measured against.
pub const RIVAL: &str = "watermark";

/// A ratio with two decimals (`1.04×`), the precision run-to-run noise on a
/// shared machine allows.
fn x(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}×"))
}

fn best_by(totals: &[Totals], f: impl Fn(&Totals) -> Option<f64>) -> Option<&Totals> {
    totals.iter().filter(|t| f(t).is_some()).min_by(|a, b| {
        f(a).unwrap_or(f64::MAX)
            .total_cmp(&f(b).unwrap_or(f64::MAX))
    })
}

/// The verdict paragraph (Markdown, no heading).
///
/// ```
/// use tidepool_workload::compare::{verdict::verdict, BarGrid};
/// let empty = BarGrid { workloads: vec![], rows: vec![], repeats: 1 };
/// assert!(verdict(&empty).contains("nothing was measured"));
/// ```
pub fn verdict(grid: &BarGrid) -> String {
    let totals: Vec<Totals> = grid
        .rows
        .iter()
        .filter_map(|(name, _)| grid.totals(name))
        .filter(|t| t.workloads > 0)
        .collect();
    if totals.is_empty() {
        return "No verdict: nothing was measured against an oracle.".into();
    }
    let over = match grid.repeats {
        1 => format!("{} workloads, one run each", grid.workloads.len()),
        n => format!("{} workloads, medians of {n} repeats", grid.workloads.len()),
    };
    let mut out = format!("**Verdict** ({over}; ratios are to the best static size, the oracle, lower is better for turnaround). ");
    if let Some(b) = best_by(&totals, |t| t.geomean_turnaround_vs_oracle) {
        out.push_str(&format!(
            "Best mean turnaround: `{}` ({} the oracle's, geometric mean). ",
            b.policy,
            x(b.geomean_turnaround_vs_oracle)
        ));
    }
    if let Some(b) = best_by(&totals, |t| t.geomean_p99_turnaround_vs_oracle) {
        out.push_str(&format!(
            "Best p99 turnaround: `{}` ({}). ",
            b.policy,
            x(b.geomean_p99_turnaround_vs_oracle)
        ));
    }
    if let Some(b) = best_by(&totals, |t| Some(t.threads_created)) {
        out.push_str(&format!(
            "Fewest threads created: `{}` ({:.0} over all workloads). ",
            b.policy, b.threads_created
        ));
    }
    if let Some(b) = best_by(&totals, |t| Some(-(t.met as f64))) {
        out.push_str(&format!(
            "Most workloads within the bar (throughput ≥ {MIN_THROUGHPUT_VS_ORACLE} of the oracle's and p99 turnaround ≤ {MAX_P99_TURNAROUND_VS_ORACLE}× the oracle's): `{}`, {} of {}.",
            b.policy, b.met, b.workloads
        ));
    }
    if let Some(g) = Goals::of(grid, SUBJECT, RIVAL) {
        out.push_str("\n\n");
        out.push_str(&goals_sentence(grid, &g));
    }
    out
}

/// The subject's turnaround against the rival's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speed {
    Faster,
    Mixed,
    Slower,
}

/// How the subject fares on its goals, in words.
fn goals_sentence(grid: &BarGrid, g: &Goals) -> String {
    let (p, r) = (&g.policy, &g.rival);
    let mut s = format!(
        "`{}` meets the bar on {} of {} workloads",
        p.policy, p.met, p.workloads
    );
    let misses: Vec<String> = grid
        .row(SUBJECT)
        .map(|(_, cells)| {
            grid.workloads
                .iter()
                .zip(cells)
                .filter_map(|(w, c)| {
                    let c = c.as_ref()?;
                    let mut why = Vec::new();
                    if c.throughput_met() == Some(false) {
                        why.push(format!("throughput {:.2}", c.throughput_vs_oracle?));
                    }
                    if c.p99_turnaround_met() == Some(false) {
                        why.push(format!("p99 turnaround {}", x(c.p99_turnaround_vs_oracle)));
                    }
                    (!why.is_empty()).then(|| format!("{w} ({})", why.join(", ")))
                })
                .collect()
        })
        .unwrap_or_default();
    if misses.is_empty() {
        s.push_str(". ");
    } else {
        s.push_str(&format!("; it misses on {}. ", misses.join("; ")));
    }
    let cmp = |better: bool| if better { "better" } else { "worse" };
    s.push_str(&format!(
        "Against `{}`: mean turnaround {} vs {} ({}), p99 turnaround {} vs {} ({}), threads created {:.0} vs {:.0}",
        r.policy,
        x(p.geomean_turnaround_vs_oracle),
        x(r.geomean_turnaround_vs_oracle),
        cmp(g.turnaround_better()),
        x(p.geomean_p99_turnaround_vs_oracle),
        x(r.geomean_p99_turnaround_vs_oracle),
        cmp(g.p99_turnaround_better()),
        p.threads_created,
        r.threads_created,
    ));
    match g.threads_share() {
        Some(share) => s.push_str(&format!(
            " ({:.1}% of them; the goal is ≤ {:.0}%).",
            share * 100.0,
            MAX_THREADS_CREATED_SHARE * 100.0
        )),
        None => s.push('.'),
    }
    let speed = match (g.turnaround_better(), g.p99_turnaround_better()) {
        (true, true) => Speed::Faster,
        (false, false) => Speed::Slower,
        _ => Speed::Mixed,
    };
    let trade = match (speed, g.threads_met()) {
        (Speed::Faster, true) => format!(" `{}` wins on both counts.", p.policy),
        (Speed::Faster, false) => format!(
            " `{}` answers faster but creates more threads than the goal allows.",
            p.policy
        ),
        (Speed::Mixed, true) => format!(
            " `{}` saves threads; on turnaround the two split (mean vs p99).",
            p.policy
        ),
        (Speed::Mixed, false) => format!(
            " The two split on turnaround (mean vs p99), and `{}` creates more threads than the goal allows.",
            p.policy
        ),
        (Speed::Slower, true) => format!(
            " The trade-off: `{}` saves threads, `{}` answers faster.",
            p.policy, r.policy
        ),
        (Speed::Slower, false) => format!(" `{}` loses on both counts here.", p.policy),
    };
    s.push_str(&trade);
    s.push_str(&losses_sentence(grid, &r.policy));
    if grid.repeats > 1 {
        if let Some((w, lo, hi)) = widest_range(grid) {
            s.push_str(&format!(
                " Repeats disagree most on {w}: `{}`'s p99 turnaround ratio ranged {lo:.2}–{hi:.2}.",
                p.policy
            ));
        }
    }
    s
}

/// Where the rival answers faster than the subject, workload by workload
/// (mean and p99 turnaround vs the oracle, by at least the 0.01 they are
/// shown with), in words. A geometric mean can hide a workload the subject
/// loses badly.
fn losses_sentence(grid: &BarGrid, rival: &str) -> String {
    let (Some((_, mine)), Some((_, theirs))) = (grid.row(SUBJECT), grid.row(rival)) else {
        return String::new();
    };
    let mut losses = Vec::new();
    for ((w, a), b) in grid.workloads.iter().zip(mine).zip(theirs) {
        let (Some(a), Some(b)) = (a, b) else { continue };
        let mut on = Vec::new();
        let pairs = [
            ("mean", a.turnaround_vs_oracle, b.turnaround_vs_oracle),
            (
                "p99",
                a.p99_turnaround_vs_oracle,
                b.p99_turnaround_vs_oracle,
            ),
        ];
        for (what, ours, rivals) in pairs {
            if let (Some(o), Some(r)) = (ours, rivals) {
                // Only a difference the two shown decimals can see.
                if (r * 100.0).round() < (o * 100.0).round() {
                    on.push(format!("{what} {} vs {}", x(Some(o)), x(Some(r))));
                }
            }
        }
        if !on.is_empty() {
            losses.push(format!("{w} ({})", on.join(", ")));
        }
    }
    if losses.is_empty() {
        format!(" `{SUBJECT}` answers at least as fast as `{rival}` on every workload.")
    } else {
        format!(
            " `{SUBJECT}` answers slower than `{rival}` (turnaround vs the oracle, ours vs theirs) on {}.",
            losses.join("; ")
        )
    }
}

/// The subject's workload with the widest p99 turnaround range over repeats.
fn widest_range(grid: &BarGrid) -> Option<(&str, f64, f64)> {
    let (_, cells) = grid.row(SUBJECT)?;
    grid.workloads
        .iter()
        .zip(cells)
        .filter_map(|(w, c)| {
            c.and_then(|c| c.p99_turnaround_range)
                .map(|(lo, hi)| (w.as_str(), lo, hi))
        })
        .max_by(|a, b| (a.2 - a.1).total_cmp(&(b.2 - b.1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::BarCell;

    fn cell(tp: f64, turn: f64, p99: f64, created: f64) -> Option<BarCell> {
        Some(BarCell {
            throughput_vs_oracle: Some(tp),
            turnaround_vs_oracle: Some(turn),
            p99_turnaround_vs_oracle: Some(p99),
            p99_turnaround_range: Some((p99 * 0.9, p99 * 1.3)),
            threads_created: created,
        })
    }

    #[test]
    fn says_who_wins_what_and_the_trade_off() {
        let grid = BarGrid {
            workloads: vec!["cpu".into(), "sat50".into()],
            rows: vec![
                (
                    "auto".into(),
                    vec![cell(1.0, 1.04, 1.03, 40.0), cell(0.93, 1.1, 1.5, 46.0)],
                ),
                (
                    "watermark:3..100".into(),
                    vec![cell(1.0, 1.0, 0.97, 2000.0), cell(0.99, 1.0, 1.0, 2875.0)],
                ),
            ],
            repeats: 5,
        };
        let v = verdict(&grid);
        assert!(v.contains("medians of 5 repeats"), "{v}");
        assert!(
            v.contains("Best mean turnaround: `watermark:3..100`"),
            "{v}"
        );
        assert!(v.contains("Fewest threads created: `auto` (86"), "{v}");
        assert!(v.contains("meets the bar on 1 of 2 workloads"), "{v}");
        assert!(
            v.contains("sat50 (throughput 0.93, p99 turnaround 1.50×)"),
            "{v}"
        );
        assert!(
            v.contains("threads created 86 vs 4875 (1.8% of them"),
            "{v}"
        );
        assert!(
            v.contains("saves threads, `watermark:3..100` answers faster"),
            "{v}"
        );
        assert!(v.contains("ranged 1.35–1.95"), "{v}");
        assert!(
            v.contains("`auto` answers slower than `watermark:3..100` (turnaround vs the oracle, ours vs theirs) on cpu (mean 1.04× vs 1.00×, p99 1.03× vs 0.97×); sat50 (mean 1.10× vs 1.00×, p99 1.50× vs 1.00×)."),
            "{v}"
        );
        // auto better on p99 only, and too many threads
        let mixed = BarGrid {
            rows: vec![
                ("auto".into(), vec![cell(1.0, 1.2, 0.9, 500.0)]),
                ("watermark".into(), vec![cell(1.0, 1.0, 1.0, 1000.0)]),
            ],
            workloads: vec!["io".into()],
            repeats: 1,
        };
        let v = verdict(&mixed);
        assert!(
            v.contains("split on turnaround (mean vs p99), and `auto` creates more"),
            "{v}"
        );
        assert!(v.contains("one run each"), "{v}");
        assert!(v.contains("on io (mean 1.20× vs 1.00×)."), "{v}");
        // Behind by less than the shown precision is not a loss.
        let ahead = BarGrid {
            rows: vec![
                ("auto".into(), vec![cell(1.0, 1.0, 1.003, 10.0)]),
                ("watermark".into(), vec![cell(1.0, 1.1, 1.0, 1000.0)]),
            ],
            workloads: vec!["io".into()],
            repeats: 1,
        };
        let v = verdict(&ahead);
        assert!(
            v.contains("`auto` answers at least as fast as `watermark` on every workload."),
            "{v}"
        );
    }
}
