//! The machine's cores as one processor-sharing server: `n` runnable
//! workers on `c` cores each progress at rate `min(1, c / n)`.
//!
//! Egalitarian processor sharing is the fluid limit of a round-robin
//! scheduler whose slice is short against the tasks (Linux's EEVDF slices
//! are ~3 ms, the suite's compute parts 0.1–2 ms: an approximation, see
//! docs/sim.md). It is kept exact and cheap with a *virtual clock* `V`, the
//! compute each runnable worker has received: it advances at the common
//! rate, a job of `w` ns started at `V₀` ends when `V = V₀ + w`, so the job
//! that ends first is the heap's minimum whatever the rate does meanwhile:
//! O(log n) per start and end, nothing to rescale when `n` changes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Runnable compute parts sharing the cores.
#[derive(Debug)]
pub struct Cpu {
    cores: f64,
    /// Virtual clock, ns of compute received by each runnable job.
    v: f64,
    /// Real time `v` was last advanced to, ns.
    at: u64,
    /// Virtual finish time (as ordered bits) in the high 64 bits, then a
    /// 38-bit start order and the worker (26 bits): one integer compare.
    jobs: BinaryHeap<Reverse<u128>>,
    seq: u64,
    /// [`next_done`](Self::next_done), kept until the jobs change (the
    /// projected end does not move while time runs).
    next: Option<Option<u64>>,
    /// The clock has only moved at full speed, so it holds whole ns and a
    /// cached projected end stays exact as time runs.
    whole: bool,
    /// ∫ min(n, c) dt: core-ns spent computing.
    busy_ns: f64,
    /// ∫ max(0, n − c) dt: ns that runnable workers waited for a core.
    delay_ns: f64,
}

/// `x.ceil() as u64` for `x ≥ 0` without `f64::ceil`, a library call on
/// x86-64 without SSE4.1 (the same value: truncation, plus one if that
/// lost a fraction; saturating as the cast does).
#[inline]
fn ceil_u64(x: f64) -> u64 {
    // Below 2^63 (`i64::MAX as f64` is 2^63) through `i64`: one instruction each way, where `u64`'s
    // conversions are branchy sequences (the same values).
    if x < i64::MAX as f64 {
        let t = x as i64;
        return if (t as f64) < x {
            t as u64 + 1
        } else {
            t as u64
        };
    }
    if x >= u64::MAX as f64 {
        return u64::MAX;
    }
    let t = x as u64;
    if (t as f64) < x {
        t + 1
    } else {
        t
    }
}

/// Rounding slack when comparing virtual times, ns.
const EPS: f64 = 1e-3;

impl Cpu {
    /// `cores` cores (at least 1), idle, at time 0.
    pub fn new(cores: usize) -> Cpu {
        Cpu {
            cores: cores.max(1) as f64,
            v: 0.0,
            at: 0,
            jobs: BinaryHeap::new(),
            seq: 0,
            next: None,
            whole: true,
            busy_ns: 0.0,
            delay_ns: 0.0,
        }
    }

    #[inline]
    fn rate(&self) -> f64 {
        let n = self.jobs.len() as f64;
        if n <= self.cores {
            1.0
        } else {
            self.cores / n
        }
    }

    /// Let time run to `now` (never backwards).
    #[inline]
    pub fn advance(&mut self, now: u64) {
        if now <= self.at {
            return;
        }
        let dt = (now - self.at) as f64;
        self.at = now;
        let n = self.jobs.len() as f64;
        if n == 0.0 {
            return;
        }
        if n <= self.cores {
            // Every job runs: the clock moves with time (`dt·n/n` is `dt`).
            self.v += dt;
            self.busy_ns += dt * n;
            if !self.whole {
                self.next = None;
            }
            return;
        }
        // Shared cores: the clock is fractional from now on, and the
        // projected end is recomputed from it, rounding as it did before.
        self.whole = false;
        self.next = None;
        let running = self.cores;
        self.v += dt * running / n;
        self.busy_ns += dt * running;
        self.delay_ns += dt * (n - running);
    }

    /// Worker `w` starts `work_ns` of compute now (after [`advance`](Self::advance)).
    #[inline]
    pub fn start(&mut self, w: u32, work_ns: u64) {
        let finish = self.v + work_ns as f64;
        self.seq = (self.seq + 1) & ((1 << 38) - 1);
        let low = self.seq << 26 | u64::from(w) & ((1 << 26) - 1);
        self.jobs.push(Reverse(
            u128::from(finish.to_bits()) << 64 | u128::from(low),
        ));
        self.next = None;
    }

    /// When the next compute part ends, if any runs.
    #[inline]
    pub fn next_done(&mut self) -> Option<u64> {
        if let Some(next) = self.next {
            return next;
        }
        let (v, at, rate, whole) = (self.v, self.at, self.rate(), self.whole);
        let next = self.jobs.peek().map(|Reverse(k)| {
            let left = (f64::from_bits((k >> 64) as u64) - v).max(0.0);
            if rate == 1.0 {
                if whole {
                    // Whole ns at full speed: `left` is its own ceiling.
                    at + left as u64
                } else {
                    // `left / 1.0` is `left`: no division.
                    at + ceil_u64(left)
                }
            } else {
                at + ceil_u64(left / rate)
            }
        });
        self.next = Some(next);
        next
    }

    /// A worker whose compute part has ended by now, if any (call after
    /// advancing to [`next_done`](Self::next_done)).
    #[inline]
    pub fn pop_done(&mut self) -> Option<u32> {
        let Reverse(k) = *self.jobs.peek()?;
        if f64::from_bits((k >> 64) as u64) <= self.v + EPS {
            self.jobs.pop();
            self.next = None;
            Some((k as u64 & ((1 << 26) - 1)) as u32)
        } else {
            None
        }
    }

    /// Compute left, in ns at full speed, of the `k`-th running part
    /// (`k < running()`, in the heap's storage order: a fixed order
    /// unrelated to the parts' ends; after [`advance`](Self::advance)).
    #[inline]
    pub fn left(&self, k: usize) -> u64 {
        self.jobs.as_slice().get(k).map_or(0, |Reverse(key)| {
            ceil_u64((f64::from_bits((key >> 64) as u64) - self.v).max(0.0))
        })
    }

    /// Compute parts running (sharing the cores).
    #[inline]
    pub fn running(&self) -> usize {
        self.jobs.len()
    }

    /// Core-ns spent computing so far.
    pub fn busy_ns(&self) -> f64 {
        self.busy_ns
    }

    /// Ns runnable workers spent waiting for a core so far.
    pub fn delay_ns(&self) -> f64 {
        self.delay_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run every job to its end, returning (worker, end time).
    fn drain(cpu: &mut Cpu) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        while let Some(t) = cpu.next_done() {
            cpu.advance(t);
            while let Some(w) = cpu.pop_done() {
                out.push((w, t));
            }
        }
        out
    }

    #[test]
    fn ceil_without_libm_is_ceil() {
        for x in [
            0.0,
            0.25,
            1.0,
            1.5,
            2.999_999,
            1e15 + 0.5,
            4.5e15,
            9.2e18,
            i64::MAX as f64,
            1.7e19,
            1.8e19,
            1e300,
        ] {
            assert_eq!(ceil_u64(x), x.ceil() as u64, "{x}");
        }
        let mut v = 0.123_f64;
        for _ in 0..10_000 {
            v = (v * 1.618_033 + 0.577) % 1e9;
            assert_eq!(ceil_u64(v), v.ceil() as u64, "{v}");
        }
    }

    #[test]
    fn a_job_alone_runs_at_full_speed() {
        let mut cpu = Cpu::new(2);
        cpu.start(0, 1_000);
        assert_eq!(drain(&mut cpu), vec![(0, 1_000)]);
        assert_eq!(cpu.busy_ns(), 1_000.0);
        assert_eq!(cpu.delay_ns(), 0.0);
    }

    #[test]
    fn oversubscribed_jobs_share_the_cores() {
        // 4 jobs of 1 µs on 2 cores: each gets half a core, all end at 2 µs.
        let mut cpu = Cpu::new(2);
        for w in 0..4 {
            cpu.start(w, 1_000);
        }
        let ends = drain(&mut cpu);
        assert_eq!(ends.len(), 4);
        assert!(ends.iter().all(|&(_, t)| t == 2_000), "{ends:?}");
        assert!((cpu.busy_ns() - 4_000.0).abs() < 1e-6);
        assert!((cpu.delay_ns() - 4_000.0).abs() < 1e-6);
    }

    #[test]
    fn a_short_job_leaves_first_and_the_rest_speed_up() {
        // 1 core, jobs of 1 and 3 µs: the short one ends at 2 µs (half
        // speed), the long one has 2 µs left alone: ends at 4 µs.
        let mut cpu = Cpu::new(1);
        cpu.start(7, 3_000);
        cpu.start(8, 1_000);
        assert_eq!(drain(&mut cpu), vec![(8, 2_000), (7, 4_000)]);
    }

    #[test]
    fn what_is_left_of_each_part_follows_the_clock() {
        let mut cpu = Cpu::new(2);
        cpu.start(0, 1_000);
        cpu.start(1, 3_000);
        cpu.advance(400);
        let mut left: Vec<u64> = (0..cpu.running()).map(|k| cpu.left(k)).collect();
        left.sort();
        assert_eq!(left, vec![600, 2_600]);
        assert_eq!(cpu.left(5), 0);
    }

    #[test]
    fn a_late_start_shares_from_then_on() {
        let mut cpu = Cpu::new(1);
        cpu.start(0, 2_000);
        cpu.advance(1_000);
        cpu.start(1, 500);
        // From 1 µs: both at half speed; job 1 needs 1 µs of wall time.
        assert_eq!(drain(&mut cpu), vec![(1, 2_000), (0, 2_500)]);
    }
}
