//! Closed forms of the queueing models the simulator is checked against.
//! `a` is the offered load in erlangs (`λ/μ`), `c` the servers.

/// Erlang B: the probability that an arrival finds all `c` servers busy in
/// the M/M/c/c loss system, `exp(−`[`log_inv_erlang_b`]`)`: no factorials,
/// no overflow for any `c` (values below 10⁻³⁰⁸ are 0).
///
/// ```
/// use tidepool_sim::validate::formulas::erlang_b;
/// assert!((erlang_b(1, 1.0) - 0.5).abs() < 1e-12);
/// assert!((erlang_b(2, 1.0) - 0.2).abs() < 1e-12);
/// ```
pub fn erlang_b(c: usize, a: f64) -> f64 {
    (-log_inv_erlang_b(c, a)).exp()
}

/// `ln(1 / B(c, a))`, by the Erlang-B recursion `B(k) = a·B(k−1) / (k +
/// a·B(k−1))` written for `I(k) = 1/B(k) = 1 + (k/a)·I(k−1)` in logs:
/// `L(k) = ln(k/a) + L(k−1) + ln(1 + (a/k)·e^(−L(k−1)))`. Every term is
/// bounded, so it neither overflows nor underflows at c = 10,000 (where
/// `B` itself can be 10⁻¹⁰⁰⁰).
pub fn log_inv_erlang_b(c: usize, a: f64) -> f64 {
    let mut l = 0.0f64;
    for k in 1..=c {
        let r = (k as f64 / a).ln();
        l = r + l + (-r - l).exp().ln_1p();
    }
    l
}

/// Erlang C: the probability that an arrival waits in M/M/c (`a < c`),
/// from Erlang B: `C = c·B / (c − a·(1 − B))`.
///
/// ```
/// use tidepool_sim::validate::formulas::erlang_c;
/// // M/M/1: P(wait) = ρ.
/// assert!((erlang_c(1, 0.7) - 0.7).abs() < 1e-12);
/// ```
pub fn erlang_c(c: usize, a: f64) -> f64 {
    let b = erlang_b(c, a);
    let c = c as f64;
    c * b / (c - a * (1.0 - b))
}

/// M/M/c mean wait in the queue, in units of the mean service time
/// (`E[W]·μ = C / (c − a)`).
pub fn mmc_mean_wait(c: usize, a: f64) -> f64 {
    erlang_c(c, a) / (c as f64 - a)
}

/// M/M/c `P(W > t)` for `t` in units of the mean service time:
/// `C·exp(−(c − a)·t)`.
pub fn mmc_wait_tail(c: usize, a: f64, t: f64) -> f64 {
    erlang_c(c, a) * (-(c as f64 - a) * t).exp()
}

/// M/M/c/K (at most `k ≥ c` in the system): the probability an arrival is
/// rejected, `p_K`, from the birth–death chain in logs (any load, any `k`).
///
/// ```
/// use tidepool_sim::validate::formulas::{erlang_b, mmck_blocking};
/// // K = c is the loss system.
/// assert!((mmck_blocking(8, 8, 6.0) - erlang_b(8, 6.0)).abs() < 1e-12);
/// ```
pub fn mmck_blocking(c: usize, k: usize, a: f64) -> f64 {
    let logs = super::stationary::in_system_logs(c, Some(k), a);
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = logs.iter().map(|x| (x - max).exp()).sum();
    (logs[k] - max).exp() / sum
}

/// Pollaczek–Khinchine: M/G/1 mean wait `λ·E[S²] / (2(1 − ρ))`, in units of
/// the mean service time, for service with squared coefficient of
/// variation `scv` (`E[S²] = (1 + scv)·E[S]²`).
///
/// ```
/// use tidepool_sim::validate::formulas::{mmc_mean_wait, pk_mean_wait};
/// // Exponential service (scv = 1) is M/M/1.
/// assert!((pk_mean_wait(0.8, 1.0) - mmc_mean_wait(1, 0.8)).abs() < 1e-12);
/// ```
pub fn pk_mean_wait(rho: f64, scv: f64) -> f64 {
    rho * (1.0 + scv) / (2.0 * (1.0 - rho))
}

/// M/M/1 processor sharing: the mean time in the system of a job of size
/// `x` over `x` is `1 / (1 − ρ)` whatever `x`.
pub fn ps_slowdown(rho: f64) -> f64 {
    1.0 / (1.0 - rho)
}

/// The machine-repairman model M/M/c//N: `n` clients that each think for
/// an exponential time of mean `z`, then wait for one of `c` servers
/// (exponential service of mean 1). Returns the throughput `X` (answers
/// per mean service time) and the mean response time `R = N/X − Z` (the
/// interactive response-time law), from the birth–death chain of the
/// clients at the servers, `p_k ∝ Π_{j≤k} ((n − j + 1)/z) / min(j, c)`,
/// in logs.
///
/// ```
/// use tidepool_sim::validate::formulas::machine_repairman;
/// // One client never waits: X = 1/(Z + 1), R = 1.
/// let (x, r) = machine_repairman(1, 1, 3.0);
/// assert!((x - 0.25).abs() < 1e-12 && (r - 1.0).abs() < 1e-12);
/// ```
pub fn machine_repairman(n: usize, c: usize, z: f64) -> (f64, f64) {
    let mut logs = vec![0.0f64];
    for j in 1..=n {
        let prev = logs[j - 1];
        logs.push(prev + ((n - j + 1) as f64 / z).ln() - (j.min(c) as f64).ln());
    }
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (mut total, mut busy) = (0.0, 0.0);
    for (k, l) in logs.iter().enumerate() {
        let p = (l - max).exp();
        total += p;
        busy += p * k.min(c) as f64;
    }
    let x = busy / total;
    (x, n as f64 / x - z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_c_known_values() {
        // c = 2, a = 1: C = 1/3 (textbook).
        assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
        // Large c does not overflow and stays a probability.
        let c = erlang_c(10_000, 9_900.0);
        assert!(c > 0.0 && c < 1.0, "{c}");
        assert_eq!(erlang_c(10_000, 5_000.0), 0.0);
        // In logs: B(10,000, 5,000) is about 10^-841, far below f64; the
        // recursion agrees with the sum of the loss system's weights.
        let l = log_inv_erlang_b(10_000, 5_000.0);
        let logs = crate::validate::stationary::in_system_logs(10_000, Some(10_000), 5_000.0);
        let lc = logs[10_000];
        let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let direct = max + logs.iter().map(|x| (x - max).exp()).sum::<f64>().ln() - lc;
        assert!((l - direct).abs() < 1e-9 * direct, "{l} vs {direct}");
        assert!(l > 1_900.0, "{l}");
    }

    #[test]
    fn log_recursion_matches_the_direct_one() {
        for (c, a) in [
            (1, 0.5),
            (8, 7.2),
            (64, 60.0),
            (1_000, 990.0),
            (10_000, 9_500.0),
        ] {
            let mut b = 1.0f64;
            for k in 1..=c {
                b = a * b / (k as f64 + a * b);
            }
            let ours = erlang_b(c, a);
            assert!(
                (ours - b).abs() <= 1e-9 * b.max(1e-300),
                "{c} {a}: {ours} vs {b}"
            );
        }
    }

    #[test]
    fn mmck_tends_to_erlang_c_shape() {
        // M/M/1/K at ρ < 1: p_K = (1−ρ)ρ^K / (1 − ρ^{K+1}).
        let (rho, k) = (0.8f64, 10usize);
        let want = (1.0 - rho) * rho.powi(k as i32) / (1.0 - rho.powi(k as i32 + 1));
        assert!((mmck_blocking(1, k, rho) - want).abs() < 1e-12);
        // Overload: M/M/1/K at ρ = 2 blocks about half.
        assert!((mmck_blocking(1, 50, 2.0) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn md1_is_half_of_mm1() {
        assert!((pk_mean_wait(0.9, 0.0) * 2.0 - mmc_mean_wait(1, 0.9)).abs() < 1e-9);
    }

    #[test]
    fn tail_at_zero_is_the_wait_probability() {
        assert_eq!(mmc_wait_tail(8, 6.0, 0.0), erlang_c(8, 6.0));
    }
}
