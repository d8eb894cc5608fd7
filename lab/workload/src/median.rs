//! The median: how the laboratory summarises repeated measurements.

/// The median of the finite values (the mean of the two middle ones for an
/// even count); `None` when there is none. NaN and infinities are left out.
///
/// ```
/// use tidepool_workload::median;
/// assert_eq!(median([4.0, 1.0, 3.0, 2.0]), Some(2.5));
/// assert_eq!(median([f64::NAN]), None);
/// ```
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median([]), None);
        assert_eq!(median([f64::NAN]), None);
        assert_eq!(median([3.0]), Some(3.0));
        assert_eq!(median([5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median([4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median([9.0, 1.0, 1.0, 1.0, 100.0]), Some(1.0));
        assert_eq!(median([1.0, f64::INFINITY, 2.0]), Some(1.5));
    }
}
