//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tidepool_pipeline::{BoxError, Builder, Context, Flow, Order, Pipeline, Stage};

/// A buffer that counts how many of its kind exist.
pub struct Counted {
    pub round: u64,
    pub value: u64,
    pub path: Vec<&'static str>,
    live: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Makes [`Counted`] buffers and tracks them.
#[derive(Clone, Default)]
pub struct Buffers {
    pub live: Arc<AtomicUsize>,
    pub made: Arc<AtomicUsize>,
}

impl Buffers {
    pub fn maker(&self) -> impl FnMut() -> Counted + Send + 'static {
        let b = self.clone();
        move || {
            b.made.fetch_add(1, Ordering::SeqCst);
            b.live.fetch_add(1, Ordering::SeqCst);
            Counted {
                round: u64::MAX,
                value: 0,
                path: Vec::with_capacity(8),
                live: b.live.clone(),
            }
        }
    }
}

/// A source of `n` rounds: value = round.
pub fn counter(n: u64) -> impl FnMut(&mut Counted, &Context) -> Result<Flow, BoxError> + Send {
    move |b, cx| {
        b.round = cx.round();
        b.value = cx.round();
        b.path.clear();
        Ok(if cx.round() + 1 >= n {
            Flow::Last
        } else {
            Flow::More
        })
    }
}

/// A source of `n` rounds (none for 0) whose values are the rounds
/// scrambled, so a lost or repeated buffer changes the output.
pub fn scrambled(n: u64) -> impl FnMut(&mut Counted, &Context) -> Result<Flow, BoxError> + Send {
    move |b, cx| {
        b.round = cx.round();
        b.value = cx.round().wrapping_mul(0x9e37_79b9) >> 3;
        Ok(if n == 0 {
            Flow::End
        } else if cx.round() + 1 == n {
            Flow::Last
        } else {
            Flow::More
        })
    }
}

/// Records every last-buffer notice: (stage, pipeline, empty).
#[derive(Clone, Default)]
pub struct Notices(pub Arc<Mutex<Vec<(String, String, bool)>>>);

impl Notices {
    pub fn see(&self, cx: &Context) {
        if cx.is_last() {
            self.0.lock().unwrap().push((
                cx.stage().to_string(),
                cx.pipeline().to_string(),
                cx.is_empty(),
            ));
        }
    }
    pub fn of(&self, stage: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|n| n.0 == stage)
            .count()
    }
}

/// A little deterministic work that varies by round (no sleeping).
pub fn spin(round: u64, salt: u64) -> u64 {
    let n = (round.wrapping_mul(2654435761).wrapping_add(salt) % 7) * 2000;
    let mut x = round;
    for i in 0..n {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    x
}

/// `b` in pooled mode on `workers` workers, or thread per stage (`None`).
pub fn mode<B: Send + 'static>(b: Builder<B>, workers: Option<usize>) -> Builder<B> {
    match workers {
        Some(n) => b.pooled_threads(n),
        None => b,
    }
}

/// A stage that does nothing.
pub fn pass(_: &mut Counted, _: &Context) -> Result<(), BoxError> {
    Ok(())
}

/// What `build` refuses `builder` with.
pub fn refused(builder: Builder<Counted>) -> String {
    builder.build().err().expect("refused").to_string()
}

/// Logs each stage instance's `init` and `cleanup`, with the thread they ran on.
struct Lifecycle(&'static str, Arc<Mutex<Vec<(String, u64)>>>);

impl Lifecycle {
    fn log(&self, what: &str) {
        self.1.lock().unwrap().push((
            format!("{what} {}", self.0),
            tidepool_pipeline::sys::thread_id().expect("a thread id on Linux"),
        ));
    }
}

impl Stage<Counted> for Lifecycle {
    fn init(&mut self) -> Result<(), BoxError> {
        self.log("init");
        Ok(())
    }
    fn process(&mut self, _: &mut Counted, _: &Context) -> Result<(), BoxError> {
        Ok(())
    }
    fn cleanup(&mut self) -> Result<(), BoxError> {
        self.log("cleanup");
        Ok(())
    }
}

/// Run read → a → b (2 replicas), 10 rounds, configured by `mode`; the
/// stages' `init`/`cleanup` log: ("init a", thread id), ...
pub fn lifecycle(mode: impl FnOnce(Builder<Counted>) -> Builder<Counted>) -> Vec<(String, u64)> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let b = Pipeline::builder("lifecycle")
        .buffers(2, Buffers::default().maker())
        .source("read", counter(10))
        .stage("a", Lifecycle("a", log.clone()))
        .replicated("b", 2, {
            let l = log.clone();
            move || Lifecycle("b", l.clone())
        });
    mode(b).build().unwrap().run().unwrap();
    let log = log.lock().unwrap().clone();
    log
}

/// xorshift: the tests' only randomness, seeded per case (the shape of a
/// generated pipeline comes from one seed).
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    pub fn order(&mut self) -> Order {
        if self.below(2) == 0 {
            Order::Ordered
        } else {
            Order::Unordered
        }
    }
}
