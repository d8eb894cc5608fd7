//! Welch's unequal-variances t-test, and the 95% confidence interval of a
//! difference of means (as a percentage of the reference mean).

/// Mean and sample variance (n − 1); `None` with fewer than two values.
pub fn mean_var(x: &[f64]) -> Option<(f64, f64)> {
    let n = x.len();
    if n < 2 {
        return None;
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some((mean, var))
}

/// The result of comparing a sample against a reference sample.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Welch {
    /// `(mean(x) − mean(reference)) / mean(reference)`, in percent.
    pub diff_pct: f64,
    /// 95% confidence interval of `diff_pct` (the reference mean taken as
    /// exact in the division).
    pub ci95_pct: (f64, f64),
    /// Welch's t statistic.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Compare `x` against `reference`; `None` if either has fewer than two
/// values or both have zero variance.
pub fn welch(x: &[f64], reference: &[f64]) -> Option<Welch> {
    let (m1, v1) = mean_var(x)?;
    let (m0, v0) = mean_var(reference)?;
    let (a, b) = (v1 / x.len() as f64, v0 / reference.len() as f64);
    let se = (a + b).sqrt();
    if se == 0.0 || m0 == 0.0 {
        return None;
    }
    let t = (m1 - m0) / se;
    let df =
        (a + b).powi(2) / (a * a / (x.len() - 1) as f64 + b * b / (reference.len() - 1) as f64);
    let q = t_quantile(0.975, df);
    let pct = |d: f64| 100.0 * d / m0;
    Some(Welch {
        diff_pct: pct(m1 - m0),
        ci95_pct: (pct(m1 - m0 - q * se), pct(m1 - m0 + q * se)),
        t,
        df,
        p: two_sided_p(t, df),
    })
}

/// Two-sided p-value of Student's t with `df` degrees of freedom:
/// `I_{df/(df+t²)}(df/2, 1/2)`.
pub fn two_sided_p(t: f64, df: f64) -> f64 {
    inc_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// The `p` quantile of Student's t (bisection on the CDF).
pub fn t_quantile(p: f64, df: f64) -> f64 {
    let cdf = |t: f64| {
        let tail = 0.5 * two_sided_p(t, df);
        if t >= 0.0 {
            1.0 - tail
        } else {
            tail
        }
    };
    let (mut lo, mut hi) = (-1e3, 1e3);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos approximation (g = 7, n = 9).
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        std::f64::consts::PI.ln() - (std::f64::consts::PI * x).sin().ln() - ln_gamma(1.0 - x)
    } else {
        let x = x - 1.0;
        let mut a = C[0];
        let t = x + 7.5;
        for (i, c) in C.iter().enumerate().skip(1) {
            a += c / (x + i as f64);
        }
        0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
    }
}

/// The regularized incomplete beta function `I_x(a, b)` (continued fraction).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - inc_beta(b, a, 1.0 - x);
    }
    // Lentz's method.
    let tiny = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        let num = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        // The even and the odd step of the fraction.
        for num in [
            num,
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            if d.abs() < tiny {
                d = tiny;
            }
            c = 1.0 + num / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f / a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn student_t_matches_tables() {
        // Two-sided p of t = 2.0 at 10 df is 0.0734; t(0.975) at 10 and 30 df.
        assert!((two_sided_p(2.0, 10.0) - 0.07339).abs() < 1e-4);
        assert!((t_quantile(0.975, 10.0) - 2.2281).abs() < 1e-3);
        assert!((t_quantile(0.975, 30.0) - 2.0423).abs() < 1e-3);
        assert!((two_sided_p(0.0, 5.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn welch_on_known_samples() {
        // Two samples, the second 10% slower on average.
        let a = [10.0, 10.2, 9.8, 10.1, 9.9];
        let b = [11.0, 11.2, 10.8, 11.1, 10.9];
        let w = welch(&b, &a).unwrap();
        assert!((w.diff_pct - 10.0).abs() < 1e-9);
        assert!(w.ci95_pct.0 < 10.0 && w.ci95_pct.1 > 10.0);
        assert!(w.p < 1e-5, "{w:?}");
        assert!(
            (w.df - 8.0).abs() < 1e-9,
            "equal variances, equal n: df = 2n - 2"
        );
        assert!(welch(&[1.0], &a).is_none());
    }
}
