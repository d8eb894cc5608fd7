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

use crate::harness::{balanced_order, ratio_higher_better};
use crate::paired::{paired, Paired};

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

/// An implementation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    /// This crate's pipelines.
    Tidepool,
    /// This crate's pipelines in pooled mode, the workers sizing themselves
    /// (`Builder::pooled`, no count given).
    TidepoolPooled,
    /// This crate's typed stages (`Pipeline::typed`), thread per stage: an
    /// item is a `Vec` made by the source, moved from stage to stage.
    TidepoolTyped,
    /// Hand-written crossbeam-channel threads.
    Crossbeam,
    /// `pariter`.
    Pariter,
    /// `pipeliner`.
    Pipeliner,
}

impl Impl {
    /// All of them, tidepool first.
    pub const ALL: [Impl; 6] = [
        Impl::Tidepool,
        Impl::TidepoolPooled,
        Impl::TidepoolTyped,
        Impl::Crossbeam,
        Impl::Pariter,
        Impl::Pipeliner,
    ];

    /// A peer (not one of tidepool's own rows).
    pub fn is_peer(self) -> bool {
        !matches!(
            self,
            Impl::Tidepool | Impl::TidepoolPooled | Impl::TidepoolTyped
        )
    }

    /// The name in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Tidepool => "tidepool-pipeline",
            Impl::TidepoolPooled => "tidepool-pipeline-pooled",
            Impl::TidepoolTyped => "tidepool-pipeline-typed",
            Impl::Crossbeam => "crossbeam-threads",
            Impl::Pariter => "pariter",
            Impl::Pipeliner => "pipeliner",
        }
    }

    /// The threads it runs `shape`'s stage work on (the calling thread
    /// counted when it runs some): a thread per replica of each group
    /// (tidepool, crossbeam; pooled mode starts as many workers, at most a
    /// core's worth computing at once), pariter's `readahead`
    /// threads and `parallel_map` workers plus the caller that runs the
    /// last unreplicated map, pipeliner's `with_threads` workers (the
    /// source runs on the first map's).
    pub fn threads(self, shape: &Shape, _cores: usize) -> usize {
        let groups = groups(shape);
        let per_group: usize = groups.iter().map(|g| g.replicas).sum();
        match self {
            Impl::Tidepool | Impl::TidepoolPooled | Impl::TidepoolTyped | Impl::Crossbeam => {
                per_group
            }
            Impl::Pariter => {
                let last_on_caller = groups.len() == 1 || groups[groups.len() - 1].replicas == 1;
                groups[1..]
                    .iter()
                    .map(|g| if g.replicas > 1 { g.replicas } else { 1 })
                    .sum::<usize>()
                    + usize::from(last_on_caller)
            }
            Impl::Pipeliner => {
                let first = usize::from(groups[0].works.len() > 1);
                first + groups[1..].iter().map(|g| g.replicas).sum::<usize>()
            }
        }
    }

    /// Run `items` items through `shape`; returns items per second and the
    /// cost per item.
    pub fn run(self, shape: &Shape, items: usize) -> (f64, PerItem) {
        let mut done = 0;
        let r = timed(items, || {
            done = match self {
                Impl::Tidepool => run_tidepool(shape, items, false),
                Impl::TidepoolPooled => run_tidepool(shape, items, true),
                Impl::TidepoolTyped => run_typed(shape, items),
                Impl::Crossbeam => run_crossbeam(shape, items),
                Impl::Pariter => run_pariter(shape, items),
                Impl::Pipeliner => run_pipeliner(shape, items),
            }
        });
        assert_eq!(done, items, "{} lost items", self.name());
        r
    }
}

fn run_tidepool(shape: &Shape, items: usize, pooled: bool) -> usize {
    use tidepool_pipeline::{Context, Flow, Order, Pipeline};
    let src = shape.stages[0].work;
    assert!(!shape.stages[0].then, "the source starts the first group");
    let mut b = Pipeline::builder(shape.name)
        .buffers(shape.in_flight, || vec![0u64; ITEM_WORDS])
        .source(
            "read",
            move |buf: &mut Vec<u64>, cx: &Context| -> Result<Flow, tidepool_pipeline::BoxError> {
                work(src, buf);
                Ok(if cx.round() + 1 >= items as u64 {
                    Flow::Last
                } else {
                    Flow::More
                })
            },
        );
    // Threads of the group the latest stage joined.
    let mut group_replicas = 1;
    for s in &shape.stages[1..] {
        let w = s.work;
        let f = move |buf: &mut Vec<u64>, _: &Context| -> Result<(), tidepool_pipeline::BoxError> {
            work(w, buf);
            Ok(())
        };
        if !s.then {
            group_replicas = s.replicas;
        }
        b = if s.then && group_replicas > 1 {
            b.then_each(s.name, move || f)
        } else if s.then {
            b.then(s.name, f)
        } else if s.replicas > 1 {
            b.replicated(s.name, s.replicas, move || f)
                .order(Order::Unordered)
        } else {
            b.stage(s.name, f)
        };
    }
    if pooled {
        b = b.pooled();
    }
    let report = b
        .build()
        .expect("valid shape")
        .run()
        .expect("no stage fails");
    if std::env::var_os("PIPELINE_BENCH_REPORT").is_some() {
        eprintln!("{}", report.to_table());
    }
    report.stages.last().map_or(0, |s| s.items as usize)
}

/// The same stages as [`run_tidepool`] with typed stages: the source makes
/// each item (as the iterator peers' sources do), every stage takes it and
/// hands it on, the last one consumes it.
fn run_typed(shape: &Shape, items: usize) -> usize {
    use tidepool_pipeline::{Order, Pipeline, Typed};
    type Item = Vec<u64>;
    let src = shape.stages[0].work;
    let mut made = 0;
    let mut t: Typed<Item> = Pipeline::typed(shape.name)
        .source("read", move || {
            if made == items {
                return Ok(None);
            }
            made += 1;
            let mut v = vec![0u64; ITEM_WORDS];
            work(src, &mut v);
            Ok(Some(v))
        })
        .buffers(shape.in_flight);
    let n = shape.stages.len();
    let mut group_replicas = 1;
    for s in &shape.stages[1..n - 1] {
        let w = s.work;
        let f = move |mut v: Item| {
            work(w, &mut v);
            Ok(v)
        };
        if !s.then {
            group_replicas = s.replicas;
        }
        t = if s.then && group_replicas > 1 {
            t.then_each(s.name, move || f)
        } else if s.then {
            t.then(s.name, f)
        } else if s.replicas > 1 {
            t.replicated(s.name, s.replicas, move || f)
                .order(Order::Unordered)
        } else {
            t.stage(s.name, f)
        };
    }
    let last = shape.stages[n - 1];
    let w = last.work;
    let f = move |mut v: Item| {
        work(w, &mut v);
        Ok(())
    };
    if !last.then {
        group_replicas = last.replicas;
    }
    let t = if last.then && group_replicas > 1 {
        t.then_each(last.name, move || f)
    } else if last.then {
        t.then(last.name, f)
    } else if last.replicas > 1 {
        t.replicated(last.name, last.replicas, move || f)
            .order(Order::Unordered)
    } else {
        t.stage(last.name, f)
    };
    let ((), report) = t
        .build()
        .expect("valid shape")
        .run()
        .expect("no stage fails");
    // A typed source ends with an empty last buffer (`Flow::End`), which
    // every stage passes on too.
    report.stages.last().map_or(0, |s| s.items as usize - 1)
}

fn run_crossbeam(shape: &Shape, items: usize) -> usize {
    use crossbeam_channel::bounded;
    let groups = groups(shape);
    let n = groups.len();
    let cap = shape.in_flight / n.max(1);
    std::thread::scope(|scope| {
        let (tx0, mut rx) = bounded::<Vec<u64>>(cap);
        let src = &groups[0];
        scope.spawn(move || {
            for _ in 0..items {
                let mut v = vec![0u64; ITEM_WORDS];
                src.work(&mut v);
                if tx0.send(v).is_err() {
                    return;
                }
            }
        });
        for g in &groups[1..n - 1] {
            let (tx, next) = bounded::<Vec<u64>>(cap);
            for _ in 0..g.replicas {
                let (rx, tx) = (rx.clone(), tx.clone());
                scope.spawn(move || {
                    for mut v in rx {
                        g.work(&mut v);
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                });
            }
            rx = next;
        }
        // The sink group: on this thread, or on its replicas' threads (a
        // fused replicated sink), each counting what it finished.
        let sink = &groups[n - 1];
        let drain = move |rx: crossbeam_channel::Receiver<Vec<u64>>| {
            let mut count = 0;
            for mut v in rx {
                sink.work(&mut v);
                count += 1;
            }
            count
        };
        if sink.replicas == 1 {
            return drain(rx);
        }
        let hs: Vec<_> = (0..sink.replicas)
            .map(|_| {
                let rx = rx.clone();
                scope.spawn(move || drain(rx))
            })
            .collect();
        drop(rx);
        hs.into_iter().map(|h| h.join().expect("no panic")).sum()
    })
}

/// The iterator peers' source stage: `items` fresh items, each filled by
/// `works`.
fn source(works: Vec<Work>, items: usize) -> Box<dyn Iterator<Item = Vec<u64>> + Send> {
    Box::new((0..items).map(move |_| {
        let mut v = vec![0u64; ITEM_WORDS];
        for &w in &works {
            work(w, &mut v);
        }
        v
    }))
}

/// A map of a group's stage functions, back to back.
fn fused(works: Vec<Work>) -> impl Fn(Vec<u64>) -> Vec<u64> + Clone + Send + Sync + 'static {
    move |mut v| {
        for &w in &works {
            work(w, &mut v);
        }
        v
    }
}

fn run_pariter(shape: &Shape, items: usize) -> usize {
    use pariter::IteratorExt;
    let groups = groups(shape);
    let mut it = source(groups[0].works.clone(), items);
    for g in &groups[1..] {
        let f = fused(g.works.clone());
        it = if g.replicas > 1 {
            Box::new(
                it.parallel_map_custom(|o| o.threads(g.replicas).buffer_size(shape.in_flight), f),
            )
        } else {
            // readahead runs everything upstream on its own thread.
            Box::new(
                it.readahead_custom(|o| o.buffer_size(shape.in_flight / groups.len()))
                    .map(f),
            )
        };
    }
    it.count()
}

/// pipeliner's workers pull their input iterator themselves (under a
/// lock), so the source's work runs on the first map's threads: the first
/// group's later stages are that map, and a group of the source alone adds
/// no thread.
fn run_pipeliner(shape: &Shape, items: usize) -> usize {
    use pipeliner::Pipeline;
    let groups = groups(shape);
    let mut it = source(vec![shape.stages[0].work], items);
    let mut maps: Vec<(Vec<Work>, usize)> = vec![(groups[0].works[1..].to_vec(), 1)];
    maps.extend(groups[1..].iter().map(|g| (g.works.clone(), g.replicas)));
    for (works, replicas) in maps.into_iter().filter(|(w, _)| !w.is_empty()) {
        it = Box::new(
            it.with_threads(replicas)
                .out_buffer(shape.in_flight / groups.len())
                .map(fused(works)),
        );
    }
    it.count()
}

/// One implementation's result on one shape.
#[derive(Debug, Clone, Serialize)]
pub struct ImplResult {
    /// The implementation.
    #[serde(rename = "impl")]
    pub imp: String,
    /// Median items per second over the repeats.
    pub items_per_sec: f64,
    /// Every repeat's items per second.
    pub repeats: Vec<f64>,
    /// Median over the bound.
    pub of_bound: f64,
    /// Median CPU time of the process per item, microseconds (the stages'
    /// own work included: compare it with the shape's compute per item).
    pub cpu_us_per_item: f64,
    /// Median context switches of the process per item (every thread's).
    pub switches_per_item: f64,
    /// Median voluntary context switches per item (waits: parks, sleeps).
    pub voluntary_switches_per_item: f64,
    /// Median over the repeats of items/s over [`decoupled`]'s in the same
    /// repeat: the share of the no-hand-off throughput this row kept.
    pub of_decoupled: f64,
    /// Threads that ran the stage work ([`Impl::threads`]).
    pub threads: usize,
    /// A tidepool row against each peer, paired per repeat (this row's
    /// items/s over the peer's in the same repeat); empty for a peer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vs_peers: Vec<VsPeer>,
    /// The typed row against the buffer row (thread per stage), paired per
    /// repeat: the typed layer's cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_buffer: Option<VsPeer>,
}

/// One tidepool row against one peer ([`crate::paired`]).
#[derive(Debug, Clone, Serialize)]
pub struct VsPeer {
    /// The peer.
    pub peer: String,
    /// Its per-repeat ratio, summarised.
    #[serde(flatten)]
    pub ratio: Paired,
    /// What the interval says: `level` when it includes 1.0, `ahead` or
    /// `behind` when all of it lies on one side, `too few repeats` without
    /// one (fewer than 6 repeats).
    pub verdict: &'static str,
}

/// The verdict of a paired ratio's 95% interval ([`VsPeer::verdict`]).
pub fn verdict(p: &Paired) -> &'static str {
    match p.ci95 {
        None => "too few repeats",
        Some((lo, _)) if lo > 1.0 => "ahead",
        Some((_, hi)) if hi < 1.0 => "behind",
        Some(_) => "level",
    }
}

/// Row `row` against row `other`, paired per repeat.
fn versus(impls: &[Impl], samples: &[Vec<f64>], row: usize, other: usize) -> Option<VsPeer> {
    let ratios: Vec<f64> = samples[row]
        .iter()
        .zip(&samples[other])
        .filter_map(|(&a, &b)| ratio_higher_better(a, b))
        .collect();
    let ratio = paired(&ratios)?;
    Some(VsPeer {
        peer: impls[other].name().into(),
        verdict: verdict(&ratio),
        ratio,
    })
}

/// Each of tidepool's rows against each peer: `samples[i][r]` is
/// implementation `i`'s items/s in repeat `r`.
fn vs_peers(impls: &[Impl], samples: &[Vec<f64>], row: usize) -> Vec<VsPeer> {
    if impls[row].is_peer() {
        return Vec::new();
    }
    (0..impls.len())
        .filter(|&j| impls[j].is_peer())
        .filter_map(|j| versus(impls, samples, row, j))
        .collect()
}

/// One shape's results.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    /// The shape.
    pub name: String,
    /// Its throughput bound: the shape's limit on this machine's cores
    /// ([`bound`]), with each blocking stage's cost the median of its
    /// measurements over the repeats.
    pub bound_items_per_sec: f64,
    /// The [`oracle`]'s median items per second (interleaved with the
    /// implementations): what the CPUs this process got did with the
    /// shape's work and no hand-off at all. Not a bound on a loaded
    /// machine (threads that block get a larger share of the CPUs than
    /// threads that never do), but it shows how much CPU the run got.
    pub oracle_items_per_sec: f64,
    /// Every repeat's oracle items per second.
    pub oracle_repeats: Vec<f64>,
    /// The oracle's median CPU time per item, µs: the shape's work itself.
    pub oracle_cpu_us_per_item: f64,
    /// The oracle's median context switches per item.
    pub oracle_switches_per_item: f64,
    /// [`decoupled`]'s median items per second: the shape's groups on
    /// their own threads with no hand-off (run at the start of each
    /// repeat, before the balanced order).
    pub decoupled_items_per_sec: f64,
    /// Every repeat's decoupled items per second.
    pub decoupled_repeats: Vec<f64>,
    /// tidepool-pipeline over the best peer, per repeat (each repeat runs
    /// all of them back to back, in a balanced order).
    pub tidepool_over_best_peer: Vec<f64>,
    /// One entry per implementation.
    pub results: Vec<ImplResult>,
}

/// The whole benchmark's output.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineBench {
    /// One entry per shape.
    pub scenarios: Vec<ScenarioResult>,
    /// Items per run.
    pub items: usize,
    /// Items in flight (buffers, queue capacities).
    pub in_flight: usize,
    /// Repeats per implementation and shape.
    pub repeats: usize,
    /// Logical CPUs.
    pub cores: usize,
    /// The 1-minute load average before the run.
    pub load_before: Option<f64>,
    /// The 1-minute load average after the run.
    pub load_after: Option<f64>,
    /// The busy loop's error, in percent, before and after the run: the
    /// median CPU time of a 2 ms spin against 2 ms (as long as the
    /// calibration's own trials, so that both see the same interrupts;
    /// a 20 µs spin, rarely interrupted, reads ~5% fast). The loop
    /// is calibrated once, at the start; on this VM it once came out
    /// 20–30% off for a whole run (cause not found), and then
    /// the compute shapes' bound (and every "% of bound") is off by as
    /// much. The ratios between
    /// implementations are not.
    pub spin_error_pct: [f64; 2],
}

/// The busy loop's error on a 2 ms spin, in percent.
fn spin_error_pct() -> f64 {
    BusyLoop::global()
        .verify(Duration::from_millis(2), 15)
        .error_pct
}

/// Beyond this |error|, the table warns that "% of bound" is off.
const SPIN_ERROR_WARN_PCT: f64 = 5.0;

/// Run every shape × implementation `repeats` times, interleaved: each
/// repeat runs them back to back in the order [`balanced_order`] gives, so
/// that over the repeats each one follows every other equally often, each
/// on a thread of its own.
///
/// `only` names the shapes to run (empty: all).
pub fn run(
    items: usize,
    in_flight: usize,
    repeats: usize,
    impls: &[Impl],
    only: &[String],
    quiet: bool,
) -> PipelineBench {
    BusyLoop::global(); // calibrated here, outside any measurement
    let spin_before = spin_error_pct();
    let cores = tidepool::sys::cores();
    let load_before = tidepool::sys::load_average().map(|l| l[0]);
    let mut scenarios = Vec::new();
    for mut shape in shapes(cores) {
        shape.in_flight = in_flight;
        if !only.is_empty() && !only.iter().any(|n| n == shape.name) {
            continue;
        }
        let blocks: Vec<u64> = shape
            .stages
            .iter()
            .filter_map(|s| match s.work {
                Work::Block(us) => Some(us),
                Work::Spin(_) => None,
            })
            .collect();
        let mut block_cost: std::collections::HashMap<u64, Vec<f64>> = Default::default();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
        let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
        let mut oracle_ips = Vec::new();
        let mut oracle_cpu = Vec::new();
        let mut sw: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
        let mut vol: Vec<Vec<f64>> = vec![Vec::new(); impls.len()];
        let mut oracle_sw = Vec::new();
        let mut decoupled_ips = Vec::new();
        // Warm-up: one short run each.
        for imp in impls {
            imp.run(&shape, items / 10 + 1);
        }
        // Each repeat measures the blocking calls' cost again, runs the
        // decoupled groups, then the oracle and every implementation once,
        // in a balanced order.
        for rep in 0..repeats {
            for &us in &blocks {
                let c = measure_block(us).as_secs_f64();
                block_cost.entry(us).or_default().push(c);
            }
            decoupled_ips.push(decoupled(&shape, items));
            for i in balanced_order(impls.len() + 1, rep) {
                if i == impls.len() {
                    let (ips, cost) = oracle(&shape, items);
                    oracle_cpu.push(cost.cpu_us);
                    oracle_sw.push(cost.switches);
                    if !quiet {
                        eprintln!(
                            "  {:<26} {:<18} repeat {}/{repeats}: {ips:>9.0} items/s",
                            shape.name,
                            "oracle",
                            rep + 1
                        );
                    }
                    oracle_ips.push(ips);
                    continue;
                }
                let (ips, cost) = impls[i].run(&shape, items);
                cpu[i].push(cost.cpu_us);
                sw[i].push(cost.switches);
                vol[i].push(cost.voluntary);
                if !quiet {
                    eprintln!(
                        "  {:<26} {:<18} repeat {}/{repeats}: {ips:>9.0} items/s",
                        shape.name,
                        impls[i].name(),
                        rep + 1,
                    );
                }
                samples[i].push(ips);
            }
        }
        let block_median: std::collections::HashMap<u64, f64> = block_cost
            .iter()
            .map(|(&us, v)| (us, median(v.iter().copied()).unwrap_or(0.0)))
            .collect();
        let structural = bound(&shape, cores, |us| {
            Duration::from_secs_f64(block_median[&us])
        });
        let oracle_median = median(oracle_ips.iter().copied()).unwrap_or(0.0);
        let bound = structural;
        let tp = impls.iter().position(|&i| i == Impl::Tidepool);
        let tidepool_over_best_peer: Vec<f64> = match tp {
            Some(t) if impls.iter().any(|i| i.is_peer()) => (0..repeats)
                .map(|r| {
                    let best = (0..impls.len())
                        .filter(|&i| impls[i].is_peer())
                        .map(|i| samples[i][r])
                        .fold(0.0, f64::max);
                    samples[t][r] / best
                })
                .collect(),
            _ => Vec::new(),
        };
        let vs: Vec<Vec<VsPeer>> = (0..impls.len())
            .map(|i| vs_peers(impls, &samples, i))
            .collect();
        let vs_buffer: Vec<Option<VsPeer>> = (0..impls.len())
            .map(|i| match tp {
                Some(t) if impls[i] == Impl::TidepoolTyped => versus(impls, &samples, i, t),
                _ => None,
            })
            .collect();
        let results = impls
            .iter()
            .zip(samples)
            .zip(cpu)
            .zip(sw)
            .zip(vol)
            .zip(vs)
            .zip(vs_buffer)
            .map(|((((((imp, v), c), w), vo), vs_peers), vs_buffer)| {
                let m = median(v.iter().copied()).unwrap_or(0.0);
                let of_decoupled =
                    median(v.iter().zip(&decoupled_ips).map(|(a, d)| a / d)).unwrap_or(0.0);
                ImplResult {
                    imp: imp.name().into(),
                    items_per_sec: m,
                    repeats: v,
                    of_bound: m / bound,
                    cpu_us_per_item: median(c.iter().copied()).unwrap_or(0.0),
                    switches_per_item: median(w.iter().copied()).unwrap_or(0.0),
                    voluntary_switches_per_item: median(vo.iter().copied()).unwrap_or(0.0),
                    of_decoupled,
                    threads: imp.threads(&shape, cores),
                    vs_peers,
                    vs_buffer,
                }
            })
            .collect();
        scenarios.push(ScenarioResult {
            name: shape.name.into(),
            bound_items_per_sec: bound,
            oracle_items_per_sec: oracle_median,
            oracle_repeats: oracle_ips,
            oracle_cpu_us_per_item: median(oracle_cpu.iter().copied()).unwrap_or(0.0),
            oracle_switches_per_item: median(oracle_sw.iter().copied()).unwrap_or(0.0),
            decoupled_items_per_sec: median(decoupled_ips.iter().copied()).unwrap_or(0.0),
            decoupled_repeats: decoupled_ips,
            tidepool_over_best_peer,
            results,
        });
    }
    PipelineBench {
        scenarios,
        items,
        in_flight,
        repeats,
        cores,
        load_before,
        load_after: tidepool::sys::load_average().map(|l| l[0]),
        spin_error_pct: [spin_before, spin_error_pct()],
    }
}

/// The readable table.
pub fn table(b: &PipelineBench) -> String {
    let mut out = format!(
        "pipeline: {} items per run, {} in flight, median of {} interleaved repeats, {} cores, load {:.2} → {:.2}\n\
         (\"% of bound\" is reported, not a goal; a row is ahead of or behind a peer only when the 95% interval of its paired per-repeat ratios lies on one side of 1, else level)\n",
        b.items,
        b.in_flight,
        b.repeats,
        b.cores,
        b.load_before.unwrap_or(f64::NAN),
        b.load_after.unwrap_or(f64::NAN)
    );
    let [before, after] = b.spin_error_pct;
    if before.abs().max(after.abs()) > SPIN_ERROR_WARN_PCT {
        out += &format!(
            "warning: the busy loop is {:+.1}% / {:+.1}% off its calibration (CPU time of a 2 ms spin, before / after the run): the compute shapes' \"% of bound\" is off by as much; ratios between implementations are not\n",
            before, after
        );
    }
    for s in &b.scenarios {
        let ratios = &s.tidepool_over_best_peer;
        // Only when the thread-per-stage row and a peer both ran.
        let over_best = median(ratios.iter().copied()).map_or(String::new(), |m| {
            format!(
                "; tidepool / best peer per repeat: median {m:.3}, {:.3}..{:.3}",
                ratios.iter().copied().fold(f64::INFINITY, f64::min),
                ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )
        });
        out += &format!(
            "\n{} (bound {:.0} items/s; decoupled {:.0} items/s; oracle {:.0} items/s, {:.1} µs CPU/item, {:.2} switches/item{over_best})\n",
            s.name,
            s.bound_items_per_sec,
            s.decoupled_items_per_sec,
            s.oracle_items_per_sec,
            s.oracle_cpu_us_per_item,
            s.oracle_switches_per_item,
        );
        let best_peer = s
            .results
            .iter()
            .filter(|r| !r.imp.starts_with("tidepool-pipeline"))
            .map(|r| r.items_per_sec)
            .fold(0.0, f64::max);
        for r in &s.results {
            let lo = r.repeats.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.repeats.iter().copied().fold(0.0, f64::max);
            out += &format!(
                "  {:<24} {:>2} threads {:>9.0} items/s  {:>5.1}% of bound  {:>5.1}% of decoupled  {:>6.1} µs CPU/item  {:>5.2} switches/item  (range {:.0}..{:.0}){}\n",
                r.imp,
                r.threads,
                r.items_per_sec,
                100.0 * r.of_bound,
                100.0 * r.of_decoupled,
                r.cpu_us_per_item,
                r.switches_per_item,
                lo,
                hi,
                if r.imp.starts_with("tidepool-pipeline") && best_peer > 0.0 {
                    format!("  {:.3}x best peer", r.items_per_sec / best_peer)
                } else {
                    String::new()
                }
            );
            for v in r.vs_peers.iter().chain(&r.vs_buffer) {
                let p = &v.ratio;
                let ci = p.ci95.map_or("too few repeats for 95%".into(), |(lo, hi)| {
                    format!("95% CI {lo:.3}–{hi:.3}")
                });
                out += &format!(
                    "      ÷ {:<24} per repeat: median {:.3} ({ci}): {}; won {}, lost {}; sign test p {:.3}\n",
                    v.peer, p.median, v.verdict, p.won, p.lost, p.sign_p
                );
            }
        }
    }
    out
}

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
