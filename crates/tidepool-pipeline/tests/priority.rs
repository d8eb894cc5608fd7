//! Priorities land on the stage's own threads, read back from the kernel.
#![cfg(target_os = "linux")]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{counter, Buffers, Counted};
use tidepool_pipeline::sys::{self, SchedClass};
use tidepool_pipeline::{BoxError, Context, Pipeline, PrioritySpec};

type R = Result<(), BoxError>;

/// (nice via getpriority, nice via /proc, policy via /proc) of the caller.
fn readings() -> (i32, i32, u32) {
    let (n, policy) = sys::proc_thread_stat().unwrap();
    (sys::nice().unwrap(), n, policy)
}

type Log = Arc<Mutex<Vec<(String, u64, (i32, i32, u32))>>>;

fn probe(log: &Log) -> impl FnMut(&mut Counted, &Context) -> R + Send + 'static {
    let log = log.clone();
    move |_, cx| {
        log.lock()
            .unwrap()
            .push((cx.stage().to_string(), cx.round(), readings()));
        Ok(())
    }
}

fn spec(s: &str) -> PrioritySpec {
    PrioritySpec::parse(s).unwrap()
}

/// Whether this process may lower a nice value (root with CAP_SYS_NICE).
fn may_raise_priority() -> bool {
    std::thread::spawn(|| sys::set_nice(1).is_ok() && sys::set_nice(0).is_ok())
        .join()
        .unwrap()
}

#[test]
fn fixed_priorities_apply_to_each_stages_own_threads() {
    let base = readings().0;
    let log: Log = Arc::default();
    let report = Pipeline::builder("fixed")
        .buffers(3, Buffers::default().maker())
        .source("read", counter(20))
        .stage("nice7", probe(&log))
        .priority(spec("nice:7"))
        .replicated("batch", 2, {
            let l = log.clone();
            move || probe(&l)
        })
        .priority(spec("batch:3"))
        .stage("idle", probe(&log))
        .priority(spec("idle"))
        .stage("plain", probe(&log))
        .build()
        .unwrap()
        .run()
        .unwrap();
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    let log = log.lock().unwrap();
    let of = |s: &str| {
        log.iter()
            .filter(|e| e.0 == s)
            .map(|e| e.2)
            .collect::<Vec<_>>()
    };
    assert!(
        of("nice7")
            .iter()
            .all(|&r| r == (7, 7, libc::SCHED_OTHER as u32)),
        "{:?}",
        of("nice7")
    );
    assert!(
        of("batch")
            .iter()
            .all(|&r| r == (3, 3, libc::SCHED_BATCH as u32)),
        "{:?}",
        of("batch")
    );
    assert!(
        of("idle").iter().all(|&r| r.2 == libc::SCHED_IDLE as u32),
        "{:?}",
        of("idle")
    );
    assert!(
        of("plain")
            .iter()
            .all(|&r| r == (base, base, libc::SCHED_OTHER as u32)),
        "{:?}",
        of("plain")
    );
    assert_eq!(of("nice7").len(), 20);
    // The test's own thread was not touched.
    assert_eq!(readings().0, base);
}

/// Stage `a` feeds `b`; `b` holds round 0 until `a` has processed round 3,
/// so `a` conveys round 2 onto a queue holding rounds 1 and 2 (a backup).
/// From round 6 on, `a` waits until `b` has taken everything before, so it
/// conveys onto an empty queue (the backup cleared).
fn backup_then_clear(policy: &str) -> Vec<(u64, i32)> {
    let a_done = Arc::new(AtomicU64::new(0));
    let b_done = Arc::new(AtomicU64::new(0));
    let (a1, a2, b1, b2) = (
        a_done.clone(),
        a_done.clone(),
        b_done.clone(),
        b_done.clone(),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    Pipeline::builder("adjust")
        .buffers(6, Buffers::default().maker())
        .source("read", counter(12))
        .stage("a", move |_: &mut Counted, cx: &Context| -> R {
            let r = cx.round();
            if r >= 6 {
                while b1.load(Ordering::SeqCst) < r {
                    std::thread::yield_now();
                }
            }
            s.lock().unwrap().push((r, sys::nice().unwrap()));
            a1.store(r + 1, Ordering::SeqCst);
            Ok(())
        })
        .priority(spec(policy))
        .stage("b", move |_: &mut Counted, cx: &Context| -> R {
            if cx.round() == 0 {
                while a2.load(Ordering::SeqCst) < 4 {
                    std::thread::yield_now();
                }
            }
            b2.store(cx.round() + 1, Ordering::SeqCst);
            Ok(())
        })
        .build()
        .unwrap()
        .run()
        .unwrap();
    let v = seen.lock().unwrap().clone();
    v
}

#[test]
fn dynamic_up_raises_nice_once_the_output_backs_up() {
    let seen = backup_then_clear("dynamic-up:5");
    assert_eq!(seen[0].1, seen[1].1, "no change before the backup");
    let base = seen[0].1;
    // The backup is seen when round 2 is conveyed: round 3 runs at +5.
    assert_eq!(seen[3].1, (base + 5).min(19), "{seen:?}");
    assert!(
        seen[3..].iter().all(|s| s.1 == seen[3].1),
        "never back down: {seen:?}"
    );
}

#[test]
fn dynamic_up_down_returns_when_the_output_clears() {
    let seen = backup_then_clear("dynamic-up-down:5");
    let base = seen[0].1;
    assert_eq!(seen[3].1, (base + 5).min(19), "{seen:?}");
    if may_raise_priority() {
        // Round 6 is conveyed onto an empty queue: round 7 runs at the
        // thread's starting nice again.
        assert_eq!(seen[7].1, base, "{seen:?}");
        assert!(seen[7..].iter().all(|s| s.1 == base), "{seen:?}");
    }
}

#[test]
fn a_refused_priority_is_reported_once_and_the_run_goes_on() {
    // Run from a thread without CAP_SYS_NICE (its pipeline threads inherit
    // that): what an ordinary user sees.
    let out = std::thread::spawn(|| {
        let dropped = sys::drop_cap_sys_nice();
        let base = readings().0;
        // Below the nice we run at (tests run under `nice -n -19` too), so
        // both are raises of priority, which need CAP_SYS_NICE.
        let raise = |by: i32| spec(&format!("nice:{}", (base - by).max(-20)));
        let log: Log = Arc::default();
        let report = Pipeline::builder("refused")
            .buffers(2, Buffers::default().maker())
            .source("read", counter(10))
            .stage("x", probe(&log))
            .priority(raise(5))
            .stage("y", probe(&log))
            .priority(raise(3))
            .build()
            .unwrap()
            .run()
            .unwrap();
        let log = log.lock().unwrap().clone();
        (dropped, base, report, log)
    })
    .join()
    .unwrap();
    let (dropped, base, report, log) = out;
    if dropped.is_err() && may_raise_priority() {
        eprintln!("skipped: cannot drop CAP_SYS_NICE here ({dropped:?})");
        return;
    }
    if base == -20 {
        eprintln!("skipped: running at nice -20, no priority above it to refuse");
        return;
    }
    assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
    assert!(
        report.notes[0].contains("CAP_SYS_NICE"),
        "{}",
        report.notes[0]
    );
    assert_eq!(log.len(), 20, "the run went on");
    assert!(
        log.iter().all(|e| e.2 .0 == base),
        "nice unchanged: {log:?}"
    );
}

#[test]
fn a_thread_can_move_between_classes() {
    std::thread::spawn(|| {
        sys::set_sched_class(SchedClass::Idle).unwrap();
        assert_eq!(sys::sched_class().unwrap(), Some(SchedClass::Idle));
        sys::set_sched_class(SchedClass::Other).unwrap();
        assert_eq!(readings().2, libc::SCHED_OTHER as u32);
    })
    .join()
    .unwrap();
}
