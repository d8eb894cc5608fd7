//! Scaling a workload's offered load: `k` copies of it run side by side,
//! copy `i` shifted by `i/k` of the mean gap between arrivals, merged in
//! arrival order. The arrival rate and offered work grow `k`-fold while the
//! shape over time — bursts, load steps, a trace's daily pattern — stays
//! where it was (a bigger machine serving `k` tenants of the same
//! workload), unlike compressing time, which would shorten the bursts.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use tidepool_workload::TaskSpec;

/// The tasks of `k` shifted copies of the stream `make()` gives (called `k`
/// times; each call must give the same tasks), whose mean gap between
/// arrivals is `mean_gap`. Memory grows with `k`, not with the streams.
pub fn superpose<I, F>(k: usize, mean_gap: Duration, make: F) -> impl Iterator<Item = TaskSpec>
where
    I: Iterator<Item = TaskSpec>,
    F: Fn() -> I,
{
    let k = k.max(1);
    let mut copies: Vec<(I, u64)> = Vec::with_capacity(k);
    // (next arrival ns, copy): the earliest next, ties in copy order.
    let mut heads: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::with_capacity(k);
    let mut pending: Vec<Option<TaskSpec>> = Vec::with_capacity(k);
    let gap = u64::try_from(mean_gap.as_nanos()).unwrap_or(u64::MAX);
    for i in 0..k {
        let shift = (u128::from(gap) * i as u128 / k as u128) as u64;
        let mut it = make();
        let first = it.next();
        let mut at = shift;
        if let Some(t) = &first {
            at = at.saturating_add(ns(t.start_delay));
            heads.push(Reverse((at, i)));
        }
        pending.push(first);
        copies.push((it, at));
    }
    let mut last = 0u64;
    std::iter::from_fn(move || {
        let Reverse((at, i)) = heads.pop()?;
        let mut task = pending[i].take()?;
        task.start_delay = Duration::from_nanos(at - last);
        last = at;
        let (it, t) = &mut copies[i];
        if let Some(next) = it.next() {
            *t = t.saturating_add(ns(next.start_delay));
            heads.push(Reverse((*t, i)));
            pending[i] = Some(next);
        }
        Some(task)
    })
}

/// `k` copies of a closed loop of `clients` clients (task `i` belongs to
/// client `i mod clients`, its start delay a think time) as one loop of
/// `k · clients` clients: round `r` of copy `j` becomes tasks
/// `(r·k + j)·clients ..` of the result. Copy `j`'s first think times are
/// stretched by `j/k` of themselves, so the copies do not start in
/// lockstep. `make()` is called `k` times and must give the same tasks; the
/// result ends with the shortest copy (a hole would move tasks to other
/// clients).
pub fn interleave_clients<I, F>(k: usize, clients: usize, make: F) -> impl Iterator<Item = TaskSpec>
where
    I: Iterator<Item = TaskSpec>,
    F: Fn() -> I,
{
    let (k, clients) = (k.max(1), clients.max(1));
    let mut copies: Vec<I> = (0..k).map(|_| make()).collect();
    let mut i = 0usize;
    std::iter::from_fn(move || {
        let (round, j) = (i / (clients * k), i / clients % k);
        i += 1;
        let mut t = copies[j].next()?;
        if round == 0 {
            t.start_delay += t.start_delay.mul_f64(j as f64 / k as f64);
        }
        Some(t)
    })
    .fuse()
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(delay_us: u64) -> TaskSpec {
        TaskSpec {
            request_id: 1,
            app_id: 1,
            start_delay: Duration::from_micros(delay_us),
            cpu: Duration::from_micros(10),
            blocked: Duration::ZERO,
        }
    }

    #[test]
    fn copies_interleave_shifted_and_keep_the_span() {
        // Arrivals at 0, 100, 200 µs; two copies shifted by half the gap.
        let base = || vec![task(0), task(100), task(100)].into_iter();
        let arrivals: Vec<u64> = superpose(2, Duration::from_micros(100), base)
            .scan(0u64, |at, t| {
                *at += t.start_delay.as_micros() as u64;
                Some(*at)
            })
            .collect();
        assert_eq!(arrivals, vec![0, 50, 100, 150, 200, 250]);
    }

    #[test]
    fn closed_loop_copies_interleave_by_round_and_client() {
        // Two clients, tasks with think times 1..=4 µs; two copies: four
        // clients, round 0 of copy 0 (1, 2), of copy 1 (1.5, 3: stretched
        // by half), then round 1 of each (3, 4, 3, 4).
        let base = || (1..=4).map(task).collect::<Vec<_>>().into_iter();
        let thinks: Vec<u64> = interleave_clients(2, 2, base)
            .map(|t| t.start_delay.as_nanos() as u64)
            .collect();
        assert_eq!(
            thinks,
            vec![1_000, 2_000, 1_500, 3_000, 3_000, 4_000, 3_000, 4_000]
        );
    }

    #[test]
    fn one_copy_is_the_stream_itself() {
        let base = || vec![task(5), task(7), task(0)].into_iter();
        let out: Vec<TaskSpec> = superpose(1, Duration::from_micros(6), base).collect();
        assert_eq!(out, base().collect::<Vec<_>>());
    }
}
