//! `loom` model tests of the protocols where a lost update would hang or
//! corrupt the pool: the idle/wake protocol, the back-pressure protocol, the
//! resize/retire protocol, the at-max signal to the controller,
//! `JoinHandle::cancel` and a helping join racing the run, and a push into a priority lane.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p tidepool-rs --lib --release loom`.

use loom::sync::atomic::AtomicUsize;
use loom::thread;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use super::builder::Builder;
use super::shared::{ControlSignal, Shared};
use super::sleep::{Parker, Sleepers, Wake};
use crate::sync::Arc;

/// Explore every interleaving with up to three preemptions: the bound loom's
/// authors recommend, and enough for the two- and three-thread races here.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// A worker that finds nothing parks; a submitter then publishes work and
/// notifies. Whatever the interleaving, the worker ends up with the work
/// (loom reports a deadlock if the wake-up can be lost).
#[test]
fn loom_no_lost_wakeup() {
    model(|| {
        let sleepers = Arc::new(Sleepers::default());
        let work = Arc::new(AtomicUsize::new(0));

        let worker = {
            let (sleepers, work) = (sleepers.clone(), work.clone());
            thread::spawn(move || {
                let me = Arc::new(Parker::default());
                loop {
                    if work.load(SeqCst) > 0 {
                        return;
                    }
                    sleepers.park(&me, None, || work.load(SeqCst) > 0);
                }
            })
        };

        work.store(1, SeqCst);
        sleepers.notify_work();
        worker.join().unwrap();
    });
}

// Not modelled here: the fence-free submit path (`notify_work_after(true)`,
// used when the queue's push is a `SeqCst` read-modify-write). Its argument is
// the C++20 `SeqCst` total order over the push and the `num_idle` accesses;
// loom treats `SeqCst` accesses as acquire/release (only `SeqCst` fences are
// modelled), so it reports a false deadlock for it. See docs/design.md.

/// A worker that takes one task and leaves, as a retiring worker would:
/// parked while `take` finds nothing (`has_work` is its re-check), and, if
/// it was woken as the last worker on its way, handing the wake-up on as it
/// leaves (see `pool::sleep`).
fn take_one_and_leave(
    sleepers: &Arc<Sleepers>,
    take: impl Fn() -> bool + Send + 'static,
    has_work: impl Fn() -> bool + Send + 'static,
) -> thread::JoinHandle<()> {
    let sleepers = sleepers.clone();
    thread::spawn(move || {
        let me = Arc::new(Parker::default());
        let mut hand_on = false;
        loop {
            if take() {
                if hand_on {
                    sleepers.hand_on(&has_work);
                }
                return;
            }
            hand_on = sleepers.park(&me, None, &has_work) == Wake::Notified { last: true };
        }
    })
}

/// [`take_one_and_leave`] on a counter of queued tasks.
fn take_one_of(sleepers: &Arc<Sleepers>, work: &Arc<AtomicUsize>) -> thread::JoinHandle<()> {
    let (w1, w2) = (work.clone(), work.clone());
    take_one_and_leave(
        sleepers,
        move || take_from(&w1),
        move || w2.load(SeqCst) > 0,
    )
}

/// Take one task off a counter of queued tasks, if there is one.
fn take_from(work: &AtomicUsize) -> bool {
    let n = work.load(SeqCst);
    n > 0 && work.compare_exchange(n, n - 1, SeqCst, SeqCst).is_ok()
}

/// A submitter on its own thread: `push` a task, then notify.
fn submitter(
    sleepers: &Arc<Sleepers>,
    push: impl FnOnce() + Send + 'static,
) -> thread::JoinHandle<()> {
    let sleepers = sleepers.clone();
    thread::spawn(move || {
        push();
        sleepers.notify_work();
    })
}

/// Two parked workers, two pieces of work published one after the other
/// by two submitters: both workers get theirs.
#[test]
fn loom_two_workers_two_submitters() {
    model(|| {
        let sleepers = Arc::new(Sleepers::default());
        let work = Arc::new(AtomicUsize::new(0));

        let workers: Vec<_> = (0..2).map(|_| take_one_of(&sleepers, &work)).collect();

        let submitter = {
            let work = work.clone();
            submitter(&sleepers, move || {
                work.fetch_add(1, SeqCst);
            })
        };
        work.fetch_add(1, SeqCst);
        sleepers.notify_work();
        submitter.join().unwrap();
        // A worker that consumed its work may leave while the other still
        // needs a wake: keep waking until both are gone.
        for w in workers {
            w.join().unwrap();
        }
    });
}

/// One wake-up in flight: one submitter pushes two tasks in a row into a
/// pool of two parked workers. The first push wakes a worker; the second
/// wakes nobody, since that worker is on its way (under loom the clock
/// stands still, so the wake-up never grows old). Each worker takes one
/// task and leaves, as a retiring worker would: the woken worker, the last
/// to arrive, must hand the second task's wake-up on. (Without the
/// `hand_on` in [`take_one_and_leave`], loom reports the other worker
/// deadlocked.)
#[test]
fn loom_one_wake_up_in_flight_hands_on() {
    model(|| {
        let sleepers = Arc::new(Sleepers::default());
        let work = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2).map(|_| take_one_of(&sleepers, &work)).collect();
        for _ in 0..2 {
            work.fetch_add(1, SeqCst);
            sleepers.notify_work();
        }
        for w in workers {
            w.join().unwrap();
        }
    });
}

/// The sharded queue: two shards, two workers each taking from its home
/// shard first and then the other, two submitters each pushing to its own
/// shard. A worker parks only when *every* shard looked empty after its
/// fence (`is_empty` asks each shard), so whichever shard a task went to,
/// the wake-up argument of `pool::sleep` holds for it: both workers get a
/// task. (A worker that re-checked only its home shard would be left
/// parked: loom reports the deadlock.)
#[test]
fn loom_sharded_queue_loses_no_wakeup() {
    model(|| {
        let sleepers = Arc::new(Sleepers::default());
        let shards = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);

        let workers: Vec<_> = (0..2)
            .map(|home: usize| {
                let (mine, all) = (shards.clone(), shards.clone());
                take_one_and_leave(
                    &sleepers,
                    move || take_from(&mine[home]) || take_from(&mine[(home + 1) % 2]),
                    move || all.iter().any(|s| s.load(SeqCst) > 0),
                )
            })
            .collect();

        let submitter = {
            let shards = shards.clone();
            submitter(&sleepers, move || {
                shards[1].fetch_add(1, SeqCst);
            })
        };
        shards[0].fetch_add(1, SeqCst);
        sleepers.notify_work();
        submitter.join().unwrap();
        for w in workers {
            w.join().unwrap();
        }
    });
}

/// A submitter skips the wake-up because a worker is searching; that worker
/// then leaves the pool (it was surplus) instead of taking the task. The
/// parked worker must still get the task: the leaving worker hands it on.
/// (Without `hand_on`, loom reports the parked worker deadlocked.)
#[test]
fn loom_a_leaving_searcher_hands_the_task_on() {
    model(|| {
        let sleepers = Arc::new(Sleepers::default());
        let work = Arc::new(AtomicUsize::new(0));
        // The searcher is spinning before the submitter looks.
        sleepers.start_search();

        let parked = {
            let (sleepers, work) = (sleepers.clone(), work.clone());
            thread::spawn(move || {
                let me = Arc::new(Parker::default());
                while work.load(SeqCst) == 0 {
                    sleepers.park(&me, None, || work.load(SeqCst) > 0);
                }
            })
        };
        let leaving = {
            let (sleepers, work) = (sleepers.clone(), work.clone());
            thread::spawn(move || {
                sleepers.end_search();
                sleepers.hand_on(|| work.load(SeqCst) > 0);
            })
        };

        work.store(1, SeqCst);
        sleepers.notify_work();
        leaving.join().unwrap();
        parked.join().unwrap();
    });
}

/// The stack's timeout path: a worker whose wait ends races a waker that
/// popped it; the notification must still be consumed (no double park).
#[test]
fn loom_wake_all_reaches_every_parked_worker() {
    model(|| {
        let sleepers = Arc::new(Sleepers::default());
        let closed = Arc::new(AtomicUsize::new(0));
        let worker = {
            let (sleepers, closed) = (sleepers.clone(), closed.clone());
            thread::spawn(move || {
                let me = Arc::new(Parker::default());
                while closed.load(SeqCst) == 0 {
                    let woke = sleepers.park(&me, None, || closed.load(SeqCst) > 0);
                    assert_ne!(woke, Wake::TimedOut);
                }
            })
        };
        closed.store(1, SeqCst);
        sleepers.wake_all();
        worker.join().unwrap();
    });
}

fn shared(min: usize, initial: usize, max: usize) -> Arc<Shared> {
    let config = Builder::default()
        .min_threads(min)
        .initial_threads(initial)
        .max_threads(max)
        .config_for_tests();
    reserved(config, initial)
}

/// Shared state for `config`, with `initial` worker slots reserved (no
/// thread is started: the model's threads play the workers).
fn reserved(config: super::builder::Config, initial: usize) -> Arc<Shared> {
    let s = Arc::new(Shared::new(config));
    for _ in 0..initial {
        assert!(s.reserve_worker(initial));
    }
    s
}

/// Back-pressure (`pool::room`): a submitter finds the bounded queue full
/// and blocks; a worker pops a task, making room, and notifies. The submitter
/// always gets its task in. loom's `wait_timeout` never times out, so the
/// safety-net poll cannot hide a lost wake-up: loom reports a deadlock. The
/// mutex flavor stands for the lock-based ones (one shared `Deque`, whose
/// length is mirrored with a `Release` store).
#[test]
fn loom_blocked_submitter_is_woken() {
    use crate::queue::QueueFlavor;
    use crate::task::Task;
    model(|| {
        let config = Builder::default()
            .threads(1)
            .queue(QueueFlavor::Mutex)
            .queue_capacity(1)
            .config_for_tests();
        let s = reserved(config, 1);
        s.queue.push(Task::new(|| false)).unwrap();
        let worker = {
            let s = s.clone();
            thread::spawn(move || {
                // The worker loop's pop, then `execute`'s first step.
                let task = s.queue.pop().expect("the queue is full");
                s.notify_room();
                task.run();
            })
        };
        if let Err(back) = s.queue.push(Task::new(|| false)) {
            s.push_blocking(back, None).unwrap();
        }
        worker.join().unwrap();
        assert_eq!(s.queue.len(), 1);
    });
}

/// Shrink while two workers decide to retire and a submitter spawns on
/// demand: `live_threads` never drops below the target and never exceeds `max`.
#[test]
fn loom_resize_and_retire_keep_live_in_bounds() {
    model(|| {
        let s = shared(1, 3, 3);
        let retirees: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    // A worker's loop top: leave if surplus.
                    if s.release_surplus() {
                        return 1;
                    }
                    0
                })
            })
            .collect();
        s.set_target(1);
        let spawner = {
            let s = s.clone();
            thread::spawn(move || {
                if s.reserve_worker(3) {
                    s.raise_target_to_live();
                }
            })
        };
        spawner.join().unwrap();
        let gone: usize = retirees.into_iter().map(|t| t.join().unwrap()).sum();
        let live = s.live_threads();
        assert!(live <= 3, "live {live} above max");
        assert!(live >= 1, "live {live} below min");
        assert!(gone <= 2);
        // Counted retired where it left the live count, not later.
        assert_eq!(s.counters.retired.load(Relaxed) as usize, gone);
    });
}

/// A surplus worker retires while `resize` raises the target and fills the
/// pool up to it: the pool never ends below its new target. (With live and
/// target in separate atomics, the worker could read the old target, and
/// retire after the pool had been filled to the new one.)
#[test]
fn loom_retire_racing_a_grow_never_undershoots() {
    model(|| {
        let s = shared(1, 2, 4);
        s.set_target(1);
        let worker = {
            let s = s.clone();
            thread::spawn(move || {
                if s.has_surplus() {
                    s.release_surplus();
                }
            })
        };
        s.set_target(3);
        while s.live_threads() < 3 && s.reserve_worker(3) {}
        worker.join().unwrap();
        assert!(
            s.live_threads() >= s.target(),
            "live {} below target {}",
            s.live_threads(),
            s.target()
        );
    });
}

/// Two workers' keep-alives run out at once with the pool one above min:
/// exactly one retires, and the target follows it down to min.
#[test]
fn loom_keep_alive_expiry_stops_at_min() {
    model(|| {
        let s = shared(1, 2, 2);
        let expiring: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || s.expire_worker() as usize)
            })
            .collect();
        let retired: usize = expiring.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(retired, 1);
        assert_eq!(s.counters.retired.load(Relaxed), 1);
        assert_eq!(s.live_threads(), 1);
        assert_eq!(s.target(), 1);
    });
}

/// Two submitters find the pool at its max while the controller takes one
/// at-max call and re-arms. Whatever the interleaving, the signal never ends
/// "pending" with no flag raised: that state would silence every later
/// at-max event for good.
#[test]
fn loom_at_max_signal_is_never_stuck_pending() {
    use crate::sync::lock;
    model(|| {
        let signal = Arc::new(ControlSignal::default());
        signal.want_at_max.store(true, SeqCst);
        let submitters: Vec<_> = (0..2)
            .map(|_| {
                let signal = signal.clone();
                thread::spawn(move || signal.at_max())
            })
            .collect();
        {
            let mut flags = lock(&signal.flags);
            while !flags.events.at_max {
                flags = signal.cv.wait(flags).unwrap();
            }
            flags.events.at_max = false;
        }
        signal.at_max_taken();
        for s in submitters {
            s.join().unwrap();
        }
        let flags = lock(&signal.flags);
        assert!(flags.events.at_max || !signal.at_max_pending.load(SeqCst));
    });
}

/// `JoinHandle::cancel` racing the worker that pops the task: exactly one
/// wins. If cancel returned true the task never ran and `join` says
/// `Cancelled`; otherwise it ran once and `join` has its value.
#[test]
fn loom_cancel_races_the_run_and_exactly_one_wins() {
    model(|| {
        use crate::task::Body;
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = ran.clone();
        let (handle, task) = super::join::pair(
            move || {
                counted.fetch_add(1, SeqCst);
                7u8
            },
            0,
        );
        let worker = thread::spawn(move || {
            task.call();
        });
        let cancelled = handle.cancel();
        worker.join().unwrap();
        match handle.join() {
            Ok(7) => assert!(!cancelled && ran.load(SeqCst) == 1),
            Err(e) => assert!(e.is_cancelled() && cancelled && ran.load(SeqCst) == 0),
            Ok(_) => unreachable!(),
        }
    });
}

/// A joiner on a worker racing the worker that pops the same task (the
/// claim protocol in `pool::join`): whatever the interleaving, the closure
/// runs exactly once, on whichever side won the claim, the loser skips it,
/// and `join` returns its value (no lost wake-up: loom reports a deadlock
/// if the joiner could sleep through the completion).
#[test]
fn loom_joiner_and_worker_claim_a_task_once() {
    model(|| {
        use crate::task::Body;
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = ran.clone();
        let (handle, task) = super::join::pair(
            move || {
                counted.fetch_add(1, SeqCst);
                7u8
            },
            0,
        );
        let worker = thread::spawn(move || {
            task.call();
        });
        // What `join` does on a worker of the task's pool: claim and run
        // here, or wait for the winner's result.
        handle.run_here();
        assert_eq!(handle.join().unwrap(), 7);
        worker.join().unwrap();
        assert_eq!(ran.load(SeqCst), 1);
    });
}

/// The spill flag (`queue::spill`), with a one-slot ring: a submitter pushes
/// three tasks (the second finds the ring full and spills) while a worker
/// pops twice, so the worker's drain can clear the flag while the submitter
/// is between reading it and pushing. Whatever the interleaving, no task is
/// lost or taken twice, and what is left queued comes out in submission
/// order. (A push that trusted a clear flag and went to the ring while the
/// overflow still held a task breaks the order; loom finds it.)
#[test]
fn loom_spill_flag_keeps_fifo() {
    use crate::queue::spill::{self, Flag, Part};
    use loom::sync::atomic::AtomicBool;
    use loom::sync::Mutex;
    use std::collections::VecDeque;

    struct Fifo {
        items: Mutex<VecDeque<u32>>,
        cap: usize,
    }
    impl Part<u32> for Fifo {
        fn push(&self, t: u32) -> Result<(), u32> {
            let mut q = self.items.lock().unwrap();
            if q.len() == self.cap {
                return Err(t);
            }
            q.push_back(t);
            Ok(())
        }
        fn pop(&self) -> Option<u32> {
            self.items.lock().unwrap().pop_front()
        }
        fn looks_empty(&self) -> bool {
            self.items.lock().unwrap().is_empty()
        }
        fn is_empty(&self) -> bool {
            self.items.lock().unwrap().is_empty()
        }
    }
    struct Spilled(AtomicBool);
    impl Flag for Spilled {
        fn get(&self) -> bool {
            self.0.load(Relaxed)
        }
        fn set(&self, v: bool) {
            self.0.store(v, Relaxed);
        }
    }
    struct Shard {
        spilled: Spilled,
        ring: Fifo,
        overflow: Fifo,
    }
    let fifo = |cap| Fifo {
        items: Mutex::new(VecDeque::new()),
        cap,
    };

    model(move || {
        let q = Arc::new(Shard {
            spilled: Spilled(AtomicBool::new(false)),
            ring: fifo(1),
            overflow: fifo(usize::MAX),
        });
        let worker = {
            let q = q.clone();
            thread::spawn(move || {
                (0..2)
                    .filter_map(|_| spill::pop(&q.spilled, &q.ring, &q.overflow))
                    .collect::<Vec<u32>>()
            })
        };
        for t in 0..3 {
            spill::push(&q.spilled, &q.ring, &q.overflow, t);
        }
        let mut taken = worker.join().unwrap();
        let rest: Vec<u32> =
            std::iter::from_fn(|| spill::pop(&q.spilled, &q.ring, &q.overflow)).collect();
        // The worker's own pops may take a push that raced its look at the
        // two parts out of order (the race the shard always had: it saw the
        // ring empty, then the overflow not); what stays queued is in order.
        assert!(
            rest.windows(2).all(|w| w[0] < w[1]),
            "out of order: {rest:?}"
        );
        assert!(
            !q.spilled.get(),
            "a drain that found nothing clears the flag"
        );
        taken.extend(rest);
        taken.sort_unstable();
        assert_eq!(taken, [0, 1, 2]);
    });
}

/// Lazy striping (`queue::width`): a queue claimed by one submitter (its
/// tasks in its home shard, 0) while a second submitter pushes to its own
/// home shard (1) and so widens it, racing a worker that pops and parks at
/// the old width. A narrow pop goes on to every shard and the worker's
/// re-check asks every shard, so the worker gets both tasks whatever the
/// interleaving. (Checked by hand: with a narrow pop and re-check that look
/// at the narrow shard only and a second push that does not widen, loom
/// reports the worker deadlocked. With the same narrow-only pop and re-check
/// and a push that does widen, it passes: the sleep protocol's fences make
/// the re-check read the new width. The real pop does not rely on that.)
#[test]
fn loom_widening_strands_no_task() {
    use crate::queue::width::Width;
    use loom::sync::Mutex;
    use std::collections::VecDeque;

    struct Queue {
        width: Width,
        shards: [Mutex<VecDeque<u32>>; 2],
    }
    impl Queue {
        fn push(&self, seat: usize, t: u32) {
            self.width.note_push(seat);
            self.shards[seat & 1].lock().unwrap().push_back(t);
        }
        /// `LockFreeQueue::pop`'s shape: narrow, the owner's shard then
        /// the rest; wide, home (0 here) first, then the other.
        fn pop(&self) -> Option<u32> {
            let first = self.width.narrow().map_or(0, |owner| owner & 1);
            (0..2).find_map(|i| self.shards[(first + i) & 1].lock().unwrap().pop_front())
        }
        fn has_work(&self) -> bool {
            self.shards.iter().any(|s| !s.lock().unwrap().is_empty())
        }
    }
    // Seats: a thread id above the two home bits.
    const OWNER: usize = 1 << 2;
    const SECOND: usize = (2 << 2) | 1;

    model(move || {
        let sleepers = Arc::new(Sleepers::default());
        let q = Arc::new(Queue {
            width: Width::default(),
            shards: [Mutex::new(VecDeque::new()), Mutex::new(VecDeque::new())],
        });
        q.push(OWNER, 0);
        let worker = {
            let (sleepers, q) = (sleepers.clone(), q.clone());
            thread::spawn(move || {
                let me = Arc::new(Parker::default());
                let mut got = Vec::new();
                while got.len() < 2 {
                    match q.pop() {
                        Some(t) => got.push(t),
                        None => {
                            sleepers.park(&me, None, || q.has_work());
                        }
                    }
                }
                got
            })
        };
        let second = {
            let q = q.clone();
            submitter(&sleepers, move || q.push(SECOND, 1))
        };
        second.join().unwrap();
        let mut got = worker.join().unwrap();
        got.sort_unstable();
        assert_eq!(got, [0, 1]);
        assert_eq!(q.width.narrow(), None, "the second push widened it");
    });
}

/// A `High` task pushed into its lane while the only worker is about to
/// park: the submitter's fence (`notify_work_after(false)`, as
/// `Pool::submit_with` does) and the lane's `SeqCst` count mean the worker
/// either sees the task or is woken for it (`queue::lanes`).
#[test]
fn loom_a_lane_push_loses_no_wakeup() {
    use crate::queue::lanes::Lanes;
    use crate::task::Task;
    use crate::task_options::Priority;
    model(|| {
        let sleepers = Arc::new(Sleepers::default());
        let lanes = Arc::new(Lanes::default());
        let worker = {
            let (sleepers, lanes) = (sleepers.clone(), lanes.clone());
            thread::spawn(move || {
                let me = Arc::new(Parker::default());
                loop {
                    if let Some(task) = lanes.pop_high() {
                        task.run();
                        return;
                    }
                    let has_work = || lanes.len() > 0;
                    sleepers.park(&me, None, has_work);
                }
            })
        };
        lanes.push(Task::new(|| false), Priority::High);
        sleepers.notify_work_after(false);
        worker.join().unwrap();
    });
}
