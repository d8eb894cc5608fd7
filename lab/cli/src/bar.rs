//! The quality bar rendered: `✓ 0.99 · ✗ 1.45` per policy and workload
//! (the arithmetic is `tidepool_workload::compare::bar`).

pub use tidepool_workload::compare::bar::{
    BarCell, BarGrid, MAX_P99_TURNAROUND_VS_ORACLE, MIN_THROUGHPUT_VS_ORACLE,
};

use crate::table::{fmt_ratio, Table};

/// `✓ 1.00 · ✗ 2.45`: each part's mark and ratio, throughput first, then
/// p99 turnaround.
pub fn render_cell(c: &BarCell) -> String {
    let part = |met: Option<bool>, r: Option<f64>| match met {
        Some(true) => format!("✓ {}", fmt_ratio(r)),
        Some(false) => format!("✗ {}", fmt_ratio(r)),
        None => "-".to_string(),
    };
    format!(
        "{} · {}",
        part(c.throughput_met(), c.throughput_vs_oracle),
        part(c.p99_turnaround_met(), c.p99_turnaround_vs_oracle)
    )
}

/// One row per policy, one column per workload, and how many workloads
/// meet both parts.
pub fn bar_table(g: &BarGrid) -> Table {
    let mut headers = vec!["policy".to_string()];
    headers.extend(g.workloads.iter().cloned());
    headers.push("both met".into());
    let mut t = Table::new(headers);
    for (policy, cells) in &g.rows {
        let mut row = vec![policy.clone()];
        row.extend(
            cells
                .iter()
                .map(|c| c.as_ref().map_or("-".to_string(), render_cell)),
        );
        let met = cells.iter().flatten().filter(|c| c.met()).count();
        row.push(format!("{met}/{}", g.workloads.len()));
        t.row(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidepool_workload::compare::{OracleRow, PolicyRow, WorkloadComparison};
    use tidepool_workload::RunResult;

    #[test]
    fn cells_and_table() {
        let r = |name: &str, tput: f64, p99: f64| RunResult {
            executor: name.into(),
            throughput: tput,
            p99_turnaround_us: p99,
            ..RunResult::default()
        };
        let oracle = OracleRow::from_run(2, &r("fixed:2", 100.0, 100.0));
        let comp = |w: &str, auto_p99: f64| WorkloadComparison {
            workload: w.into(),
            tasks: 1,
            oracle: Some(oracle.clone()),
            policies: vec![PolicyRow::from_run(
                &r("auto", 99.0, auto_p99),
                Some(&oracle),
            )],
            sweep: None,
        };
        let g = BarGrid::of_run(&[comp("cpu", 115.0), comp("io", 400.0)]);
        let t = bar_table(&g).render();
        let auto = t.lines().nth(2).unwrap();
        assert!(auto.starts_with("auto"), "{t}");
        assert!(auto.contains("✓ 0.99 · ✓ 1.15"), "{t}");
        assert!(auto.contains("✓ 0.99 · ✗ 4.00"), "{t}");
        assert!(auto.ends_with("1/2"), "{t}");
    }
}
