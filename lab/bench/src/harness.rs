//! Harness arithmetic: medians of repeated runs and ratios between results.

use tidepool_workload::median;

/// The median of integer samples (rounded to the nearest integer).
pub fn median_u64(values: &[u64]) -> Option<u64> {
    let v: Vec<f64> = values.iter().map(|&x| x as f64).collect();
    median(v).map(|m| m.round() as u64)
}

/// The relative spread of `values`: `(max - min) / median`; `None` when
/// empty or the median is not positive.
pub fn spread(values: &[f64]) -> Option<f64> {
    let m = median(values.iter().copied())?;
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    (m > 0.0).then(|| (max - min) / m)
}

/// A load average for a run's header (`1.22 8.38 9.79`), or `unknown`.
pub fn fmt_load(l: Option<[f64; 3]>) -> String {
    l.map(|[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"))
        .unwrap_or_else(|| "unknown".into())
}

/// How many times better `subject` is than `reference` for a
/// higher-is-better quantity (throughput): `subject / reference`.
/// `None` when the reference is not positive.
pub fn ratio_higher_better(subject: f64, reference: f64) -> Option<f64> {
    (reference > 0.0 && subject.is_finite()).then(|| subject / reference)
}

/// How many times better `subject` is than `reference` for a
/// lower-is-better quantity (latency): `reference / subject`.
/// `None` when the subject is not positive.
pub fn ratio_lower_better(subject: f64, reference: f64) -> Option<f64> {
    (subject > 0.0 && reference.is_finite()).then(|| reference / subject)
}

/// The relative cost in percent of running at `with` instead of `without`
/// for a higher-is-better quantity: `(without - with) / without * 100`.
/// Negative when `with` came out faster (noise).
pub fn cost_percent(with: f64, without: f64) -> Option<f64> {
    (without > 0.0).then(|| (without - with) / without * 100.0)
}

/// `items` rotated left by `by` positions: the order implementations run in
/// for repeat number `by`, so each one takes every position in turn and
/// machine noise is spread fairly.
pub fn rotated<T: Clone>(items: &[T], by: usize) -> Vec<T> {
    if items.is_empty() {
        return Vec::new();
    }
    let k = by % items.len();
    items[k..].iter().chain(&items[..k]).cloned().collect()
}

/// The order of `n` runs in repeat `rep`: row `rep` of a Williams design
/// (a Latin square balanced for what each run leaves to the next).
///
/// Over `n` repeats (`2n` when `n` is odd) every run comes right after
/// every other exactly once (twice when `n` is odd) and takes every
/// position as often. A rotation ([`rotated`]) visits every position too,
/// but always puts the same run after a given one, so whatever a run
/// leaves behind (a busy thread, freed memory, a scheduler's history) is
/// charged to one neighbour only.
pub fn balanced_order(n: usize, rep: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let row = rep % if n.is_multiple_of(2) { n } else { 2 * n };
    // The first row is 0, 1, n−1, 2, n−2, …; row r adds r to each; when n
    // is odd, rows n..2n are the first n reversed.
    let mut order: Vec<usize> = (0..n)
        .map(|j| {
            if j % 2 == 1 {
                j.div_ceil(2)
            } else {
                (n - j / 2) % n
            }
        })
        .map(|x| (x + row) % n)
        .collect();
    if row >= n {
        order.reverse();
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median_u64(&[10, 30, 20, 1000, 15]), Some(20));
        assert_eq!(median_u64(&[1, 2]), Some(2)); // 1.5 rounds up
        assert_eq!(spread(&[1.0, 2.0, 3.0]), Some(1.0));
        assert_eq!(spread(&[]), None);
    }

    #[test]
    fn ratios_and_cost() {
        assert_eq!(ratio_higher_better(200.0, 100.0), Some(2.0));
        assert_eq!(ratio_higher_better(1.0, 0.0), None);
        assert_eq!(ratio_lower_better(50.0, 100.0), Some(2.0));
        assert_eq!(ratio_lower_better(0.0, 100.0), None);
        assert_eq!(cost_percent(90.0, 100.0), Some(10.0));
        assert_eq!(cost_percent(110.0, 100.0), Some(-10.0));
        assert_eq!(cost_percent(1.0, 0.0), None);
    }

    #[test]
    fn rotation_visits_every_position() {
        let items = ["a", "b", "c"];
        assert_eq!(rotated(&items, 0), vec!["a", "b", "c"]);
        assert_eq!(rotated(&items, 1), vec!["b", "c", "a"]);
        assert_eq!(rotated(&items, 5), vec!["c", "a", "b"]);
        assert!(rotated::<u8>(&[], 3).is_empty());
    }

    #[test]
    fn balanced_order_puts_every_run_after_every_other_equally() {
        assert!(balanced_order(0, 3).is_empty());
        assert_eq!(balanced_order(6, 0), vec![0, 1, 5, 2, 4, 3]);
        for n in 1..=9usize {
            let cycle = if n.is_multiple_of(2) { n } else { 2 * n };
            let times = cycle / n;
            let mut after = vec![vec![0; n]; n];
            let mut at = vec![vec![0; n]; n];
            for rep in 0..cycle {
                let row = balanced_order(n, rep);
                let mut seen = row.clone();
                seen.sort_unstable();
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n {n}, repeat {rep}");
                for (pos, &x) in row.iter().enumerate() {
                    at[x][pos] += 1;
                }
                for w in row.windows(2) {
                    after[w[0]][w[1]] += 1;
                }
                // The cycle repeats.
                assert_eq!(balanced_order(n, rep + cycle), row);
            }
            for a in 0..n {
                assert!(at[a].iter().all(|&c| c == times), "n {n}: {:?}", at[a]);
                for b in (0..n).filter(|&b| b != a) {
                    assert_eq!(after[a][b], times, "n {n}: {b} after {a}");
                }
            }
        }
    }
}
