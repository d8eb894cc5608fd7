//! The queue between two thread groups, and the end-of-stream protocol.
//!
//! # Protocol
//!
//! Buffers are created once, before the run, and circulate: the source takes
//! an empty one from its pipeline's *free queue*, fills it, and every stage
//! conveys it to the next queue; after the last stage it goes back to the
//! free queue. Nothing else creates or destroys a buffer, so the buffers in
//! flight never exceed the pool, and a push never has to wait for room: a
//! queue can never hold more buffers than exist.
//!
//! A broadcast fork with `n` branches also has a pool of its own: `n − 1`
//! copy buffers per pipeline buffer, made once like the others. For each
//! round it takes `n − 1` of them (never waiting: a round in flight needs
//! one set, and there are at most as many rounds in flight as pipeline
//! buffers), sends the original down branch 0 and a copy down each other
//! branch; the join, once every branch has brought its buffer of the round,
//! puts the copies back in the fork's pool and passes the original on. So
//! the pipeline's own buffers still bound the rounds in flight, and the
//! buffers that exist are exactly the pipeline's plus the copy pools'.
//!
//! **End of stream by counting.** Each queue counts, per pipeline, the
//! buffers popped from it. The producer side tells the queue how many buffers
//! of that pipeline will ever arrive ([`Queue::set_total`]), and it does so
//! *before* it pushes the final one. The pop that makes the count equal the
//! total is the queue's last: it is flagged `last` (that is the last-buffer
//! notice the consumer's stages see, exactly once, since exactly one pop can
//! make a count reach a fixed total), and once every pipeline feeding the
//! queue is complete, every later or waiting pop returns [`Pop::End`].
//! Counting, not a marker that travels in order, is what makes this right
//! after unordered replicas and fork/join, where buffers overtake each other.
//!
//! A fork tells each branch its total (for a broadcast: every round goes
//! down every branch) and the queue after its join; when that join is also
//! an outer fork's (the inner fork ends an outer branch), the outer fork
//! alone tells that queue. A route fork sends an empty buffer, taken from
//! the free pool, down each branch the last buffer does not take, so every
//! branch's count reaches its total; those empties go back to the free
//! pool at that fork's join, and a fork nested in such a branch counts
//! (and forwards) the outer empty like any buffer.
//!
//! Why the total is always known in time: the final arrival at a queue is the
//! last push into it; the producer that learns the total (the source when it
//! fills its last buffer, a stage group when it pops its own last buffer, a
//! fork once it has routed its last) sets it before its own push, and every
//! push into the queue, that one included, precedes the final arrival.
//!
//! **Abort.** [`Queue::abort`] marks the queue failed and wakes every waiter;
//! every pop and push after it fails. The run aborts every queue when any stage
//! fails, so no thread stays blocked in the framework: each returns, runs its
//! cleanup and exits, and the buffers it held are dropped with it.
//!
//! Lost wake-ups: waiters count themselves under the lock and wait on the
//! condition variable under the same lock, so a push (notify one), the pop
//! that completes the queue (notify all) and an abort (notify all) always find
//! them. A push skips the notify only when every waiter already has a
//! wake-up on its way (issued or owed), and defers it only as `running.rs`
//! describes. A waiter also wakes by itself after [`crate::running::STALL`]
//! and takes an owed wake-up if buffers wait (the stall bound, `running.rs`).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::running::{Debtor, Running};
use crate::sync::{lock, Condvar, Mutex};

/// What a pop returned.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pop<T> {
    /// A buffer: its arrival index among its pipeline's buffers at this
    /// queue, and whether it is the last one.
    Item {
        /// The buffer.
        item: T,
        /// Which pipeline it belongs to.
        pipe: usize,
        /// How many buffers of that pipeline this queue gave out before it.
        index: u64,
        /// It is the last buffer of its pipeline at this queue.
        last: bool,
        /// Buffers left in the queue after this pop (its depth, for the
        /// report and priority policies, without locking it again).
        left: usize,
    },
    /// Every pipeline feeding this queue has delivered all its buffers.
    End,
    /// The run failed.
    Aborted,
}

#[derive(Debug, Clone, Copy, Default)]
struct Count {
    popped: u64,
    total: Option<u64>,
}

#[derive(Debug)]
struct State<T> {
    items: VecDeque<(usize, T)>,
    counts: Vec<Count>,
    complete: usize,
    aborted: bool,
    waiters: usize,
    /// Wake-ups owed to waiters (see `running.rs`).
    owed: usize,
    /// Wake-ups issued and not yet taken by a returning waiter; each one
    /// counted in the run's running count on the woken thread's behalf.
    notified: usize,
}

/// A FIFO of buffers between thread groups, with the end-of-stream count.
///
/// Aligned to 128 bytes (two cache lines, for the adjacent-line
/// prefetcher): queues are small and made one after another, and without it
/// two neighbours' locks can share a line, so that a stage pushing into one
/// and another popping from the next would contend for nothing.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
    cv: Condvar,
    /// The run's running count, for deferred wake-ups (`None`: always
    /// wake at once).
    running: Option<Arc<Running>>,
}

impl<T: Send + 'static> Queue<T> {
    /// A queue in a run of `pipes` pipelines, fed by those in `feeding`
    /// (more than one for a shared stage); the others count as complete.
    pub(crate) fn new(
        pipes: usize,
        feeding: &[usize],
        capacity: usize,
        running: Option<Arc<Running>>,
    ) -> Self {
        debug_assert!(!feeding.is_empty() && feeding.iter().all(|&p| p < pipes));
        Queue {
            state: Mutex::new(State {
                items: VecDeque::with_capacity(capacity),
                counts: vec![Count::default(); pipes],
                complete: pipes - feeding.len(),
                aborted: false,
                waiters: 0,
                owed: 0,
                notified: 0,
            }),
            cv: Condvar::new(),
            running,
        }
    }

    /// Add a buffer of pipeline `pipe`; gives it back if the run failed.
    /// Returns the queue's length after the push.
    ///
    /// A waiter is woken at once, unless the calling thread is a counted
    /// one and every core is busy: then its wake-up is owed (`running.rs`).
    pub(crate) fn push(self: &Arc<Self>, pipe: usize, item: T) -> Result<usize, T> {
        let mut s = lock(&self.state);
        if s.aborted {
            return Err(item);
        }
        s.items.push_back((pipe, item));
        let len = s.items.len();
        let (mut wake, mut owe) = (false, false);
        // Only a waiter with no wake-up on its way needs one.
        if s.waiters > s.notified + s.owed {
            match &self.running {
                Some(r) if r.defer() => {
                    s.owed += 1;
                    owe = s.owed == 1;
                }
                _ => {
                    wake = true;
                    s.notified += 1;
                    if let Some(r) = &self.running {
                        r.precount(1);
                    }
                }
            }
        }
        drop(s);
        if wake {
            self.cv.notify_one();
        }
        if let (true, Some(r)) = (owe, &self.running) {
            r.owe(self.clone() as Arc<dyn Debtor>);
        }
        Ok(len)
    }

    /// Wake the waiters this queue owes.
    fn pay_owed(&self) {
        let mut s = lock(&self.state);
        // Waiters may have left since (woken at the end of the stream):
        // a wake-up is only issued to a waiter that is there to take it.
        let n = std::mem::take(&mut s.owed).min(s.waiters - s.notified);
        s.notified += n;
        if let Some(r) = &self.running {
            r.precount(n);
        }
        let all = n >= s.waiters;
        drop(s);
        if all {
            self.cv.notify_all();
        } else {
            for _ in 0..n {
                self.cv.notify_one();
            }
        }
    }

    /// Announce how many buffers of `pipe` will ever be popped from this
    /// queue. Must come before the push of the final one (see the protocol).
    pub(crate) fn set_total(&self, pipe: usize, total: u64) {
        let mut s = lock(&self.state);
        let c = &mut s.counts[pipe];
        debug_assert!(c.total.is_none(), "total set twice");
        debug_assert!(c.popped < total, "total set after the final pop");
        c.total = Some(total);
    }

    /// Take the oldest buffer, waiting for one if needed. A counted thread
    /// leaves the running count while it waits.
    pub(crate) fn pop(&self) -> Pop<T> {
        let left = std::cell::Cell::new(false);
        let p = self.pop_inner(&left);
        if let Some(r) = &self.running {
            if left.get() {
                r.enter();
            } else if matches!(p, Pop::Item { left: 0, .. }) && crate::running::counted() {
                // The caller took the last buffer: it will wait after this
                // one. Pay owed wake-ups now, so the woken threads' wake-up
                // latency overlaps this buffer's work (`running.rs`).
                r.pay_ahead();
            }
        }
        p
    }

    /// A waiter returned: if a wake-up was on its way, it is this one's
    /// (whichever waiter it was meant for), and the running count already
    /// holds it: a counted thread that left resumes without counting
    /// itself again; a thread that is not counted gives the count back.
    fn took_wake_up(&self, s: &mut State<T>, left: &std::cell::Cell<bool>) -> bool {
        if s.notified == 0 {
            return false;
        }
        s.notified -= 1;
        if let Some(r) = &self.running {
            if left.get() {
                left.set(false);
                r.resume();
            } else {
                return true;
            }
        }
        false
    }

    fn pop_inner(&self, left: &std::cell::Cell<bool>) -> Pop<T> {
        let mut s = lock(&self.state);
        loop {
            if s.aborted {
                return Pop::Aborted;
            }
            if let Some((pipe, item)) = s.items.pop_front() {
                let c = &mut s.counts[pipe];
                let index = c.popped;
                c.popped += 1;
                let last = c.total == Some(c.popped);
                if last {
                    s.complete += 1;
                    if s.complete == s.counts.len() && s.waiters > 0 {
                        self.cv.notify_all();
                    }
                }
                return Pop::Item {
                    item,
                    pipe,
                    index,
                    last,
                    left: s.items.len(),
                };
            }
            if s.complete == s.counts.len() {
                return Pop::End;
            }
            if let (false, Some(r)) = (left.get(), &self.running) {
                if crate::running::counted() {
                    // Leaving may pay debts, which locks queues: not under
                    // this one's lock. Then look again.
                    drop(s);
                    r.leave();
                    left.set(true);
                    s = lock(&self.state);
                    continue;
                }
            }
            s.waiters += 1;
            // Timed: the stall bound of `running.rs` (loom never times out,
            // so its models check the protocol without this net).
            let (g, waited) = self
                .cv
                .wait_timeout(s, crate::running::STALL)
                .unwrap_or_else(|e| e.into_inner());
            s = g;
            s.waiters -= 1;
            if waited.timed_out() && s.notified == 0 && s.owed > 0 && !s.items.is_empty() {
                // An owed wake-up stalled: this waiter takes it itself.
                s.owed -= 1;
            }
            if self.took_wake_up(&mut s, left) {
                // Giving the count back may pay debts: not under the lock.
                drop(s);
                if let Some(r) = &self.running {
                    r.unprecount();
                }
                s = lock(&self.state);
            }
        }
    }

    /// Buffers waiting in the queue.
    pub(crate) fn len(&self) -> usize {
        lock(&self.state).items.len()
    }

    /// Fail the queue: wake every waiter; every later push and pop fails.
    /// Returns the buffers that were waiting (for the caller to drop).
    pub(crate) fn abort(&self) -> Vec<T> {
        let mut s = lock(&self.state);
        s.aborted = true;
        let items = s.items.drain(..).map(|(_, t)| t).collect();
        drop(s);
        self.cv.notify_all();
        items
    }
}

impl<T: Send + 'static> Debtor for Queue<T> {
    fn pay(&self) {
        self.pay_owed();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn item(p: Pop<u32>) -> (u32, u64, bool) {
        match p {
            Pop::Item {
                item, index, last, ..
            } => (item, index, last),
            other => panic!("expected an item, got {other:?}"),
        }
    }

    #[test]
    fn the_pop_that_reaches_the_total_is_last_then_end() {
        let q = Arc::new(Queue::new(1, &[0], 4, None));
        q.push(0, 7).unwrap();
        q.set_total(0, 2);
        q.push(0, 8).unwrap();
        assert_eq!(item(q.pop()), (7, 0, false));
        assert_eq!(item(q.pop()), (8, 1, true));
        assert_eq!(q.pop(), Pop::End);
    }

    #[test]
    fn a_shared_queue_ends_when_every_pipeline_is_complete() {
        let q = Arc::new(Queue::new(2, &[0, 1], 4, None));
        q.set_total(0, 1);
        q.push(0, 1).unwrap();
        assert!(item(q.pop()).2, "pipeline 0's only buffer is its last");
        q.set_total(1, 1);
        q.push(1, 2).unwrap();
        assert!(item(q.pop()).2);
        assert_eq!(q.pop(), Pop::End);
    }

    #[test]
    fn a_queue_not_fed_by_a_pipeline_does_not_wait_for_it() {
        let q = Arc::new(Queue::new(3, &[1], 4, None));
        q.set_total(1, 1);
        q.push(1, 5).unwrap();
        assert!(item(q.pop()).2);
        assert_eq!(q.pop(), Pop::End);
    }

    /// A counted thread that pops once from `q`, returned once it waits
    /// there (and so has left the running count).
    fn waiting_consumer(
        q: &Arc<Queue<u32>>,
        running: &Arc<Running>,
    ) -> std::thread::JoinHandle<Pop<u32>> {
        let (q2, r2) = (q.clone(), running.clone());
        let consumer = std::thread::spawn(move || {
            r2.enter();
            let p = q2.pop();
            r2.leave();
            p
        });
        while lock(&q.state).waiters == 0 {
            std::thread::yield_now();
        }
        consumer
    }

    /// On one core, a counted thread's push into a queue where a counted
    /// consumer waits leaves the wake-up owed; the producer's leaving (as
    /// when it waits or ends) pays it.
    #[test]
    fn a_push_on_busy_cores_owes_the_wake_up_and_leaving_pays_it() {
        let running = Arc::new(Running::new(1));
        let q = Arc::new(Queue::<u32>::new(1, &[0], 2, Some(running.clone())));
        let consumer = waiting_consumer(&q, &running);
        running.enter();
        assert!(running.defer(), "one core, one running thread: defer");
        q.push(0, 5).unwrap();
        assert_eq!(lock(&q.state).owed, 1, "the wake-up is owed");
        running.leave();
        assert_eq!(item(consumer.join().unwrap()), (5, 0, false));
        assert_eq!(lock(&q.state).owed, 0);
        assert_eq!(running.count(), 0);
    }

    /// A counted thread that takes the last buffer of its input pays the
    /// wake-ups it owes right then, before it leaves (`Running::pay_ahead`);
    /// with buffers left it does not.
    #[test]
    fn taking_the_last_buffer_pays_owed_wake_ups_ahead() {
        let running = Arc::new(Running::new(1));
        let out = Arc::new(Queue::<u32>::new(1, &[0], 2, Some(running.clone())));
        let inp = Arc::new(Queue::<u32>::new(1, &[0], 2, Some(running.clone())));
        let consumer = waiting_consumer(&out, &running);
        inp.push(0, 1).unwrap();
        inp.push(0, 2).unwrap();
        running.enter();
        out.push(0, 5).unwrap();
        assert_eq!(lock(&out.state).owed, 1, "the wake-up is owed");
        assert!(matches!(inp.pop(), Pop::Item { left: 1, .. }));
        assert_eq!(lock(&out.state).owed, 1, "a buffer is left: still owed");
        assert!(matches!(inp.pop(), Pop::Item { left: 0, .. }));
        assert_eq!(lock(&out.state).owed, 0, "the last buffer pays ahead");
        assert_eq!(item(consumer.join().unwrap()), (5, 0, false));
        running.leave();
        assert_eq!(running.count(), 0);
    }

    /// A thread that is not counted (a test's, a self-sizing stage's
    /// worker) always wakes at once.
    #[test]
    fn an_uncounted_thread_never_defers() {
        let running = Arc::new(Running::new(1));
        assert!(!running.defer());
        running.enter();
        assert!(running.defer());
        running.leave();
        assert!(!running.defer());
    }

    #[test]
    fn abort_wakes_a_waiter_and_fails_pushes() {
        let q = std::sync::Arc::new(Queue::<u32>::new(1, &[0], 1, None));
        let q2 = q.clone();
        let waiter = std::thread::spawn(move || q2.pop());
        // Wait until the waiter is really blocked (no timing margin involved).
        while lock(&q.state).waiters == 0 {
            std::thread::yield_now();
        }
        q.abort();
        assert_eq!(waiter.join().unwrap(), Pop::Aborted);
        assert_eq!(q.push(0, 1), Err(1));
    }
}
