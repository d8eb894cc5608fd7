//! Harness arithmetic: medians of repeated runs and ratios between results.

/// The median of `values` (the mean of the two middle values for an even
/// count); `None` when no value is finite. The same arithmetic as the
/// policy comparisons (`tidepool_workload::compare::median`).
pub fn median(values: &[f64]) -> Option<f64> {
    tidepool_workload::compare::median(values.iter().copied())
}

/// The median of integer samples (rounded to the nearest integer).
pub fn median_u64(values: &[u64]) -> Option<u64> {
    let v: Vec<f64> = values.iter().map(|&x| x as f64).collect();
    median(&v).map(|m| m.round() as u64)
}

/// The relative spread of `values`: `(max - min) / median`; `None` when
/// empty or the median is not positive.
pub fn spread(values: &[f64]) -> Option<f64> {
    let m = median(values)?;
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    (m > 0.0).then(|| (max - min) / m)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[9.0, 1.0, 1.0, 1.0, 100.0]), Some(1.0));
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
}
