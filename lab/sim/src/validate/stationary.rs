//! Starting a replication in the steady state: the number of tasks in a
//! Markovian queue at a random instant, drawn from its stationary
//! distribution, so a run has no warm-up and no initial bias.
//!
//! With exponential service the tasks in service at that instant have
//! exponential residual work (memorylessness), so the state is exactly
//! "that many tasks, each with a fresh exponential service time"; under
//! processor sharing the same holds for every task in the system. This is
//! exact for M/M/c, M/M/c/K, M/M/c/c, M/M/∞ and M/M/1-PS; M/D/1 and M/G/1
//! have no such state and warm up from empty instead.

use rand::Rng;
use rand_distr::Distribution;

/// The cumulative stationary distribution of the tasks in the system of the
/// birth–death chain with arrival rate `a` (in units of the service rate),
/// `min(n, servers)` departures and at most `cap` tasks, truncated where the
/// remaining mass is below 10⁻¹⁷ (at most 10⁷ states).
///
/// Weights are kept in logs (`log q_n = Σ log(a / min(k, servers))`), so no
/// factorial overflows at 10,000 servers.
pub fn in_system_cdf(servers: usize, cap: Option<usize>, a: f64) -> Vec<f64> {
    let logs = in_system_logs(servers, cap, a);
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = logs
        .iter()
        .map(|l| {
            acc += (l - max).exp();
            acc
        })
        .collect();
    for p in &mut cdf {
        *p /= acc;
    }
    cdf
}

/// `log q_n` for `n = 0..` (unnormalised), as [`in_system_cdf`] truncates.
pub fn in_system_logs(servers: usize, cap: Option<usize>, a: f64) -> Vec<f64> {
    const LIMIT: usize = 10_000_000;
    let last = cap.unwrap_or(LIMIT).min(LIMIT);
    let mut logs = vec![0.0f64];
    let mut l = 0.0f64;
    let mut max = 0.0f64;
    for n in 1..=last {
        l += a.ln() - (n.min(servers) as f64).ln();
        logs.push(l);
        max = max.max(l);
        // Past the mode the weights only fall: stop when negligible.
        if cap.is_none() && l < max - 40.0 && (n as f64) > a {
            break;
        }
    }
    logs
}

/// Draw from a cumulative distribution.
pub fn draw(cdf: &[f64], rng: &mut impl Rng) -> usize {
    let u: f64 = rand_distr::StandardUniform.sample(rng);
    cdf.partition_point(|&p| p <= u)
        .min(cdf.len().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn mm1_is_geometric() {
        let cdf = in_system_cdf(1, None, 0.8);
        // P(N = 0) = 1 − ρ, P(N ≤ 1) = 1 − ρ².
        assert!((cdf[0] - 0.2).abs() < 1e-12);
        assert!((cdf[1] - (1.0 - 0.64)).abs() < 1e-12);
    }

    #[test]
    fn infinite_servers_is_poisson_and_large_c_does_not_overflow() {
        let cdf = in_system_cdf(usize::MAX, None, 10.0);
        assert!((cdf[0] - (-10.0f64).exp()).abs() < 1e-15);
        let cdf = in_system_cdf(10_000, None, 9_900.0);
        assert!(cdf.iter().all(|p| p.is_finite()));
        assert!((cdf.last().copied().unwrap_or(0.0) - 1.0).abs() < 1e-12);
        // P(N ≥ c) is Erlang C.
        let c = crate::validate::formulas::erlang_c(10_000, 9_900.0);
        assert!(
            ((1.0 - cdf[9_999]) - c).abs() < 1e-9,
            "{} vs {c}",
            1.0 - cdf[9_999]
        );
    }

    #[test]
    fn draws_follow_the_distribution() {
        let cdf = in_system_cdf(1, Some(3), 1.0); // uniform on 0..=3
        let mut rng = StdRng::seed_from_u64(7);
        let mut counts = [0usize; 4];
        for _ in 0..40_000 {
            counts[draw(&cdf, &mut rng)] += 1;
        }
        assert!(
            counts.iter().all(|&k| (9_000..11_000).contains(&k)),
            "{counts:?}"
        );
    }
}
