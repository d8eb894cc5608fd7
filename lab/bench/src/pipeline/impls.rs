//! The implementations under test: tidepool-pipeline's modes and typed API, and the peers.

use super::*;

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
