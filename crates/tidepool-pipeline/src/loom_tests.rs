//! `loom` models of the buffer-recycling and end-of-stream protocol
//! (`queue.rs`): every interleaving of a source, a replicated stage and a
//! sink over a pool of recycled buffers, with the real [`Queue`]; and of
//! the deferred wake-ups (`running.rs`): the same pipeline with every
//! thread counted on fewer cores than threads, so that pushes leave their
//! wake-ups owed, and the race between a deferring push and a thread that
//! frees a core. And of pooled mode's sleeping and waking (`exec/pooled`):
//! the real executor on loom threads, whose every release of the run's
//! lock checks that runnable work never waits while a worker sleeps with
//! no wake-up on its way.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p tidepool-pipeline --lib --release loom`

use std::sync::Arc;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use crate::queue::{Pop, Queue};
use crate::running::Running;

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(2, f);
}

fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.check(f);
}

/// Source → stage (2 replicas) → sink, `rounds` rounds over `buffers`
/// buffers. Checks: each queue gives exactly one last notice, every round
/// reaches the sink once, no thread blocks forever (loom reports a
/// deadlock), every buffer is back in the free pool at the end. With
/// `cores`, every thread is counted as a run's stage thread is (it enters
/// at its start and leaves at its end) and wake-ups are deferred while
/// `cores` of them run.
fn recycle(rounds: u64, buffers: usize, cores: Option<usize>) {
    model(move || {
        let running = cores.map(|c| Arc::new(Running::new(c)));
        let queue = || Arc::new(Queue::new(1, &[0], buffers, running.clone()));
        let free = queue();
        for i in 0..buffers {
            free.push(0, i as u64 * 1000).unwrap();
        }
        let mid = queue();
        let out = queue();
        let lasts = Arc::new(AtomicUsize::new(0));
        let enter = {
            let running = running.clone();
            move || running.as_ref().inspect(|r| r.enter()).cloned()
        };
        let leave = |r: Option<Arc<Running>>| {
            if let Some(r) = r {
                r.leave();
            }
        };

        let source = {
            let (free, mid, enter) = (free.clone(), mid.clone(), enter.clone());
            thread::spawn(move || {
                let me = enter();
                for r in 0..rounds {
                    let Pop::Item { item, .. } = free.pop() else {
                        panic!("the free pool never ends or aborts here");
                    };
                    let _ = item;
                    if r + 1 == rounds {
                        mid.set_total(0, rounds);
                    }
                    mid.push(0, r).unwrap();
                }
                leave(me);
            })
        };
        let replicas: Vec<_> = (0..2)
            .map(|_| {
                let (mid, out, lasts) = (mid.clone(), out.clone(), lasts.clone());
                let enter = enter.clone();
                thread::spawn(move || {
                    let me = enter();
                    loop {
                        match mid.pop() {
                            Pop::Item {
                                item, index, last, ..
                            } => {
                                if last {
                                    lasts.fetch_add(1, Ordering::SeqCst);
                                    out.set_total(0, index + 1);
                                }
                                out.push(0, item).unwrap();
                            }
                            Pop::End => return leave(me),
                            Pop::Aborted => panic!("nobody aborts"),
                        }
                    }
                })
            })
            .collect();
        let me = enter();
        let mut seen = Vec::new();
        loop {
            match out.pop() {
                Pop::Item { item, last, .. } => {
                    if last {
                        lasts.fetch_add(1, Ordering::SeqCst);
                    }
                    seen.push(item);
                    free.push(0, item).unwrap();
                }
                Pop::End => break,
                Pop::Aborted => panic!("nobody aborts"),
            }
        }
        leave(me);
        source.join().unwrap();
        for r in replicas {
            r.join().unwrap();
        }
        if let Some(r) = &running {
            assert_eq!(r.count(), 0, "every wake-up counted ahead was taken");
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..rounds).collect::<Vec<_>>());
        assert_eq!(lasts.load(Ordering::SeqCst), 2, "one notice per queue");
        assert_eq!(free.len(), buffers);
    });
}

#[test]
fn loom_recycling_with_as_many_buffers_as_rounds() {
    recycle(2, 2, None);
}

#[test]
fn loom_recycling_with_one_buffer() {
    recycle(2, 1, None);
}

/// Four counted threads on one core: every push into a queue with a
/// waiter is deferred; only leaving threads pay.
#[test]
fn loom_deferred_recycling_on_one_core() {
    recycle(2, 2, Some(1));
}

#[test]
fn loom_deferred_recycling_with_one_buffer_on_two_cores() {
    recycle(2, 1, Some(2));
}

/// The race the `SeqCst` pair settles: on two cores, `p` pushes into the
/// queue where `c` waits while `x` leaves the count. `p` then keeps its
/// core until `c` has the item (it waits on a plain flag, never leaving
/// the count), so if neither `x` nor `p`'s re-check paid the owed wake-up,
/// `c` and `p` would wait forever (loom reports the deadlock). Three
/// preemptions: `x` must leave between `p`'s decision and its re-check.
#[test]
fn loom_a_freed_core_pays_an_owed_wake_up() {
    model_bounded(3, || {
        let running = Arc::new(Running::new(2));
        let q = Arc::new(Queue::<u64>::new(1, &[0], 1, Some(running.clone())));
        let done = Arc::new((loom::sync::Mutex::new(false), loom::sync::Condvar::new()));
        let c = {
            let (q, running, done) = (q.clone(), running.clone(), done.clone());
            thread::spawn(move || {
                running.enter();
                let Pop::Item { item, .. } = q.pop() else {
                    panic!("an item, never the end here");
                };
                *done.0.lock().unwrap() = true;
                done.1.notify_all();
                running.leave();
                item
            })
        };
        let x = {
            let running = running.clone();
            thread::spawn(move || {
                running.enter();
                running.leave();
            })
        };
        running.enter();
        q.push(0, 7).unwrap();
        let mut d = done.0.lock().unwrap();
        while !*d {
            d = done.1.wait(d).unwrap();
        }
        drop(d);
        running.leave();
        assert_eq!(c.join().unwrap(), 7);
        x.join().unwrap();
        assert_eq!(running.count(), 0);
    });
}

/// A stage fails while its neighbours wait on empty queues: the abort
/// wakes both, and neither blocks forever.
#[test]
fn loom_abort_wakes_every_waiter() {
    model(|| {
        let a = Arc::new(Queue::<u64>::new(1, &[0], 1, None));
        let b = Arc::new(Queue::<u64>::new(1, &[0], 1, None));
        let waiters: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .map(|q| thread::spawn(move || q.pop()))
            .collect();
        let failer = {
            let (a, b) = (a.clone(), b.clone());
            thread::spawn(move || {
                drop(a.abort());
                drop(b.abort());
            })
        };
        failer.join().unwrap();
        for w in waiters {
            assert_eq!(w.join().unwrap(), Pop::Aborted);
        }
        assert_eq!(a.push(0, 1), Err(1));
    });
}

/// A broadcast fork: the source (which forks, on its own thread) takes a
/// buffer from the free pool and a copy from the copy pool for each round,
/// sets both branches' totals before the last pushes, and each branch
/// hands its buffer to the join; the branch that completes a round sends
/// the original back to the free pool and the copy back to the copy pool
/// (as `Gather::arrive` does). Checks: each branch gets exactly one last
/// notice and sees every round once, every round is joined once, both pools
/// are full again at the end, and nothing blocks forever.
fn broadcast(rounds: u64, buffers: usize) {
    model(move || {
        let free = Arc::new(Queue::new(1, &[0], buffers, None));
        let copies = Arc::new(Queue::new(1, &[0], buffers, None));
        for i in 0..buffers as u64 {
            free.push(0, i).unwrap();
            copies.push(0, 1000 + i).unwrap();
        }
        let branches = [
            Arc::new(Queue::new(1, &[0], buffers, None)),
            Arc::new(Queue::new(1, &[0], buffers, None)),
        ];
        // Per round: how many branches are done with it.
        let join = Arc::new(loom::sync::Mutex::new(vec![0u8; rounds as usize]));
        let joined = Arc::new(AtomicUsize::new(0));
        let lasts = Arc::new(AtomicUsize::new(0));

        let source = {
            let (free, copies, branches) = (free.clone(), copies.clone(), branches.clone());
            thread::spawn(move || {
                for r in 0..rounds {
                    let Pop::Item { item: orig, .. } = free.pop() else {
                        panic!("the free pool never ends here");
                    };
                    let Pop::Item { item: copy, .. } = copies.pop() else {
                        panic!("the copy pool never ends here");
                    };
                    if r + 1 == rounds {
                        for q in &branches {
                            q.set_total(0, rounds);
                        }
                    }
                    // The buffers carry their round in the model.
                    let _ = (orig, copy);
                    branches[1].push(0, r + 1000).unwrap();
                    branches[0].push(0, r).unwrap();
                }
            })
        };
        let workers: Vec<_> = (0..2)
            .map(|b| {
                let q = branches[b].clone();
                let (free, copies, join) = (free.clone(), copies.clone(), join.clone());
                let (joined, lasts) = (joined.clone(), lasts.clone());
                thread::spawn(move || {
                    let mut seen = Vec::new();
                    loop {
                        match q.pop() {
                            Pop::Item { item, last, .. } => {
                                if last {
                                    lasts.fetch_add(1, Ordering::SeqCst);
                                }
                                let r = item % 1000;
                                seen.push(r);
                                let mut j = join.lock().unwrap();
                                j[r as usize] += 1;
                                if j[r as usize] == 2 {
                                    joined.fetch_add(1, Ordering::SeqCst);
                                    free.push(0, r).unwrap();
                                    copies.push(0, 1000 + r).unwrap();
                                }
                            }
                            Pop::End => return seen,
                            Pop::Aborted => panic!("nobody aborts"),
                        }
                    }
                })
            })
            .collect();
        source.join().unwrap();
        for w in workers {
            assert_eq!(w.join().unwrap(), (0..rounds).collect::<Vec<_>>());
        }
        assert_eq!(lasts.load(Ordering::SeqCst), 2, "one notice per branch");
        assert_eq!(joined.load(Ordering::SeqCst), rounds as usize);
        assert_eq!((free.len(), copies.len()), (buffers, buffers));
    });
}

#[test]
fn loom_broadcast_with_one_buffer() {
    broadcast(2, 1);
}

#[test]
fn loom_broadcast_with_two_buffers() {
    broadcast(2, 2);
}

/// Pooled mode (`exec/pooled`), the real executor on `workers` loom threads:
/// source → `a` (2 replicas, ordered) → `c` × `middle` → `b`, `rounds`
/// rounds over `buffers` buffers. Under `loom` odd groups block and even
/// ones compute, so `a` blocks, and with one `c` so does `b`: two blocking
/// groups around a computing one, so that workers decline the other kind.
/// Checks: every round reaches `b` once and in order, each stage gets the
/// last-buffer notice once, every buffer is dropped after the run, no
/// worker sleeps forever (loom reports a deadlock), and the protocol's
/// invariant at every release of the lock (`State::check`: a lost wake-up
/// fails it).
fn pooled(rounds: u64, buffers: usize, workers: Option<usize>, repeat: usize, middle: usize) {
    use crate::{Context, Flow, Pipeline};
    use std::sync::Mutex;
    model(move || {
        let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let lasts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (l1, l2, s2, live1) = (lasts.clone(), lasts.clone(), seen.clone(), live.clone());
        struct Counted(Arc<std::sync::atomic::AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        type R = Result<(), crate::BoxError>;
        let mut builder = Pipeline::builder("loom")
            .buffers(buffers, move || {
                live1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Counted(live1.clone())
            })
            .source("read", move |_: &mut Counted, cx: &Context| {
                Ok(if cx.round() + 1 == rounds {
                    Flow::Last
                } else {
                    Flow::More
                })
            })
            .replicated("a", 2, move || {
                let l = l1.clone();
                move |_: &mut Counted, cx: &Context| -> R {
                    if cx.is_last() {
                        l.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    Ok(())
                }
            });
        for i in 0..middle {
            let l = lasts.clone();
            builder = builder.stage(format!("c{i}"), move |_: &mut Counted, cx: &Context| -> R {
                if cx.is_last() {
                    l.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                Ok(())
            });
        }
        let builder = builder
            .stage("b", move |_: &mut Counted, cx: &Context| -> R {
                if cx.is_last() {
                    l2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                s2.lock().unwrap().push(cx.round());
                Ok(())
            })
            .repeat(repeat);
        // `None`: self-sizing, one computing task at a time (so the source
        // and `b` never compute at once), a worker per instance.
        let builder = match workers {
            Some(n) => builder.pooled_threads(n),
            None => builder.pooled_compute(1),
        };
        let report = builder
            .build()
            .expect("valid")
            .run()
            .expect("no stage fails");
        assert_eq!(report.pipelines[0].rounds, rounds);
        assert_eq!(*seen.lock().unwrap(), (0..rounds).collect::<Vec<_>>());
        assert_eq!(lasts.load(std::sync::atomic::Ordering::SeqCst), 2 + middle);
        assert_eq!(live.load(std::sync::atomic::Ordering::SeqCst), 0);
    });
}

#[test]
fn loom_pooled_two_workers() {
    pooled(3, 2, Some(2), 1, 0);
}

#[test]
fn loom_pooled_three_workers_one_buffer_each_stage_waits() {
    pooled(2, 1, Some(3), 1, 0);
}

#[test]
fn loom_pooled_two_workers_with_repeat() {
    pooled(3, 3, Some(2), 2, 0);
}

/// Two blocking groups (`a` and `b`) around a computing one (the blocking
/// shape's kinds), three workers: a worker that declines wakes a spare,
/// while another worker may take the work first.
#[test]
fn loom_pooled_three_workers_two_blocking_groups() {
    pooled(2, 2, Some(3), 1, 1);
}

/// Self-sizing pooled mode: a worker per instance (four), at most one
/// computing task at once; the source and `b` compute, `a` blocks. A
/// computing group held back by the limit must still be picked up when the
/// running one completes (a lost wake-up fails the invariant or deadlocks).
#[test]
fn loom_pooled_self_sizing_one_computing_task_at_once() {
    pooled(2, 1, None, 1, 0);
}

#[test]
fn loom_pooled_self_sizing_two_buffers() {
    pooled(2, 2, None, 1, 0);
}

/// Pooled mode with a route fork inside a broadcast's branch, on two loom
/// workers: read → broadcast{ [x], [route{ p | q }] } → sink, `rounds`
/// rounds over `buffers` buffers. The route's last buffer sends a notice
/// to the other branch, which its join drops; the gather completes each
/// round once both branches delivered it. Checks: every round reaches the
/// sink once and in order with both branches' work merged, every stage
/// gets the last-buffer notice once, every buffer (copies and notices
/// too) is dropped after the run, no worker sleeps forever, and the
/// protocol's invariant at every release of the lock.
fn pooled_fork(rounds: u64, buffers: usize, workers: usize) {
    use crate::{Builder, Context, Flow, Order, Pipeline};
    use std::sync::Mutex;
    model(move || {
        type R = Result<(), crate::BoxError>;
        let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let lasts = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        struct Buf(u64, u64, Arc<std::sync::atomic::AtomicUsize>);
        impl Drop for Buf {
            fn drop(&mut self) {
                self.2.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let live1 = live.clone();
        let stage = |name: &'static str, add: u64| {
            let l = lasts.clone();
            move |b: &mut Buf, cx: &Context| -> R {
                if cx.is_last() {
                    l.lock().unwrap().push(name);
                }
                b.1 += add;
                Ok(())
            }
        };
        let s = seen.clone();
        let report = Pipeline::builder("loom-fork")
            .buffers(buffers, move || {
                live1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Buf(0, 0, live1.clone())
            })
            .source("read", move |b: &mut Buf, cx: &Context| {
                (b.0, b.1) = (cx.round(), 0);
                Ok(if cx.round() + 1 == rounds {
                    Flow::Last
                } else {
                    Flow::More
                })
            })
            .broadcast(
                vec![
                    Builder::branch().stage("x", stage("x", 1)),
                    Builder::branch().stage("pre", stage("pre", 0)).fork(
                        |b: &Buf, _: &Context| (b.0 % 2) as usize,
                        vec![
                            Builder::branch().stage("p", stage("p", 10)),
                            Builder::branch().stage("q", stage("q", 100)),
                        ],
                        Order::Ordered,
                    ),
                ],
                |from: &Buf, to: &mut Buf, _| {
                    to.0 = from.0;
                    to.1 = from.1;
                },
                |into: &mut Buf, from: &Buf, _| -> R {
                    into.1 += from.1;
                    Ok(())
                },
            )
            .stage("sink", move |b: &mut Buf, _: &Context| -> R {
                s.lock().unwrap().push((b.0, b.1));
                Ok(())
            })
            .pooled_threads(workers)
            .build()
            .expect("valid")
            .run()
            .expect("no stage fails");
        assert_eq!(report.pipelines[0].rounds, rounds);
        let want: Vec<(u64, u64)> = (0..rounds)
            .map(|r| (r, if r % 2 == 0 { 11 } else { 101 }))
            .collect();
        assert_eq!(*seen.lock().unwrap(), want);
        let mut l = lasts.lock().unwrap().clone();
        l.sort_unstable();
        assert_eq!(l, ["p", "pre", "q", "x"]);
        assert_eq!(live.load(std::sync::atomic::Ordering::SeqCst), 0);
    });
}

#[test]
fn loom_pooled_fork_and_broadcast() {
    pooled_fork(2, 2, 2);
}

#[test]
fn loom_pooled_fork_and_broadcast_three_buffers() {
    pooled_fork(2, 3, 2);
}

/// Pooled mode with a stage shared by two pipelines (`run_all`), on
/// `workers` loom workers (`None`: self-sizing): `a` and `b`, each read →
/// shared `s` (`replicas`, ordered) → its own sink, `rounds` rounds each over `buffers` buffers
/// each. The shared stage's one input takes both pipelines' buffers; each
/// pipeline's lane counts its own, reorders its own and passes them on to
/// its own sink. Checks: each sink sees its pipeline's rounds once and in
/// order, the shared stage gets each pipeline's last-buffer notice once
/// (and each sink its own), every buffer is dropped after the run, no
/// worker sleeps forever, and the protocol's invariant at every release of
/// the lock.
fn pooled_shared(rounds: u64, buffers: usize, replicas: usize, workers: Option<usize>) {
    use crate::{run_all, Context, Flow, Order, Pipeline, SharedStage};
    use std::sync::Mutex;
    model(move || {
        type R = Result<(), crate::BoxError>;
        let live = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let lasts = Arc::new(Mutex::new(Vec::new()));
        struct Buf(Arc<std::sync::atomic::AtomicUsize>);
        impl Drop for Buf {
            fn drop(&mut self) {
                self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let l = lasts.clone();
        let shared = SharedStage::replicated("s", replicas, Order::Ordered, None, move || {
            let l = l.clone();
            move |_: &mut Buf, cx: &Context| -> R {
                if cx.is_last() {
                    l.lock().unwrap().push(format!("s {}", cx.pipeline()));
                }
                Ok(())
            }
        });
        let seen: Vec<Arc<Mutex<Vec<u64>>>> = (0..2).map(|_| Arc::default()).collect();
        let pipelines = ["a", "b"]
            .iter()
            .zip(&seen)
            .map(|(&name, seen)| {
                let (live1, l, s) = (live.clone(), lasts.clone(), seen.clone());
                let p = Pipeline::builder(name)
                    .buffers(buffers, move || {
                        live1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        Buf(live1.clone())
                    })
                    .source("read", move |_: &mut Buf, cx: &Context| {
                        Ok(if cx.round() + 1 == rounds {
                            Flow::Last
                        } else {
                            Flow::More
                        })
                    })
                    .shared(&shared)
                    .stage("sink", move |_: &mut Buf, cx: &Context| -> R {
                        if cx.is_last() {
                            l.lock().unwrap().push(format!("sink {}", cx.pipeline()));
                        }
                        s.lock().unwrap().push(cx.round());
                        Ok(())
                    })
                    .pooled_threads(workers.unwrap_or(1));
                // `None`: self-sizing, one computing task at a time, a
                // worker per instance.
                match workers {
                    Some(_) => p,
                    None => p.pooled_compute(1),
                }
                .build()
                .expect("valid")
            })
            .collect();
        let report = run_all(pipelines).expect("no stage fails");
        for (p, seen) in seen.iter().enumerate() {
            assert_eq!(report.pipelines[p].rounds, rounds);
            assert_eq!(*seen.lock().unwrap(), (0..rounds).collect::<Vec<_>>());
        }
        let mut l = lasts.lock().unwrap().clone();
        l.sort_unstable();
        assert_eq!(l, ["s a", "s b", "sink a", "sink b"]);
        assert_eq!(live.load(std::sync::atomic::Ordering::SeqCst), 0);
    });
}

#[test]
fn loom_pooled_shared_stage() {
    pooled_shared(2, 1, 2, Some(2));
}

/// Two buffers per pipeline: the shared stage's replicas can finish a
/// pipeline's buffers out of order, and its lane must put them back.
#[test]
fn loom_pooled_shared_stage_two_buffers() {
    pooled_shared(3, 2, 2, Some(2));
}

/// Self-sizing: a worker per instance (five: the shared stage's one
/// instance counted once), the computing limit at one task.
#[test]
fn loom_pooled_shared_stage_self_sizing() {
    pooled_shared(2, 1, 1, None);
}
