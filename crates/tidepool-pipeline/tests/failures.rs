//! Errors and panics at random points of random pipelines: every run ends,
//! with exactly the injected failure, every thread joined and every buffer
//! dropped. Its own test binary, since it silences the panic hook.
//!
//! Shapes: linear, replicated, unordered with repeat, route fork/join,
//! self-sizing, broadcast with a route fork nested in a branch, a replicated
//! shared stage, a single shared stage; and all but the self-sizing one
//! pooled (`Builder::pooled_threads`, 1 to 4 workers).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{counter, spin, Buffers, Counted, Rng};
use tidepool::policy::PolicySpec;
use tidepool_pipeline::{
    run_all, BoxError, Builder, Context, Order, Pipeline, PipelineError, SharedStage, Stage, Step,
};

type R = Result<(), BoxError>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Error,
    Panic,
    InitError,
    CleanupError,
}

#[derive(Clone)]
struct Fault {
    stage: &'static str,
    round: u64,
    kind: Kind,
    fired: Arc<AtomicBool>,
}

/// A stage that works a little, and fails as told.
struct Worker {
    name: &'static str,
    fault: Fault,
}

impl Stage<Counted> for Worker {
    fn init(&mut self) -> R {
        if self.fault.stage == self.name && self.fault.kind == Kind::InitError {
            self.fault.fired.store(true, Ordering::SeqCst);
            return Err(format!("{} cannot start", self.name).into());
        }
        Ok(())
    }
    fn process(&mut self, b: &mut Counted, cx: &Context) -> R {
        b.value = spin(cx.round(), b.value);
        let f = &self.fault;
        if f.stage == self.name && cx.round() == f.round && !cx.is_empty() {
            match f.kind {
                Kind::Error => {
                    f.fired.store(true, Ordering::SeqCst);
                    return Err("injected".into());
                }
                Kind::Panic => {
                    f.fired.store(true, Ordering::SeqCst);
                    panic!("injected panic");
                }
                _ => {}
            }
        }
        Ok(())
    }
    fn cleanup(&mut self) -> R {
        if self.fault.stage == self.name && self.fault.kind == Kind::CleanupError {
            self.fault.fired.store(true, Ordering::SeqCst);
            return Err("cleanup failed".into());
        }
        Ok(())
    }
}

const STAGES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

fn w(name: &'static str, f: &Fault) -> Worker {
    Worker {
        name,
        fault: f.clone(),
    }
}

/// Build case `shape` with the fault; returns the pipelines to run.
fn pipelines(
    shape: u64,
    rounds: u64,
    buffers: usize,
    f: &Fault,
    bufs: &Buffers,
    pooled: Option<usize>,
) -> Vec<Pipeline<Counted>> {
    let base = |name: &str| {
        Pipeline::builder(name)
            .buffers(buffers, bufs.maker())
            .source("read", counter(rounds))
    };
    let f2 = f.clone();
    let mode = |p: Builder<Counted>| match pooled {
        Some(n) => p.pooled_threads(n),
        None => p,
    };
    let p = match shape {
        0 => base("linear")
            .stage("a", w("a", f))
            .stage("b", w("b", f))
            .then("c", w("c", f)),
        1 => base("replicated")
            .stage("a", w("a", f))
            .replicated("b", 3, move || w("b", &f2))
            .stage("c", w("c", f)),
        2 => {
            let f3 = f.clone();
            base("unordered")
                .stage("a", w("a", f))
                .replicated("b", 2, move || w("b", &f2))
                .order(Order::Unordered)
                .then_each("e", move || w("e", &f3))
                .stage("c", w("c", f))
                .then("d", w("d", f))
                .repeat(2)
        }
        3 => base("fork")
            .stage("a", w("a", f))
            .fork(
                |b: &Counted, _: &Context| (b.round % 3) as usize % 2,
                vec![
                    Builder::branch()
                        .stage("b", w("b", f))
                        .stage("c", w("c", f)),
                    Builder::branch().replicated("d", 2, move || w("d", &f2)),
                ],
                Order::Ordered,
            )
            .stage("e", w("e", f)),
        4 => base("sized")
            .stage("a", w("a", f))
            .sized("b", PolicySpec::parse("auto").unwrap(), 4, move || {
                w("b", &f2)
            })
            .stage("c", w("c", f)),
        5 => {
            let f3 = f.clone();
            base("nested")
                .stage("a", w("a", f))
                .broadcast(
                    vec![
                        Builder::branch().stage("b", w("b", f)),
                        Builder::branch().stage("c", w("c", f)).fork(
                            |b: &Counted, _: &Context| (b.round % 3) as usize % 2,
                            vec![
                                Builder::branch().stage("d", w("d", f)),
                                Builder::branch().replicated("f", 2, move || w("f", &f3)),
                            ],
                            Order::Unordered,
                        ),
                    ],
                    |from: &Counted, to: &mut Counted, _| {
                        to.round = from.round;
                        to.value = from.value;
                    },
                    |into: &mut Counted, from: &Counted, _| -> R {
                        into.value ^= from.value;
                        Ok(())
                    },
                )
                .stage("e", w("e", f))
        }
        6 => {
            let f3 = f.clone();
            let shared = SharedStage::replicated("f", 3, Order::Ordered, None, move || w("f", &f3));
            let one = base("one").stage("a", w("a", f)).shared(&shared);
            let two = Pipeline::builder("two")
                .buffers(buffers, bufs.maker())
                .source("read2", counter(rounds / 3 + 1))
                .shared(&shared)
                .stage("b", w("b", f))
                .replicated("c", 2, move || w("c", &f2))
                .order(Order::Unordered);
            return vec![mode(one).build().unwrap(), mode(two).build().unwrap()];
        }
        _ => {
            let shared = SharedStage::new("f", w("f", f));
            let one = base("one")
                .stage("a", w("a", f))
                .shared(&shared)
                .stage("b", w("b", f));
            let two = Pipeline::builder("two")
                .buffers(buffers, bufs.maker())
                .source("read2", counter(rounds / 2 + 1))
                .shared(&shared)
                .stage("c", w("c", f));
            return vec![mode(one).build().unwrap(), mode(two).build().unwrap()];
        }
    };
    vec![mode(p).build().unwrap()]
}

/// Case `case`; pooled cases run shapes 0–3 and 5–7 (self-sizing stages
/// are refused pooled) on 1–4 workers.
fn check(case: u64, pooled: bool) -> Result<bool, String> {
    let mut rng = Rng(case.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let shape = if pooled {
        [0, 1, 2, 3, 5, 6, 7][(case % 7) as usize]
    } else {
        case % 8
    };
    let workers = pooled.then(|| 1 + (case / 7 % 4) as usize);
    let rounds = 1 + rng.below(60);
    let buffers = 3 + rng.below(4) as usize;
    let kind = [
        Kind::Error,
        Kind::Panic,
        Kind::Error,
        Kind::Panic,
        Kind::InitError,
        Kind::CleanupError,
    ][rng.below(6) as usize];
    let fault = Fault {
        stage: STAGES[rng.below(6) as usize],
        round: rng.below(rounds + 3),
        kind,
        fired: Arc::default(),
    };
    let bufs = Buffers::default();
    let ps = pipelines(shape, rounds, buffers, &fault, &bufs, workers);
    let result: Result<_, PipelineError> = run_all(ps);
    let fired = fault.fired.load(Ordering::SeqCst);
    let what = format!("case {case}: shape {shape} (pooled: {workers:?}), {rounds} rounds, {buffers} buffers, {kind:?} in `{}` at round {}", fault.stage, fault.round);
    let live = bufs.live.load(Ordering::SeqCst);
    if live != 0 {
        return Err(format!("{what}: {live} buffers still alive after the run"));
    }
    match (result, fired) {
        (Ok(_), false) => Ok(false),
        (Ok(_), true) => Err(format!("{what}: the fault fired but the run succeeded")),
        (Err(e), false) => Err(format!("{what}: failed without a fault: {e}")),
        (Err(e), true) => {
            let step = match kind {
                Kind::Error | Kind::Panic => Step::Process,
                Kind::InitError => Step::Init,
                Kind::CleanupError => Step::Cleanup,
            };
            let round = matches!(kind, Kind::Error | Kind::Panic).then_some(fault.round);
            if e.stage != fault.stage
                || e.step != step
                || e.round != round
                || e.is_panic() != (kind == Kind::Panic)
            {
                Err(format!(
                    "{what}: wrong error: {e} ({:?}, {:?})",
                    e.step, e.round
                ))
            } else {
                Ok(true)
            }
        }
    }
}

#[test]
fn any_failure_at_any_point_ends_the_run_with_that_failure() {
    stress(false);
}

#[test]
fn pooled_any_failure_at_any_point_ends_the_run_with_that_failure() {
    stress(true);
}

fn stress(pooled: bool) {
    std::panic::set_hook(Box::new(|_| {}));
    let cases: u64 = std::env::var("PIPELINE_STRESS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(800);
    let mut fired = 0;
    for case in 0..cases {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(check(case, pooled));
        });
        // Not a timing margin: a run of a few milliseconds that has not
        // ended after two minutes is hung.
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(f)) => fired += u64::from(f),
            Ok(Err(msg)) => panic!("{msg}"),
            Err(_) => panic!("case {case} hung"),
        }
    }
    // Most faults fall inside the stream: the test really fails runs.
    assert!(fired * 2 > cases, "only {fired} of {cases} faults fired");
}
