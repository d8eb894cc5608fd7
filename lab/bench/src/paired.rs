//! Paired ratios: two implementations run in the same repeat, one after the
//! other, so their per-repeat ratio cancels what the machine did to both.
//! Summarised by its median, the median's distribution-free 95% interval
//! and the sign test.
//!
//! Why not "over the best peer": the better of two noisy peers in each
//! repeat is biased upwards (with two peers of equal mean and per-repeat
//! spread `s`, its mean is about `0.56 s` higher), so a row level with both
//! peers looks behind. Each peer gets its own ratio instead.

use serde::Serialize;
use tidepool_workload::median;

use crate::harness::ratio_higher_better;

/// A paired comparison over the repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Paired {
    /// The median of the per-repeat ratios.
    pub median: f64,
    /// A 95% interval of that median from the order statistics (the sign
    /// test's interval, no distribution assumed); `None` with fewer than 6
    /// repeats, too few for 95%.
    pub ci95: Option<(f64, f64)>,
    /// Repeats whose ratio is above 1.
    pub won: usize,
    /// Repeats whose ratio is below 1.
    pub lost: usize,
    /// The sign test's two-sided p-value of won against lost (ties left
    /// out): how likely a split at least this uneven is if neither side is
    /// faster.
    pub sign_p: f64,
}

/// `subject`'s value in each repeat ÷ `reference`'s in the same repeat,
/// summarised ([`paired`]).
pub fn paired_per_repeat(subject: &[f64], reference: &[f64]) -> Option<Paired> {
    let ratios: Vec<f64> = subject
        .iter()
        .zip(reference)
        .filter_map(|(&a, &b)| ratio_higher_better(a, b))
        .collect();
    paired(&ratios)
}

/// Summarise per-repeat ratios; `None` when there are none (non-finite
/// ratios are left out).
pub fn paired(ratios: &[f64]) -> Option<Paired> {
    let median = median(ratios.iter().copied())?;
    let mut v: Vec<f64> = ratios.iter().copied().filter(|r| r.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    // The largest k with P(Binomial(n, ½) < k) ≤ 2.5%: the median lies
    // between the k-th lowest and the k-th highest with ≥ 95% confidence.
    let cdf = binomial_half_cdf(n);
    let k = (0..n).take_while(|&k| cdf[k] <= 0.025).count();
    let ci95 = (k >= 1).then(|| (v[k - 1], v[n - k]));
    let won = v.iter().filter(|&&r| r > 1.0).count();
    let lost = v.iter().filter(|&&r| r < 1.0).count();
    Some(Paired {
        median,
        ci95,
        won,
        lost,
        sign_p: sign_test(won, lost),
    })
}

/// What a paired ratio's 95% interval says: `level` when it includes 1.0,
/// `ahead` or `behind` when all of it lies on one side, `too few repeats`
/// without one (fewer than 6 repeats).
pub fn verdict(p: &Paired) -> &'static str {
    match p.ci95 {
        None => "too few repeats",
        Some((lo, _)) if lo > 1.0 => "ahead",
        Some((_, hi)) if hi < 1.0 => "behind",
        Some(_) => "level",
    }
}

/// `cdf[k]` = P(Binomial(n, ½) ≤ k), for k in 0..=n, summed in log space so
/// that no term overflows or underflows to a wrong value for any n.
fn binomial_half_cdf(n: usize) -> Vec<f64> {
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut sum = 0.0;
    (0..=n)
        .map(|k| {
            if k > 0 {
                ln_choose += ((n - k + 1) as f64 / k as f64).ln();
            }
            sum += (ln_choose + ln_half_n).exp();
            sum.min(1.0)
        })
        .collect()
}

/// The exact two-sided sign test: 2 × P(Binomial(won + lost, ½) ≤ the
/// smaller count), at most 1.
fn sign_test(won: usize, lost: usize) -> f64 {
    let n = won + lost;
    if n == 0 {
        return 1.0;
    }
    (2.0 * binomial_half_cdf(n)[won.min(lost)]).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_the_sign_tests_order_statistics() {
        // n = 10: P(X ≤ 1) = 11/1024 ≤ 2.5% < P(X ≤ 2) = 56/1024, so the
        // interval runs from the 2nd lowest to the 2nd highest.
        let v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let p = paired(&v).unwrap();
        assert_eq!(p.median, 5.5);
        assert_eq!(p.ci95, Some((2.0, 9.0)));
        // n = 100: the textbook ranks are 40 and 61.
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(paired(&v).unwrap().ci95, Some((40.0, 61.0)));
        // Five repeats cannot give 95% (2 × 1/32 > 5%).
        assert_eq!(paired(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap().ci95, None);
    }

    #[test]
    fn the_sign_test_counts_wins_and_losses_not_ties() {
        let p = paired(&[1.1; 10]).unwrap();
        assert_eq!((p.won, p.lost), (10, 0));
        assert!((p.sign_p - 2.0 / 1024.0).abs() < 1e-12, "{}", p.sign_p);
        let even = paired(&[0.9, 1.1, 0.9, 1.1, 1.0]).unwrap();
        assert_eq!((even.won, even.lost), (2, 2));
        assert_eq!(even.sign_p, 1.0);
        // Large n stays finite and small: 300 wins of 300.
        let p = paired(&[1.01; 300]).unwrap();
        assert!(p.sign_p < 1e-80 && p.sign_p >= 0.0, "{}", p.sign_p);
    }

    #[test]
    fn nothing_to_summarise_is_none_and_non_finite_ratios_are_left_out() {
        assert_eq!(paired(&[]), None);
        assert_eq!(paired(&[f64::NAN, f64::INFINITY]), None);
        assert_eq!(paired(&[f64::NAN, 2.0]).unwrap().median, 2.0);
    }
}
