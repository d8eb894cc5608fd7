//! Behaviour of the public pool API: submit flavors, resizing, retirement,
//! panics, shutdown, statistics.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use tidepool::policy::{Decision, Fixed, Observation, Schedule, SizingPolicy, Trigger};
use tidepool::{JoinError, OnFull, Pool, QueueFlavor, SubmitError};
use tidepool_test_support::{eventually, threads_named};

/// A gate that tasks wait on, to hold workers busy on purpose.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, std::sync::Condvar)>);

/// Opens its gate when dropped: declared after the pool, it lets the pool's
/// drop (which joins the workers held at the gate) finish when an assertion
/// fails, so the failure is reported instead of hanging the test run.
struct OpenOnDrop(Gate);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

impl Gate {
    fn wait(&self) {
        let mut open = self.0 .0.lock().unwrap();
        while !*open {
            open = self.0 .1.wait(open).unwrap();
        }
    }
    fn close(&self) {
        *self.0 .0.lock().unwrap() = false;
    }

    fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }
}

#[test]
fn submit_returns_values_and_execute_runs() {
    let pool = Pool::new(3).unwrap();
    let handles: Vec<_> = (0..50)
        .map(|i| pool.submit(move || i * 2).unwrap())
        .collect();
    let values: Vec<i32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(values, (0..50).map(|i| i * 2).collect::<Vec<_>>());

    let n = Arc::new(AtomicUsize::new(0));
    for _ in 0..1000 {
        let n = n.clone();
        pool.execute(move || {
            n.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    pool.wait_idle();
    assert_eq!(n.load(Ordering::SeqCst), 1000);
}

#[test]
fn every_queue_flavor_runs_every_task() {
    for flavor in [
        QueueFlavor::Mutex,
        QueueFlavor::Spin,
        QueueFlavor::Hybrid {
            attempts: 3,
            sleep: Duration::from_micros(100),
        },
        QueueFlavor::LockFree,
    ] {
        for capacity in [None, Some(8)] {
            let mut b = Pool::builder().threads(2).queue(flavor);
            if let Some(c) = capacity {
                b = b.queue_capacity(c);
            }
            let pool = b.build().unwrap();
            let n = Arc::new(AtomicUsize::new(0));
            for _ in 0..2000 {
                let n = n.clone();
                pool.execute(move || {
                    n.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
            }
            pool.shutdown();
            assert_eq!(
                n.load(Ordering::SeqCst),
                2000,
                "{flavor} capacity {capacity:?}"
            );
        }
    }
}

#[test]
fn full_queue_rejects_or_times_out_or_blocks() {
    let gate = Gate::default();
    let pool = Pool::builder()
        .threads(1)
        .queue_capacity(1)
        .on_full(OnFull::Reject)
        .build()
        .unwrap();
    let g = gate.clone();
    pool.execute(move || g.wait()).unwrap();
    eventually("the worker took the first task", || {
        pool.stats().queue_len == 0
    });
    pool.execute(|| {}).unwrap(); // fills the one slot
    assert_eq!(*pool.execute(|| {}).unwrap_err().error(), SubmitError::Full);
    assert_eq!(
        *pool.try_submit(|| 1).unwrap_err().error(),
        SubmitError::Full
    );
    let t = Instant::now();
    let timed_out = pool
        .submit_timeout(|| 1, Duration::from_millis(30))
        .unwrap_err();
    assert!(matches!(timed_out.error(), SubmitError::Timeout(_)));
    // The timed-out task comes back, unrun, and the caller can run it.
    assert_eq!(timed_out.into_inner()(), 1);
    assert!(t.elapsed() >= Duration::from_millis(30));
    assert_eq!(pool.stats().rejected, 3);
    gate.open();
    pool.wait_idle();

    // A blocking pool waits for room instead.
    let gate = Gate::default();
    let pool = Arc::new(
        Pool::builder()
            .threads(1)
            .queue_capacity(1)
            .build()
            .unwrap(),
    );
    let g = gate.clone();
    pool.execute(move || g.wait()).unwrap();
    eventually("the worker took the first task", || {
        pool.stats().queue_len == 0
    });
    pool.execute(|| {}).unwrap();
    let p = pool.clone();
    let blocked = std::thread::spawn(move || p.submit(|| 7).unwrap().join().unwrap());
    std::thread::sleep(Duration::from_millis(30));
    assert!(
        !blocked.is_finished(),
        "submit should block while the queue is full"
    );
    gate.open();
    assert_eq!(blocked.join().unwrap(), 7);
    assert!(pool.stats().submit_blocked.quantile(1.0).unwrap() > Duration::ZERO);
}

#[test]
fn resize_grows_at_once_and_shrinks_without_interrupting() {
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(8)
        .policy(Fixed::keep())
        .build()
        .unwrap();
    assert_eq!(pool.live_threads(), 1);
    assert_eq!(pool.resize(6), 6);
    assert_eq!(pool.live_threads(), 6);
    assert_eq!(pool.resize(100), 8, "clamped to max");
    assert_eq!(pool.live_threads(), 8);

    // Hold two workers busy, then shrink to 1: the idle ones go now, the busy
    // ones finish their task first.
    let gate = Gate::default();
    let started = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let (g, s) = (gate.clone(), started.clone());
            pool.submit(move || {
                s.wait();
                g.wait();
                i
            })
            .unwrap()
        })
        .collect();
    started.wait();
    assert_eq!(pool.shrink(1), 1);
    eventually("idle workers retire", || pool.live_threads() == 2);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(pool.live_threads(), 2, "busy workers are not interrupted");
    gate.open();
    let done: Vec<i32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(done, vec![0, 1]);
    eventually("the pool settles at its target", || {
        pool.live_threads() == 1
    });
    assert_eq!(pool.expand(3), 3);
    assert_eq!(pool.live_threads(), 3);
    assert_eq!(pool.expand(2), 3, "expand never shrinks");
    assert_eq!(pool.resize(0), 1, "clamped to min");
    // A retiring worker is counted retired right after it leaves the live
    // count: the counter may lag the size by an instant.
    eventually("the shrink's seven retirements are counted", || {
        pool.stats().threads_retired >= 7
    });
    assert_eq!(pool.stats().threads_created, 10);
}

#[test]
fn surplus_workers_retire_after_keep_alive() {
    let pool = Pool::builder()
        .min_threads(1)
        .initial_threads(4)
        .max_threads(4)
        .keep_alive(Duration::from_millis(50))
        .policy(Fixed::keep())
        .build()
        .unwrap();
    assert_eq!(pool.live_threads(), 4);
    eventually("workers above min retire", || pool.live_threads() == 1);
    // Counted as retired right after leaving the live count.
    eventually("three retirements counted", || {
        pool.stats().threads_retired >= 3
    });
    assert_eq!(pool.stats().threads_retired, 3);
    assert_eq!(pool.submit(|| 5).unwrap().join().unwrap(), 5);
}

#[test]
fn lifo_wakeup_lets_surplus_retire_under_a_trickle() {
    // One task at a time: with LIFO wake-up the same worker serves them all and
    // the other three reach their keep-alive even though work never stops.
    let pool = Pool::builder()
        .min_threads(1)
        .initial_threads(4)
        .max_threads(4)
        .keep_alive(Duration::from_millis(150))
        .queue(QueueFlavor::Mutex) // no spinning: every task goes through a wake-up
        .policy(Fixed::keep())
        .build()
        .unwrap();
    let names = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let until = Instant::now() + Duration::from_millis(900);
    while Instant::now() < until {
        let names = names.clone();
        pool.submit(move || {
            names
                .lock()
                .unwrap()
                .insert(std::thread::current().name().unwrap().to_string());
        })
        .unwrap()
        .join()
        .unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        pool.live_threads() <= 2,
        "surplus should have retired, {} alive",
        pool.live_threads()
    );
}

/// A test policy: allows on-demand growth up to `max`.
#[derive(Debug)]
struct GrowOnDemand(usize);

impl SizingPolicy for GrowOnDemand {
    fn name(&self) -> &str {
        "grow-on-demand"
    }
    fn decide(&mut self, _obs: &Observation) -> Decision {
        Decision::hold()
            .with_grow_on_demand(true)
            .with_max(self.0)
            .with_reason("test")
    }
}

#[test]
fn grows_on_demand_only_when_the_policy_allows() {
    let gate = Gate::default();
    let fixed = Pool::builder()
        .min_threads(1)
        .max_threads(4)
        .policy(Fixed::keep())
        .build()
        .unwrap();
    for _ in 0..4 {
        let g = gate.clone();
        fixed.execute(move || g.wait()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
        fixed.live_threads(),
        1,
        "the fixed policy never spawns on demand"
    );

    let elastic = Pool::builder()
        .min_threads(1)
        .max_threads(4)
        .policy(GrowOnDemand(4))
        .build()
        .unwrap();
    for _ in 0..6 {
        let g = gate.clone();
        elastic.execute(move || g.wait()).unwrap();
    }
    eventually("grows to max", || elastic.live_threads() == 4);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(elastic.live_threads(), 4, "never above max");
    assert_eq!(elastic.decisions().len(), 1);
    gate.open();
}

/// A test policy: starts at `max` 2 and raises `max` (and the target) by one
/// on every at-max call, listening for them only until `max` reaches 4.
#[derive(Debug)]
struct GrowAtMax(usize);

impl SizingPolicy for GrowAtMax {
    fn name(&self) -> &str {
        "grow-at-max"
    }
    fn schedule(&self) -> Schedule {
        Schedule::default().with_on_at_max(self.0 < 4)
    }
    fn decide(&mut self, obs: &Observation) -> Decision {
        if obs.trigger == Trigger::AtMax {
            self.0 += 1;
        }
        Decision::resize(self.0, format!("max {}", self.0))
            .with_grow_on_demand(true)
            .with_max(self.0)
    }
}

#[test]
fn a_pool_stuck_at_its_max_calls_a_policy_that_asked() {
    let gate = Gate::default();
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(16)
        .policy(GrowAtMax(2))
        .build()
        .unwrap();
    let _open = OpenOnDrop(gate.clone());
    // Every submit finds the workers held at the gate and the pool at its max.
    for _ in 0..8 {
        let g = gate.clone();
        pool.execute(move || g.wait()).unwrap();
        std::thread::sleep(Duration::from_millis(3));
    }
    eventually("grows to 4 through at-max calls", || {
        pool.live_threads() == 4
    });
    for _ in 0..8 {
        let g = gate.clone();
        pool.execute(move || g.wait()).unwrap();
        std::thread::sleep(Duration::from_millis(3));
    }
    let log = pool.decisions();
    let at_max: Vec<_> = log.iter().filter(|d| d.trigger == Trigger::AtMax).collect();
    // Two calls (2 → 3 → 4), then the policy stopped listening.
    assert_eq!(at_max.len(), 2, "{log:?}");
    assert!(at_max[1].at - at_max[0].at >= Duration::from_millis(1));
    assert_eq!(
        pool.live_threads(),
        4,
        "no growth once the policy stopped listening"
    );
    gate.open();
}

/// A test policy: asks for a scheduler slice for the workers at start.
#[derive(Debug)]
struct AskSlice(Duration);

impl SizingPolicy for AskSlice {
    fn name(&self) -> &str {
        "ask-slice"
    }
    fn decide(&mut self, _obs: &Observation) -> Decision {
        Decision::hold()
            .with_worker_slice(self.0)
            .with_reason("test")
    }
}

/// The calling thread's EEVDF slice in ns, if the kernel shows it.
fn own_slice_ns() -> Option<u64> {
    let sched = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
    let line = sched.lines().find(|l| l.starts_with("se.slice"))?;
    line.split(':').nth(1)?.trim().parse().ok()
}

/// Whether the kernel takes custom slices (Linux 6.12 and later).
fn kernel_has_custom_slices() -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (6, 12)
}

#[test]
fn workers_ask_for_the_slice_their_policy_wants() {
    if !tidepool::sys::SUPPORT.slices || !kernel_has_custom_slices() || own_slice_ns().is_none() {
        // Nothing to ask for (the pool ignores the request), or no way to
        // see the slice (a kernel without scheduler debug files).
        return;
    }
    // Room to move (a policy needs it), though this one never grows.
    let pool = Pool::builder()
        .min_threads(2)
        .max_threads(3)
        .policy(AskSlice(Duration::from_micros(300)))
        .build()
        .unwrap();
    // Both workers at once (a barrier of two), twice: a worker that parked
    // before the policy's first decision follows it from its next turn, so
    // the first round may still run on the default slice; the second, on
    // each worker, must not.
    let both = |f: fn() -> Option<u64>| {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let b = barrier.clone();
                pool.submit(move || {
                    b.wait();
                    f()
                })
                .unwrap()
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    };
    both(|| None);
    let slices = both(own_slice_ns);
    assert!(
        slices.iter().all(|s| *s == Some(300_000)),
        "worker slices {slices:?}"
    );
    // A thread outside the pool keeps the system default.
    assert_ne!(own_slice_ns(), Some(300_000));

    // The builder's setting, for a static pool without a controller.
    let pool = Pool::builder()
        .threads(1)
        .worker_slice(Duration::from_micros(400))
        .build()
        .unwrap();
    let slice = pool.submit(own_slice_ns).unwrap().join().unwrap();
    assert_eq!(slice, Some(400_000));
}

#[test]
fn a_panicking_task_keeps_its_worker() {
    let pool = Pool::new(2).unwrap();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // keep test output quiet
    for _ in 0..10 {
        pool.execute(|| panic!("task failure")).unwrap();
    }
    let h = pool.submit(|| -> u8 { panic!("with a handle") }).unwrap();
    let err = h.join().unwrap_err();
    std::panic::set_hook(prev);
    assert!(matches!(err, JoinError::Panicked(_)));
    assert_eq!(err.panic_message(), Some("with a handle"));
    assert!(err.to_string().contains("with a handle"));
    pool.wait_idle();
    let s = pool.stats();
    assert_eq!(s.panicked, 11);
    assert_eq!(s.completed, 11);
    assert_eq!(pool.live_threads(), 2);
    assert_eq!(s.threads_created, 2, "no worker was replaced");
    assert_eq!(pool.submit(|| 1).unwrap().join().unwrap(), 1);
}

/// Shutdown returns only once every thread the pool started has ended, also
/// workers that retired before it and are still on their way out (held here
/// in the stop hook): a program that exits right after finds none running.
#[cfg(target_os = "linux")]
#[test]
fn shutdown_waits_for_workers_that_retired_before_it() {
    let leaving = Arc::new(AtomicUsize::new(0));
    let l = leaving.clone();
    let pool = Pool::builder()
        .name("leaving")
        .min_threads(1)
        .max_threads(4)
        .policy(Fixed::keep())
        .on_thread_stop(move || {
            // The three that retire linger; the one shut down does not.
            if l.fetch_add(1, Ordering::SeqCst) < 3 {
                std::thread::sleep(Duration::from_millis(500));
            }
        })
        .build()
        .unwrap();
    assert_eq!(pool.resize(4), 4);
    pool.resize(1);
    eventually("three workers retire into their stop hook", || {
        leaving.load(Ordering::SeqCst) == 3
    });
    assert_eq!(threads_named("leaving-"), 4, "the pool's threads are named");
    pool.shutdown();
    assert_eq!(threads_named("leaving-"), 0);
}

#[test]
fn shutdown_drains_and_refuses_new_work() {
    let pool = Pool::new(2).unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    for _ in 0..500 {
        let n = n.clone();
        pool.execute(move || {
            std::thread::sleep(Duration::from_micros(20));
            n.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    pool.shutdown();
    assert_eq!(n.load(Ordering::SeqCst), 500);
    assert_eq!(pool.live_threads(), 0);
    assert!(pool.is_shutdown());
    assert_eq!(
        *pool.execute(|| {}).unwrap_err().error(),
        SubmitError::ShutDown
    );
    assert_eq!(
        *pool.submit(|| 1).unwrap_err().error(),
        SubmitError::ShutDown
    );
    pool.shutdown(); // idempotent
}

#[test]
fn shutdown_now_returns_what_never_started() {
    let gate = Gate::default();
    let pool = Pool::new(1).unwrap();
    let started = Arc::new(Barrier::new(2));
    let (g, s) = (gate.clone(), started.clone());
    let running = pool
        .submit(move || {
            s.wait();
            g.wait();
            "finished"
        })
        .unwrap();
    started.wait();
    let waiting: Vec<_> = (0..5).map(|i| pool.submit(move || i).unwrap()).collect();
    let opener = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            gate.open();
        })
    };
    let pending = pool.shutdown_now();
    opener.join().unwrap();
    assert_eq!(pending.len(), 5);
    assert_eq!(
        running.join().unwrap(),
        "finished",
        "the running task completes"
    );
    let mut pending = pending.into_iter();
    pending.next().unwrap().run();
    drop(pending);
    let mut waiting = waiting.into_iter();
    assert_eq!(
        waiting.next().unwrap().join().unwrap(),
        0,
        "a returned task can still run"
    );
    for h in waiting {
        assert!(matches!(h.join(), Err(JoinError::Cancelled)));
    }
}

#[test]
fn drop_shuts_down_gracefully() {
    let n = Arc::new(AtomicUsize::new(0));
    {
        let pool = Pool::new(2).unwrap();
        for _ in 0..100 {
            let n = n.clone();
            pool.execute(move || {
                n.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
    }
    assert_eq!(n.load(Ordering::SeqCst), 100);
}

#[test]
fn a_task_may_drop_the_last_handle_to_its_pool() {
    let pool = Arc::new(Pool::new(2).unwrap());
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (dropped_tx, dropped_rx) = std::sync::mpsc::channel::<()>();
    let inner = pool.clone();
    pool.execute(move || {
        dropped_rx.recv().unwrap();
        drop(inner); // the last handle: the pool shuts down from this worker
        done_tx.send(()).unwrap();
    })
    .unwrap();
    drop(pool);
    dropped_tx.send(()).unwrap();
    done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the task finished; no deadlock");
}

#[test]
fn a_task_may_wait_for_its_pool_to_go_idle() {
    let pool = Arc::new(Pool::new(2).unwrap());
    let inner = pool.clone();
    let h = pool
        .submit(move || {
            inner
                .execute(|| std::thread::sleep(Duration::from_millis(5)))
                .unwrap();
            inner.wait_idle(); // waits for the other worker, not for itself
            "done"
        })
        .unwrap();
    assert_eq!(
        h.join_timeout(Duration::from_secs(10)).unwrap().unwrap(),
        "done"
    );
}

/// A task that submits into its own full, blocking pool: with one worker,
/// waiting for room would wait forever (the only thread that could make room
/// is the one waiting). The submitted task runs inline on the worker instead.
#[test]
fn a_task_submitting_into_its_own_full_pool_runs_it_inline() {
    for flavor in [QueueFlavor::LockFree, QueueFlavor::Mutex] {
        let pool = Arc::new(
            Pool::builder()
                .threads(1)
                .queue(flavor)
                .queue_capacity(1)
                .build()
                .unwrap(),
        );
        let inner = pool.clone();
        let ran = Arc::new(Mutex::new(Vec::new()));
        let r = ran.clone();
        let h = pool
            .submit(move || {
                let me = std::thread::current().id();
                let handles: Vec<_> = (0..3)
                    .map(|i| {
                        let r = r.clone();
                        inner
                            .submit(move || {
                                r.lock().unwrap().push(i);
                                std::thread::current().id()
                            })
                            .unwrap()
                    })
                    .collect();
                // The first fits in the queue; the others ran inline, here.
                let inline: Vec<_> = handles[1..].iter().map(|h| h.is_finished()).collect();
                (me, inline, handles)
            })
            .unwrap();
        let (worker, inline, handles) = h
            .join_timeout(Duration::from_secs(60))
            .expect("no deadlock")
            .unwrap();
        assert_eq!(inline, vec![true, true], "{flavor}");
        let threads: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(threads.iter().all(|t| *t == worker), "{flavor}");
        assert_eq!(*ran.lock().unwrap(), vec![1, 2, 0], "{flavor}");
        // A non-blocking submit from a task still reports a full queue.
        let inner = pool.clone();
        let full = pool
            .submit(move || {
                let _ = inner.execute(|| {}); // fills the slot
                inner.try_execute(|| {}).map_err(SubmitError::from)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(full, Err(SubmitError::Full), "{flavor}");
    }
}

/// Many submitters blocked on a tiny queue, every flavor: every task gets in
/// and runs (the back-pressure protocol in `pool/room.rs`; its loom model is
/// `loom_blocked_submitter_is_woken`).
#[test]
fn blocked_submitters_all_get_in() {
    for flavor in [
        QueueFlavor::Mutex,
        QueueFlavor::Spin,
        QueueFlavor::HYBRID,
        QueueFlavor::LockFree,
    ] {
        let pool = Arc::new(
            Pool::builder()
                .threads(1)
                .queue(flavor)
                .queue_capacity(2)
                .build()
                .unwrap(),
        );
        let n = Arc::new(AtomicUsize::new(0));
        let submitters: Vec<_> = (0..4)
            .map(|_| {
                let (pool, n) = (pool.clone(), n.clone());
                std::thread::spawn(move || {
                    for _ in 0..300 {
                        let n = n.clone();
                        pool.execute(move || {
                            n.fetch_add(1, Ordering::Relaxed);
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for s in submitters {
            s.join().unwrap();
        }
        pool.shutdown();
        assert_eq!(n.load(Ordering::Relaxed), 1200, "{flavor}");
    }
}

#[test]
fn a_task_may_shut_down_its_own_pool() {
    let pool = Arc::new(Pool::new(2).unwrap());
    let inner = pool.clone();
    let h = pool
        .submit(move || {
            inner.shutdown();
            inner.is_shutdown()
        })
        .unwrap();
    assert!(h.join().unwrap());
    assert!(pool.execute(|| {}).is_err());
}

#[test]
fn statistics_follow_the_thesis_tables() {
    let pool = Pool::builder()
        .threads(1)
        .record_live_threads_series(true)
        .build()
        .unwrap();
    for _ in 0..20 {
        pool.execute(|| std::thread::sleep(Duration::from_millis(1)))
            .unwrap();
    }
    pool.wait_idle();
    let s = pool.stats();
    assert_eq!((s.submitted, s.completed, s.rejected), (20, 20, 0));
    assert_eq!(s.live_threads, 1);
    assert!(s.mean_service().unwrap() >= Duration::from_millis(1));
    // With one worker, later tasks waited for earlier ones.
    assert!(
        s.wait.quantile(1.0).unwrap() >= Duration::from_millis(10),
        "{s:?}"
    );
    assert!(s.throughput() > 0.0);
    assert_eq!(
        s.process_cpu_time.is_some(),
        tidepool::sys::SUPPORT.cpu_clocks
    );
    assert_eq!(s.submit_blocked.count(), 20);
    assert_eq!(
        s.busy_threads + s.idle_threads + s.blocked_threads,
        s.live_threads
    );

    let w1 = pool.stats_window();
    assert_eq!(w1.completed, 20);
    pool.submit(|| ()).unwrap().join().unwrap();
    pool.wait_idle();
    let w2 = pool.stats_window();
    assert_eq!(
        w2.completed, 1,
        "a window counts only what happened since the last read"
    );
    assert_eq!(
        pool.live_threads_series().first().map(|s| s.live_threads),
        Some(1)
    );

    let quiet = Pool::builder()
        .threads(1)
        .statistics(false)
        .build()
        .unwrap();
    quiet.submit(|| ()).unwrap().join().unwrap();
    quiet.wait_idle();
    let s = quiet.stats();
    assert_eq!(
        (s.submitted, s.completed),
        (0, 0),
        "no task statistics when off"
    );
    assert_eq!(s.threads_created, 1, "thread counters are always kept");
}

#[test]
fn a_workers_first_task_counts_as_starting() {
    // One worker: its first task is its start (a handler opening its
    // database connection), its second is not.
    let pool = Pool::new(1).unwrap();
    for first in [true, false] {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (running, runs) = std::sync::mpsc::channel::<()>();
        let task = pool
            .submit(move || {
                running.send(()).unwrap();
                wait.recv().unwrap()
            })
            .unwrap();
        runs.recv().unwrap();
        assert_eq!(pool.stats().starting_threads, usize::from(first));
        go.send(()).unwrap();
        task.join().unwrap();
        pool.wait_idle();
        assert_eq!(pool.stats().starting_threads, 0);
    }
    // Also when the first task panics.
    let panics = Pool::new(1).unwrap();
    assert!(panics.submit(|| panic!("first")).unwrap().join().is_err());
    panics.wait_idle();
    assert_eq!(panics.stats().starting_threads, 0);
}

#[test]
fn a_worker_in_its_start_hook_counts_as_starting() {
    // The hook is where a handler may open its database connection instead.
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let (running, runs) = std::sync::mpsc::channel::<()>();
    let wait = std::sync::Mutex::new(wait);
    let running = std::sync::Mutex::new(running);
    let pool = Pool::builder()
        .threads(1)
        .on_thread_start(move || {
            running.lock().unwrap().send(()).unwrap();
            // Bounded, so a failing assertion below does not hang the
            // pool's drop on this hook.
            let _ = wait.lock().unwrap().recv_timeout(Duration::from_secs(10));
        })
        .build()
        .unwrap();
    runs.recv().unwrap();
    let s = pool.stats();
    assert_eq!((s.starting_threads, s.idle_threads), (1, 0));
    go.send(()).unwrap();
    pool.wait_idle();
    // Parked, waiting for a first task: not starting.
    let deadline = Instant::now() + Duration::from_secs(10);
    while pool.stats().idle_threads == 0 {
        assert!(Instant::now() < deadline, "the worker never parked");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(pool.stats().starting_threads, 0);
}

#[test]
fn tiny_tasks_are_timed_by_sample_and_counted_exactly() {
    let pool = Pool::new(2).unwrap();
    // In waves: a task's timing is decided when it is submitted, so the
    // switch to sampling shows from the waves after the first few.
    for _ in 0..40 {
        for _ in 0..500 {
            pool.execute(|| {}).unwrap();
        }
        pool.wait_idle();
    }
    let s = pool.stats();
    assert_eq!(s.completed, 20_000, "every task is counted");
    assert!(
        s.service.count() < 10_000,
        "sub-microsecond tasks are timed by sample ({} timed)",
        s.service.count()
    );
    // At least the first 256 (every task until a worker has run 256 short
    // ones in a row), then one in 64.
    assert!(s.service.count() >= 256, "{}", s.service.count());
    assert!(s.busy_time() > Duration::ZERO);

    // The first timed slow task switches back to timing each one; tasks
    // already submitted keep the choice made when they were submitted.
    // 64 of them, so that one is timed whatever the sampler's phase: each
    // was submitted either while every task is timed, or among 64
    // consecutive sampled submissions, one of which is timed (with 50, none
    // was in one run in five or so that ended the waves while sampling).
    let slow = || std::thread::sleep(Duration::from_micros(200));
    for _ in 0..64 {
        pool.execute(slow).unwrap();
    }
    pool.wait_idle();
    let before = pool.stats();
    for _ in 0..50 {
        pool.execute(slow).unwrap();
    }
    pool.wait_idle();
    let w = pool.stats().since(&before);
    assert_eq!(w.completed, 50);
    assert_eq!(w.service.count(), 50, "every slow task is timed");
}

#[test]
fn a_worker_of_long_tasks_samples_one_every_20_ms() {
    if !tidepool::sys::SUPPORT.cpu_clocks {
        return; // no thread CPU clock: nothing is sampled (see sys::SUPPORT)
    }
    // Past its first 16 tasks a worker samples one long task in 16, so a
    // change of the mix went unseen for 16 of them; it also samples one
    // whenever its last sample is 20 ms old: of 24 tasks of 6 ms, every
    // fifth or sooner.
    let pool = Pool::new(1).unwrap();
    for _ in 0..16 {
        pool.execute(|| std::thread::sleep(Duration::from_micros(200)))
            .unwrap();
    }
    pool.wait_idle();
    let before = pool.stats();
    for _ in 0..24 {
        pool.execute(|| std::thread::sleep(Duration::from_millis(6)))
            .unwrap();
    }
    pool.wait_idle();
    let sampled = pool.stats().sampled_tasks - before.sampled_tasks;
    assert!(sampled >= 4, "{sampled} of 24 tasks of 6 ms sampled");
}

#[test]
fn per_task_cpu_sample_tells_compute_from_blocking() {
    if !tidepool::sys::SUPPORT.cpu_clocks {
        return; // no thread CPU clock: nothing is sampled (see sys::SUPPORT)
    }
    let pool = Pool::new(1).unwrap();
    for _ in 0..20 {
        pool.execute(|| std::thread::sleep(Duration::from_millis(1)))
            .unwrap();
    }
    pool.wait_idle();
    let sleeping = pool.stats();
    assert!(sleeping.sampled_task_time >= Duration::from_millis(10));
    assert!(
        sleeping.sampled_task_cpu < sleeping.sampled_task_time / 4,
        "sleeping tasks barely compute: {:?} of {:?}",
        sleeping.sampled_task_cpu,
        sleeping.sampled_task_time
    );

    for _ in 0..20 {
        pool.execute(|| {
            let start = tidepool::sys::thread_cpu_time().unwrap();
            while tidepool::sys::thread_cpu_time().unwrap() - start < Duration::from_millis(1) {}
        })
        .unwrap();
    }
    pool.wait_idle();
    let w = pool.stats().since(&sleeping);
    assert!(
        w.sampled_task_cpu >= w.sampled_task_time.mul_f64(0.7),
        "spinning tasks compute: {:?} of {:?}",
        w.sampled_task_cpu,
        w.sampled_task_time
    );
}

/// A scripted policy: resizes to each size in turn, once per tick.
#[derive(Debug)]
struct Script(Vec<usize>);

impl SizingPolicy for Script {
    fn name(&self) -> &str {
        "script"
    }
    fn schedule(&self) -> Schedule {
        Schedule::default().with_every(Duration::from_millis(5))
    }
    fn decide(&mut self, _obs: &Observation) -> Decision {
        match self.0.pop() {
            Some(n) => Decision::resize(n, format!("script says {n}")),
            None => Decision::hold(),
        }
    }
}

#[test]
fn the_controller_applies_and_logs_decisions() {
    let pool = Pool::builder()
        .min_threads(1)
        .max_threads(6)
        .policy(Script(vec![2, 6, 3]))
        .build()
        .unwrap();
    eventually("three decisions", || pool.decisions().len() == 3);
    let log = pool.decisions();
    let moves: Vec<_> = log.iter().map(|d| (d.old_target, d.new_target)).collect();
    assert_eq!(moves, vec![(1, 3), (3, 6), (6, 2)]);
    assert_eq!(log[1].reason, "script says 6");
    assert!(log.windows(2).all(|w| w[0].at <= w[1].at));
    eventually("the pool follows", || pool.live_threads() == 2);
}

#[test]
fn join_handle_is_a_future() {
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};

    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }

    let pool = Pool::new(1).unwrap();
    let mut h = pool
        .submit(|| {
            std::thread::sleep(Duration::from_millis(10));
            "async"
        })
        .unwrap();
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let value = loop {
        match std::pin::Pin::new(&mut h).poll(&mut cx) {
            Poll::Ready(v) => break v.unwrap(),
            Poll::Pending => std::thread::park_timeout(Duration::from_millis(100)),
        }
    };
    assert_eq!(value, "async");
}

#[test]
fn workers_carry_the_pool_name() {
    let pool = Pool::builder().name("ingest").threads(1).build().unwrap();
    let name = pool
        .submit(|| std::thread::current().name().map(str::to_string))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(name.as_deref(), Some("ingest-0"));
}

/// `Duration::MAX` means "no deadline": it used to panic with "overflow when
/// adding duration to instant".
#[test]
fn timeouts_of_duration_max_wait_without_a_deadline() {
    let pool = Pool::builder()
        .threads(1)
        .queue_capacity(1)
        .build()
        .unwrap();
    let gate = Gate::default();
    let g = gate.clone();
    let busy = pool.submit(move || g.wait()).unwrap();
    // Wait until the worker holds the gated task, then fill the queue.
    eventually("the worker picks up the gated task", || pool.queued() == 0);
    let queued = pool.submit_timeout(|| 2, Duration::MAX).unwrap();
    let opener = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            gate.open();
        })
    };
    // The queue is full: this waits (no deadline) until the gate opens.
    let third = pool.submit_timeout(|| 3, Duration::MAX).unwrap();
    assert_eq!(third.join_timeout(Duration::MAX).ok().unwrap().unwrap(), 3);
    assert_eq!(queued.join_timeout(Duration::MAX).ok().unwrap().unwrap(), 2);
    busy.join().unwrap();
    opener.join().unwrap();
}

/// A burst into a pool whose workers are all parked wakes one worker, and
/// each woken worker wakes the next while work is left (one wake-up in
/// flight, `pool::sleep`): the burst still reaches every worker. Four tasks
/// that each hold their worker until all four run would wait forever if the
/// hand-on were lost (the submitter wakes only the first).
#[test]
fn a_burst_into_an_idle_pool_reaches_every_worker() {
    let pool = Pool::builder()
        .min_threads(4)
        .initial_threads(4)
        .max_threads(4)
        .policy(Fixed::keep())
        // A parked worker whose keep-alive ends looks at the queue: that
        // must not be what rescues the burst.
        .keep_alive(Duration::from_secs(3600))
        .build()
        .unwrap();
    // Many short tasks first, so each worker has measured its tasks as
    // short: a hand-on must still wake the next worker for work that looks
    // small, since a queued task may be what a running one waits for.
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..20_000 {
        let d = done.clone();
        pool.execute(move || {
            d.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    }
    eventually("the short tasks ran", || {
        done.load(Ordering::Relaxed) == 20_000
    });
    let gate = Gate::default();
    let _open = OpenOnDrop(gate.clone());
    for round in 0..20 {
        eventually("every worker parks", || pool.stats().idle_threads == 4);
        let started = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (g, s) = (gate.clone(), started.clone());
                pool.submit(move || {
                    s.fetch_add(1, Ordering::SeqCst);
                    g.wait();
                })
                .unwrap()
            })
            .collect();
        eventually(
            &format!("round {round}: all four tasks run at once"),
            || started.load(Ordering::SeqCst) == 4,
        );
        gate.open();
        for h in handles {
            h.join().unwrap();
        }
        gate.close();
    }
}
