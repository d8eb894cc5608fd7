//! Queueing arithmetic shared by the policies that size a pool from a
//! model: Erlang C (how many servers keep the probability of waiting below
//! a target, for `auto`'s demand size), the binomial count of workers that
//! keep every core busy (`auto`'s ceiling), and Oh & Kim's simpler job
//! waiting probability (`hisdyn`). Each takes the largest answer it may
//! give as `max`.

/// The job waiting probability `(c / (i·n))^n` of figure 3's `CalcWaitProb`:
/// the chance that a job arrives while all `n` threads are busy, with `i` the
/// mean interval between arrivals and `c` the mean processing time (any unit,
/// the same for both).
pub fn wait_probability(interval: f64, processing: f64, threads: usize) -> f64 {
    let n = threads as f64;
    if threads == 0 {
        return 1.0;
    }
    let load = processing / (interval * n);
    if load.is_nan() {
        // 0/0: no processing time and no interval; nobody ever waits.
        return 0.0;
    }
    load.powi(threads.min(i32::MAX as usize) as i32)
}

/// The smallest number of servers whose Erlang-C probability of waiting for
/// offered load `a` (erlangs) is at most `p`, searching up to `max`
/// (returned if none is enough). Zero load needs zero servers.
pub fn erlang_c_servers(a: f64, p: f64, max: usize) -> usize {
    if a.is_nan() || a <= 0.0 {
        return 0;
    }
    // Erlang B by its recurrence, then C from B: stable for large n and a.
    let mut b = 1.0;
    for n in 1..=max {
        let nf = n as f64;
        b = a * b / (nf + a * b);
        if nf > a {
            let c = nf * b / (nf - a * (1.0 - b));
            if c <= p {
                return n;
            }
        }
    }
    max
}

/// The fewest workers `n ≥ cores` such that, when each is runnable with
/// probability `phi` independently, at least `cores` of them are runnable
/// with probability `p` or more: `P(Binomial(n, φ) ≥ cores) ≥ p`. Searching
/// up to `max` (returned if none is enough). Fewer busy workers leave a
/// core idle more often; more add contention without adding throughput.
pub fn cores_busy_workers(cores: usize, phi: f64, p: f64, max: usize) -> usize {
    let cores = cores.max(1);
    let max = max.max(1);
    if phi.is_nan() || phi >= 1.0 {
        return cores.min(max);
    }
    if phi <= 0.0 {
        return max;
    }
    let miss = 1.0 - p;
    let odds = phi / (1.0 - phi);
    // The mean runnable count first reaches `cores` at `cores / φ`: the
    // answer is at least that, so start there.
    let start = (cores as f64 / phi).floor().min(max as f64) as usize;
    for n in start.max(cores)..max {
        // P(X < cores) = Σ_{k < cores} C(n, k) φ^k (1 − φ)^(n − k), each
        // term from the last (the first in logs: it may underflow).
        let mut term = (n as f64 * (1.0 - phi).ln()).exp();
        let mut below = term;
        for k in 0..cores - 1 {
            term *= (n - k) as f64 / (k + 1) as f64 * odds;
            below += term;
        }
        if below <= miss {
            return n;
        }
    }
    max
}
