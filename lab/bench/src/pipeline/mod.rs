//! The `pipeline` benchmark: pipelined programs of several shapes, run by
//! tidepool-pipeline and by peers in the same process, interleaved, against
//! the throughput bound the shape implies.
//!
//! Peers: a hand-written crossbeam-channel thread-per-stage pipeline (the
//! usual way to write one by hand), `pariter` (`readahead` puts the upstream
//! on its own thread, `parallel_map` replicates a stage in order) and
//! `pipeliner` (`with_threads(n).map(f)`, a stage on n threads, unordered).
//! Every implementation runs the same stage bodies on `Vec<u64>` items of
//! [`ITEM_WORDS`] words; the peers, whose items are iterator values, make a
//! fresh vector per item, tidepool-pipeline recycles a fixed pool.
//!
//! `PIPELINE_BENCH_REPORT=1` prints tidepool-pipeline's own timing report
//! after each of its runs (which stage limited it, its waits).

use std::time::{Duration, Instant};

use serde::Serialize;
use tidepool_workload::median;
use tidepool_workload::BusyLoop;

use crate::harness::balanced_order;
use crate::paired::{paired_per_repeat, verdict, Paired};

/// Words per item (4 KiB).
pub const ITEM_WORDS: usize = 512;
/// Items in flight by default: tidepool's buffer pool, the peers' queue
/// capacities (`--in-flight` sets [`Shape::in_flight`]).
pub const IN_FLIGHT: usize = 8;

/// What one stage does per item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Work {
    /// Busy-wait this many microseconds of CPU.
    Spin(u64),
    /// Block (sleep) this many microseconds, as a disk or network call would.
    Block(u64),
}

/// One stage of a shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageDef {
    /// Its name.
    pub name: &'static str,
    /// Its work per item.
    pub work: Work,
    /// Threads that run it.
    pub replicas: usize,
    /// Runs on the previous stage's thread(s) (a multistage thread,
    /// `Builder::then` / `then_each`) instead of threads of its own. The
    /// mapping changes no work: [`bound`] and [`oracle`] ignore it.
    pub then: bool,
}

/// A pipeline shape: the first stage is the source, the last the sink.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Its name in the JSON.
    pub name: &'static str,
    /// Its stages.
    pub stages: Vec<StageDef>,
    /// Items in flight: tidepool's buffer pool; each peer queue holds this
    /// over the number of stages (a replicated stage's queue: all of it).
    pub in_flight: usize,
}

const fn st(name: &'static str, work: Work, replicas: usize) -> StageDef {
    StageDef {
        name,
        work,
        replicas,
        then: false,
    }
}

/// `s` on the previous stage's thread(s).
const fn then(s: StageDef) -> StageDef {
    StageDef { then: true, ..s }
}

/// A thread group of a shape: consecutive stages on the same thread(s).
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Its stages' work, in order.
    pub works: Vec<Work>,
    /// Threads that run it (its first stage's).
    pub replicas: usize,
}

impl Group {
    /// Do every stage's work of the group on an item.
    fn work(&self, item: &mut [u64]) {
        for &w in &self.works {
            work(w, item);
        }
    }
}

/// The shape's thread groups: each stage starts one unless it is `then`.
pub fn groups(shape: &Shape) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for s in &shape.stages {
        match out.last_mut() {
            Some(g) if s.then => g.works.push(s.work),
            _ => out.push(Group {
                works: vec![s.work],
                replicas: s.replicas,
            }),
        }
    }
    out
}

/// The three shapes of the issue, sized for `cores` CPUs, each compute
/// shape also mapped onto fewer threads with multistage threads.
///
/// `balanced-compute-multistage`: read+a | b+write, two threads (as many as
/// cores on this machine), one hand-off per item instead of three.
/// `slow-stage-replicated-multistage`: read | (slow+write) × replicas. A
/// line's two ends cannot share a thread without the middle, and the source
/// is one thread, so read stays alone (10 µs of 100 per item); write joins
/// each replica of the slow stage. That is honest for this sink because the
/// replicated stage is already unordered (the sink takes items in any
/// order) and its work needs no state shared between items, as a `pwrite`
/// at the item's own offset would not; a sink that must append in order
/// keeps the thread-per-stage mapping.
pub fn shapes(cores: usize) -> Vec<Shape> {
    let mut v = vec![
        Shape {
            name: "balanced-compute",
            stages: vec![
                st("read", Work::Spin(20), 1),
                st("a", Work::Spin(20), 1),
                st("b", Work::Spin(20), 1),
                st("write", Work::Spin(20), 1),
            ],
            in_flight: IN_FLIGHT,
        },
        Shape {
            name: "slow-stage-replicated",
            stages: vec![
                st("read", Work::Spin(10), 1),
                st("slow", Work::Spin(80), cores.max(2)),
                st("write", Work::Spin(10), 1),
            ],
            in_flight: IN_FLIGHT,
        },
        Shape {
            name: "compute-plus-blocking-io",
            stages: vec![
                st("read", Work::Block(200), 1),
                st("compute", Work::Spin(60), 1),
                st("write", Work::Block(200), 1),
            ],
            in_flight: IN_FLIGHT,
        },
    ];
    let fused = |name: &'static str, base: &Shape, then_at: &[usize]| Shape {
        name,
        stages: base
            .stages
            .iter()
            .enumerate()
            .map(|(i, &s)| if then_at.contains(&i) { then(s) } else { s })
            .collect(),
        in_flight: base.in_flight,
    };
    let balanced = fused("balanced-compute-multistage", &v[0], &[1, 3]);
    let slow = fused("slow-stage-replicated-multistage", &v[1], &[2]);
    v.extend([balanced, slow]);
    v
}

/// Do a stage's work on an item.
#[inline]
pub fn work(w: Work, item: &mut [u64]) {
    match w {
        Work::Spin(us) => BusyLoop::global().burn(Duration::from_micros(us)),
        Work::Block(us) => std::thread::sleep(Duration::from_micros(us)),
    }
    item[0] = item[0].wrapping_add(1);
}

/// How long one [`Work::Block`] of `us` really takes here (timer slack and
/// wake-up included): the median of a few trials.
pub fn measure_block(us: u64) -> Duration {
    let mut v: Vec<f64> = (0..200)
        .map(|_| {
            let t = Instant::now();
            std::thread::sleep(Duration::from_micros(us));
            t.elapsed().as_secs_f64()
        })
        .collect();
    v.sort_by(f64::total_cmp);
    Duration::from_secs_f64(median(v.iter().copied()).unwrap_or(0.0))
}

/// The most items per second the shape's structure allows on `cores` idle
/// CPUs: the slowest stage (its cost over its threads) or the CPUs (all
/// compute over `cores`), whichever is lower. `block` is the real cost of
/// each blocking stage. On a loaded machine the CPUs are not idle: the
/// benchmark's bound is the lower of this and the [`oracle`].
pub fn bound(shape: &Shape, cores: usize, block: impl Fn(u64) -> Duration) -> f64 {
    let cost = |w: Work| match w {
        Work::Spin(us) => us as f64 * 1e-6,
        Work::Block(us) => block(us).as_secs_f64(),
    };
    let stage = shape
        .stages
        .iter()
        .map(|s| s.replicas as f64 / cost(s.work))
        .fold(f64::INFINITY, f64::min);
    let cpu: f64 = shape
        .stages
        .iter()
        .map(|s| match s.work {
            Work::Spin(us) => us as f64 * 1e-6,
            Work::Block(_) => 0.0,
        })
        .sum();
    stage.min(if cpu > 0.0 {
        cores as f64 / cpu
    } else {
        f64::INFINITY
    })
}

/// What a run cost per item.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PerItem {
    /// The process's CPU time (user + system), µs.
    pub cpu_us: f64,
    /// The process's context switches, voluntary and involuntary, of every
    /// thread (finished ones included): what the hand-offs cost the kernel,
    /// counted the same way for every implementation.
    pub switches: f64,
    /// Of those, the voluntary ones: a thread waited (parked, slept).
    pub voluntary: f64,
}

/// The process's context switches so far, all and voluntary (getrusage
/// sums every thread, finished ones included).
fn switches() -> (f64, f64) {
    // SAFETY: getrusage writes one rusage record into the zeroed struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage for the call's duration.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return (0.0, 0.0);
    }
    ((u.ru_nvcsw + u.ru_nivcsw) as f64, u.ru_nvcsw as f64)
}

/// Run `f` over `items` items: items per second and the cost per item.
///
/// `f` runs on a thread of its own, started before the clock, so that no
/// run inherits the thread the one before it ran on: pooled mode's worker 0
/// and pariter's last map compute on their caller's thread, and a
/// thread-per-stage run started from that thread right after was 7–10%
/// slower (docs/benchmarks.md).
fn timed(items: usize, f: impl FnOnce() + Send) -> (f64, PerItem) {
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                let (cpu0, sw0) = (
                    tidepool::sys::process_cpu_time().unwrap_or_default(),
                    switches(),
                );
                let t = Instant::now();
                f();
                let ips = items as f64 / t.elapsed().as_secs_f64();
                let cpu = tidepool::sys::process_cpu_time().unwrap_or_default() - cpu0;
                let sw1 = switches();
                let n = items as f64;
                (
                    ips,
                    PerItem {
                        cpu_us: cpu.as_secs_f64() * 1e6 / n,
                        switches: (sw1.0 - sw0.0) / n,
                        voluntary: (sw1.1 - sw0.1) / n,
                    },
                )
            })
            .join()
    })
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// The oracle: the shape's whole work per item, on as many threads as the
/// shape has, each thread taking whole items from a shared counter and
/// doing every stage's work on its own item — no hand-off, no queue, no
/// wake-up. Run interleaved with the implementations, it shows what the
/// CPUs this process gets can do with the shape's work. On idle CPUs it
/// meets the compute shapes' [`bound`]; on a loaded machine it is *not* an
/// upper bound for a pipeline (measured: EEVDF gives threads that block and
/// wake a larger share than threads that never block, so pipelines got up
/// to 1.4× the oracle). Its CPU time per item is the work's own cost in
/// the run's conditions: an implementation's CPU per item above it is what
/// its hand-offs cost. Returns items per second and the cost per item.
pub fn oracle(shape: &Shape, items: usize) -> (f64, PerItem) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads: usize = shape.stages.iter().map(|s| s.replicas).sum();
    let next = AtomicUsize::new(0);
    timed(items, || {
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    let mut v = vec![0u64; ITEM_WORDS];
                    while next.fetch_add(1, Ordering::Relaxed) < items {
                        for s in &shape.stages {
                            work(s.work, &mut v);
                        }
                    }
                });
            }
        })
    })
}

/// The shape's groups decoupled: each group's threads do the group's work
/// on `items` items of their own, side by side with the other groups'
/// threads, with no queue and no hand-off between them (a pipeline with
/// unbounded queues whose hand-offs cost nothing). Items per second is
/// `items` over the time until the last group's threads finish.
///
/// Unlike [`bound`], which prices each stage alone, this measures the
/// stages together on this machine, so it includes what they do to each
/// other's timing (a sleeping stage's wake-up delayed by a computing one);
/// unlike the [`oracle`], it keeps the pipeline's threads. So on a shape
/// whose limit is a stage (not the CPUs), an implementation's items per
/// second over this is what its hand-offs kept, and about what is left
/// for any implementation of this mapping to gain. It is not a strict
/// ceiling: coupled stages can fall into a better rhythm than decoupled
/// ones, and single repeats do exceed it.
pub fn decoupled(shape: &Shape, items: usize) -> f64 {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let groups = groups(shape);
    let counters: Vec<AtomicUsize> = groups.iter().map(|_| AtomicUsize::new(0)).collect();
    timed(items, || {
        std::thread::scope(|scope| {
            for (g, next) in groups.iter().zip(&counters) {
                for _ in 0..g.replicas {
                    scope.spawn(move || {
                        let mut v = vec![0u64; ITEM_WORDS];
                        while next.fetch_add(1, Ordering::Relaxed) < items {
                            g.work(&mut v);
                        }
                    });
                }
            }
        })
    })
    .0
}

mod impls;
mod results;

pub use impls::Impl;
pub use results::*;

#[cfg(test)]
mod tests {
    use super::*;

    /// Each tidepool row gets one paired summary per peer, from the
    /// repeats' own ratios; peers get none.
    #[test]
    fn tidepool_rows_are_paired_with_each_peer_per_repeat() {
        let impls = [Impl::TidepoolPooled, Impl::Crossbeam, Impl::Pariter];
        let pooled: Vec<f64> = (0..10).map(|r| 100.0 + f64::from(r)).collect();
        let samples = vec![pooled.clone(), vec![100.0; 10], pooled];
        let v = vs_peers(&impls, &samples, 0);
        let names: Vec<&str> = v.iter().map(|p| p.peer.as_str()).collect();
        assert_eq!(names, ["crossbeam-threads", "pariter"]);
        // Against crossbeam: ratios 1.00..1.09, 9 won, 1 tie.
        assert_eq!((v[0].ratio.won, v[0].ratio.lost), (9, 0));
        assert!((v[0].ratio.median - 1.045).abs() < 1e-9);
        // Against itself, repeat by repeat: every ratio 1, nothing won.
        assert_eq!(
            (v[1].ratio.median, v[1].ratio.won, v[1].ratio.sign_p),
            (1.0, 0, 1.0)
        );
        assert!(vs_peers(&impls, &samples, 1).is_empty());
        let json = serde_json::to_value(&v[0]).unwrap();
        assert_eq!(json["peer"], "crossbeam-threads");
        assert!(json["ci95"].is_array() && json["median"].is_number());
        assert_eq!(json["verdict"], "ahead");
        assert_eq!(v[1].verdict, "level");
    }

    #[test]
    fn bounds_follow_the_slowest_stage_or_the_cpus() {
        let s = shapes(2);
        // 4 × 20 µs of compute on 2 cores: 25 000/s; each stage alone 50 000/s.
        assert!((bound(&s[0], 2, |_| Duration::ZERO) - 25_000.0).abs() < 1.0);
        // 100 µs of compute per item on 2 cores: 20 000/s.
        assert!((bound(&s[1], 2, |_| Duration::ZERO) - 20_000.0).abs() < 1.0);
        // Blocking stages of 250 µs real cost: 4 000/s.
        let b = bound(&s[2], 2, |_| Duration::from_micros(250));
        assert!((b - 4_000.0).abs() < 1.0, "{b}");
    }

    /// Decoupled, each group does every item on its own threads: a group
    /// of one thread that sleeps 2 ms per item takes at least `items` ×
    /// 2 ms, and one of two threads at least half that (sleeps never end
    /// early, so these bounds cannot fail on a loaded machine).
    #[test]
    fn decoupled_runs_every_item_through_every_group() {
        let items = 6;
        let ms = |us| Duration::from_micros(us).as_secs_f64();
        let one = Shape {
            name: "t",
            stages: vec![st("read", Work::Block(2000), 1), st("w", Work::Spin(1), 1)],
            in_flight: 4,
        };
        // 6 sleeps of 2 ms on one thread: at least 12 ms, 500 items/s.
        assert!(decoupled(&one, items) <= 1.0 / ms(2000));
        let two = Shape {
            name: "t",
            stages: vec![st("read", Work::Spin(1), 1), st("w", Work::Block(2000), 2)],
            in_flight: 4,
        };
        // One of the two threads does at least 3 of the 6: 6 ms.
        let ips = decoupled(&two, items);
        assert!(ips > 0.0 && ips <= items as f64 / (3.0 * ms(2000)), "{ips}");
    }

    /// A busy loop more than 5% off its calibration makes the table say
    /// that "% of bound" is off; within 5% it says nothing.
    #[test]
    fn the_table_warns_when_the_busy_loop_is_off() {
        let b = |err: [f64; 2]| PipelineBench {
            scenarios: Vec::new(),
            items: 1,
            in_flight: 4,
            repeats: 1,
            cores: 2,
            load_before: None,
            load_after: None,
            spin_error_pct: err,
        };
        assert!(!table(&b([1.0, -4.9])).contains("warning"));
        assert!(table(&b([-22.5, 0.0])).contains("-22.5%"));
        assert!(table(&b([0.0, 6.0])).contains("warning"));
        let json = serde_json::to_value(b([1.0, 2.0])).unwrap();
        assert_eq!(json["spin_error_pct"], serde_json::json!([1.0, 2.0]));
    }

    /// Each row's thread count follows its implementation's mapping.
    #[test]
    fn thread_counts_follow_each_mapping() {
        let s = shapes(2);
        let count = |imp: Impl| -> Vec<usize> { s.iter().map(|x| imp.threads(x, 2)).collect() };
        // balanced, slow-replicated, blocking, balanced-multistage, slow-multistage
        assert_eq!(count(Impl::Tidepool), [4, 4, 3, 2, 3]);
        assert_eq!(count(Impl::Crossbeam), [4, 4, 3, 2, 3]);
        assert_eq!(count(Impl::TidepoolPooled), [4, 4, 3, 2, 3]);
        assert_eq!(count(Impl::TidepoolTyped), [4, 4, 3, 2, 3]);
        assert_eq!(count(Impl::Pariter), [4, 4, 3, 2, 2]);
        assert_eq!(count(Impl::Pipeliner), [3, 3, 2, 2, 2]);
    }

    /// The multistage shapes are the compute shapes' work on fewer
    /// threads: same stages, same bound, groups as documented.
    #[test]
    fn multistage_shapes_map_the_same_work_onto_fewer_threads() {
        let s = shapes(2);
        let by = |n: &str| s.iter().find(|x| x.name == n).unwrap().clone();
        for (base, multi, want) in [
            (
                "balanced-compute",
                "balanced-compute-multistage",
                vec![(2, 1), (2, 1)],
            ),
            (
                "slow-stage-replicated",
                "slow-stage-replicated-multistage",
                vec![(1, 1), (2, 2)],
            ),
        ] {
            let (b, m) = (by(base), by(multi));
            let work = |x: &Shape| {
                x.stages
                    .iter()
                    .map(|s| (s.work, s.replicas))
                    .collect::<Vec<_>>()
            };
            assert_eq!(work(&b), work(&m));
            let z = |_| Duration::ZERO;
            assert_eq!(bound(&b, 2, z), bound(&m, 2, z));
            assert_eq!(groups(&b).len(), b.stages.len());
            let g: Vec<(usize, usize)> = groups(&m)
                .iter()
                .map(|g| (g.works.len(), g.replicas))
                .collect();
            assert_eq!(g, want, "{multi}");
        }
    }

    /// The smallest `--in-flight` (one queue slot per stage of the
    /// longest shape) and a large one still pass every item everywhere,
    /// and the JSON says which was used.
    #[test]
    fn every_impl_passes_every_item_at_any_in_flight() {
        BusyLoop::global();
        for in_flight in [4, 32] {
            let b = run(30, in_flight, 1, &Impl::ALL, &[], true);
            assert_eq!(b.in_flight, in_flight);
            assert_eq!(b.scenarios.len(), shapes(2).len());
            for sc in &b.scenarios {
                assert_eq!(sc.decoupled_repeats.len(), 1, "{}", sc.name);
                assert!(sc.results.iter().all(|r| r.of_decoupled > 0.0));
            }
        }
    }

    #[test]
    fn every_impl_passes_every_item() {
        BusyLoop::global();
        for shape in shapes(2) {
            for imp in Impl::ALL {
                assert!(imp.run(&shape, 50).0 > 0.0, "{}", imp.name());
            }
        }
    }
}
