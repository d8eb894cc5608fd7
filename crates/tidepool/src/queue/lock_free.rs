//! The fastest flavor: crossbeam's lock-free queues.
//!
//! Bounded, it is one preallocated ring ([`Ring`], crossbeam's `ArrayQueue`
//! whose waits on a preempted thread yield). Unbounded, it is one
//! shard per core (up to four); each shard is a preallocated ring that
//! spills into a segmented lock-free list ([`SegQueue`], crossbeam's with its
//! blocks recycled) only while the ring is full. Tasks are stored by value
//! (56 bytes). The ring reuses its slots forever and costs two
//! read-modify-writes per task; the list four, which is why it is not the
//! whole queue — but once the ring is full the pool is backlogged, and there
//! the list's lock-free push and pop matter more: the mutex-guarded deque
//! that used to be the overflow made every push and pop of a backlog contend
//! on one lock (with two submitters on two cores, a quarter of all CPU time
//! in `Overflow::push`/`pop`, and futex sleeps on a quiet machine;
//! `docs/design.md`, "The overflow"), and crossbeam's own
//! `SegQueue` made every backlog fault its memory in afresh (the same
//! section). Why shards: see [`LockFreeQueue`].

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use super::ring::Ring;
use super::seg::SegQueue;
use super::spill;
use super::width::Width;

use super::TaskQueue;
use crate::task::Task;

/// Ring slots of the unbounded queue, shared out among its shards (64 bytes
/// each: 256 KiB, however many shards).
pub const RING_SLOTS: usize = 4096;

/// Shards of the unbounded queue at most (one per core up to this).
pub const MAX_SHARDS: usize = 4;

/// A lock-free FIFO per submitting thread. Idle workers spin, then yield,
/// then park.
///
/// Unbounded, it is one shard per core (up to `MAX_SHARDS`, 4): a thread
/// pushes to its home shard and pops from its home shard first, then from
/// the others. With more submitters than cores, two submitters running at
/// once then usually push to different tails, and two workers pop from
/// different heads, instead of all of them taking turns on one line (a
/// failed compare-exchange and its back-off were a third of every push and
/// a fifth of every pop with eight submitters: `docs/design.md`, "Shards"). Each submitting thread's tasks stay in FIFO order, but for
/// the spill race (`queue::spill`, "What the order is"); tasks of different
/// threads may run in any order, as they could anyway (their submits race). Until a second thread submits, the queue is *narrow*:
/// pops start at the one submitter's shard and skip the sharded pop's
/// bookkeeping (`queue::width`). Bounded, it is one ring: the
/// capacity and the back-pressure protocol (`pool::room`) are about one
/// queue.
#[derive(Debug)]
pub struct LockFreeQueue {
    shards: Box<[CachePadded<Shard>]>,
    /// Unbounded with several shards: whether a second thread has submitted
    /// yet; until then pops take the short path ([`width`](super::width)).
    width: Width,
}

/// One FIFO: a preallocated ring that, when unbounded, spills into a list.
#[derive(Debug)]
struct Shard {
    /// The preallocated ring: the whole shard when bounded; when unbounded,
    /// used while the overflow is empty.
    ring: Ring<Task>,
    /// Unbounded only: tasks pushed while the ring was full, and every later
    /// task until this drains (so order is kept: the ring's tasks are older).
    overflow: Option<SegQueue<Task>>,
    /// Unbounded only: pushes go to the overflow without checking whether it
    /// is empty, until a pop finds the shard empty ([`spill`]: the check
    /// reads the overflow's head, which every pop writes). On its own line:
    /// every push reads it, and it changes only with the regime.
    spilled: CachePadded<AtomicBool>,
}

impl spill::Flag for AtomicBool {
    #[inline]
    fn get(&self) -> bool {
        self.load(Relaxed)
    }

    #[inline]
    fn set(&self, spilled: bool) {
        self.store(spilled, Relaxed);
    }
}

impl spill::Part<Task> for Ring<Task> {
    #[inline]
    fn push(&self, task: Task) -> Result<(), Task> {
        Ring::push(self, task)
    }

    #[inline]
    fn pop(&self) -> Option<Task> {
        Ring::pop(self)
    }

    #[inline]
    fn looks_empty(&self) -> bool {
        self.is_empty()
    }

    #[inline]
    fn is_empty(&self) -> bool {
        Ring::is_empty(self)
    }
}

impl spill::Part<Task> for SegQueue<Task> {
    #[inline]
    fn push(&self, task: Task) -> Result<(), Task> {
        SegQueue::push(self, task);
        Ok(())
    }

    #[inline]
    fn pop(&self) -> Option<Task> {
        SegQueue::pop(self)
    }

    #[inline]
    fn looks_empty(&self) -> bool {
        SegQueue::looks_empty(self)
    }

    #[inline]
    fn is_empty(&self) -> bool {
        SegQueue::is_empty(self)
    }
}

/// The next thread id (see `SEAT`).
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    /// This thread's *seat*: a thread id, unique for the process, above
    /// `SEAT_SHIFT`, and its home shard (modulo `MAX_SHARDS`) below; 0 until
    /// it first needs one. Its pushes go to its home shard; the id tells the
    /// queue's first submitter from any other ([`width`](super::width)).
    static SEAT: Cell<usize> = const { Cell::new(0) };
    /// This thread's pops from sharded queues (picks the fair turns).
    static POPS: Cell<u32> = const { Cell::new(0) };
}

/// Bits of a seat below its thread id: its home shard.
const SEAT_SHIFT: u32 = MAX_SHARDS.trailing_zeros();

/// One pop in this many (per thread) starts at another shard than home, in
/// rotation: a thread whose home shard never empties still visits every
/// other shard, so no task waits forever behind a busy shard (a pool shrunk
/// to one worker, say, with one busy submitter).
const FAIR_EVERY: u32 = 8;

/// Make shard `n` (modulo the number of shards) the calling thread's home:
/// a pool gives its workers consecutive homes, so that two workers start
/// popping at different heads.
pub(crate) fn set_home(n: usize) {
    let id = seat() >> SEAT_SHIFT;
    SEAT.with(|h| h.set((id << SEAT_SHIFT) | (n % MAX_SHARDS)));
}

/// The calling thread's seat (threads that never got one get the next id,
/// and homes dealt round-robin by it).
#[inline]
fn seat() -> usize {
    SEAT.with(|h| {
        let mut v = h.get();
        if v == 0 {
            let id = NEXT_ID.fetch_add(1, Relaxed);
            v = (id << SEAT_SHIFT) | (id % MAX_SHARDS);
            h.set(v);
        }
        v
    })
}

/// A seat's home shard among `shards`. Shard counts are powers of two
/// dividing `MAX_SHARDS`: consecutive homes stay consecutive shards, and a
/// mask does what `%` would without a division on every push and pop.
#[inline]
fn shard_of(seat: usize, shards: usize) -> usize {
    debug_assert!(shards.is_power_of_two() && MAX_SHARDS.is_multiple_of(shards));
    seat & (shards - 1)
}

/// The calling thread's home shard among `shards`.
#[inline]
fn home(shards: usize) -> usize {
    shard_of(seat(), shards)
}

impl LockFreeQueue {
    /// A queue holding at most `capacity` tasks (`None`: unbounded, sharded
    /// one shard per core).
    pub fn new(capacity: Option<usize>) -> Self {
        Self::with_shards(capacity, crate::sys::cores())
    }

    /// As [`new`](Self::new) with `shards` shards when unbounded (rounded
    /// down to a power of two, at most [`MAX_SHARDS`]).
    fn with_shards(capacity: Option<usize>, shards: usize) -> Self {
        let shards = match capacity {
            Some(n) => vec![CachePadded::new(Shard {
                ring: Ring::new(n.max(1)),
                overflow: None,
                spilled: CachePadded::new(AtomicBool::new(false)),
            })],
            None => {
                let n = shards.clamp(1, MAX_SHARDS);
                let n = 1 << n.ilog2();
                (0..n)
                    .map(|_| {
                        CachePadded::new(Shard {
                            ring: Ring::new(RING_SLOTS / n),
                            overflow: Some(SegQueue::new()),
                            spilled: CachePadded::new(AtomicBool::new(false)),
                        })
                    })
                    .collect()
            }
        };
        LockFreeQueue {
            shards: shards.into_boxed_slice(),
            width: Width::default(),
        }
    }
}

impl Shard {
    #[inline]
    fn push(&self, task: Task) -> Result<(), Task> {
        match &self.overflow {
            None => self.ring.push(task),
            Some(overflow) => {
                spill::push(&*self.spilled, &self.ring, overflow, task);
                Ok(())
            }
        }
    }

    #[inline]
    fn pop(&self) -> Option<Task> {
        match &self.overflow {
            // A plain-load check skips a failed `pop` and its fence.
            None if self.ring.is_empty() => None,
            None => self.ring.pop(),
            Some(overflow) => spill::pop(&*self.spilled, &self.ring, overflow),
        }
    }

    fn len(&self) -> usize {
        self.ring.len() + self.overflow.as_ref().map_or(0, SegQueue::len)
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.ring.is_empty() && self.overflow.as_ref().is_none_or(SegQueue::is_empty)
    }
}

impl LockFreeQueue {
    /// Pop from every shard but `first`, in turn after it: the narrow pop
    /// found its first shard empty (`width`: no pop ever skips a shard).
    #[inline(never)]
    fn pop_rest(&self, first: usize, n: usize) -> Option<Task> {
        (1..n).find_map(|i| self.shards[(first + i) & (n - 1)].pop())
    }
}

impl TaskQueue for LockFreeQueue {
    #[inline]
    fn push(&self, task: Task) -> Result<(), Task> {
        let n = self.shards.len();
        if n == 1 {
            return self.shards[0].push(task);
        }
        let seat = seat();
        self.width.note_push(seat);
        self.shards[shard_of(seat, n)].push(task)
    }

    #[inline]
    fn pop(&self) -> Option<Task> {
        let n = self.shards.len();
        if n == 1 {
            return self.shards[0].pop();
        }
        if let Some(owner) = self.width.narrow() {
            // One submitter so far: its home shard is the only one with
            // tasks (but for a push racing the widening, which the rest
            // finds). No thread-local, no rotation.
            let first = shard_of(owner, n);
            if let Some(task) = self.shards[first].pop() {
                return Some(task);
            }
            return self.pop_rest(first, n);
        }
        let pops = POPS.with(|p| {
            let k = p.get().wrapping_add(1);
            p.set(k);
            k
        });
        let mut start = home(n);
        if pops.is_multiple_of(FAIR_EVERY) {
            start += (pops / FAIR_EVERY) as usize;
        }
        (0..n).find_map(|i| self.shards[(start + i) & (n - 1)].pop())
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.is_empty())
    }

    fn spin_before_park(&self) -> bool {
        true
    }

    /// Our `Ring::push` and `SegQueue::push` (both crossbeam-queue 0.3.14's)
    /// move the tail with a `SeqCst` compare-exchange, and their `is_empty`
    /// loads head and tail with `SeqCst`. `is_empty` asks every
    /// shard, so whichever shard a push went to, the argument of
    /// `pool::sleep` holds for it.
    fn push_is_seq_cst(&self) -> bool {
        true
    }

    /// Likewise both `pop`s move the head with a `SeqCst` compare-exchange and
    /// `len` loads head and tail with `SeqCst`. (Only the bounded queue — one
    /// ring, no shards — ever blocks a submitter.)
    fn pop_is_seq_cst(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn spills_past_the_ring_and_keeps_order() {
        let q = LockFreeQueue::with_shards(None, 1);
        let out = Arc::new(Mutex::new(Vec::new()));
        let n = 2 * RING_SLOTS + 100;
        for i in 0..n {
            let out = out.clone();
            q.push(Task::new(move || {
                out.lock().unwrap().push(i);
                false
            }))
            .unwrap();
        }
        assert_eq!(q.len(), n);
        // Drain part of the ring, push more: they queue behind the overflow.
        for _ in 0..10 {
            q.pop().unwrap().run();
        }
        for i in n..n + 5 {
            let out = out.clone();
            q.push(Task::new(move || {
                out.lock().unwrap().push(i);
                false
            }))
            .unwrap();
        }
        while let Some(t) = q.pop() {
            t.run();
        }
        assert!(q.is_empty());
        assert_eq!(*out.lock().unwrap(), (0..n + 5).collect::<Vec<_>>());
    }

    /// The spill flag: set when the ring fills, cleared by the pop that
    /// finds the shard empty. A push that read it set after that went to
    /// the overflow: the next push finds the overflow non-empty and follows
    /// it there (order kept), setting the flag again.
    #[test]
    fn the_spill_flag_follows_the_overflow() {
        let q = LockFreeQueue::with_shards(None, 1);
        let shard = &q.shards[0];
        let out = Arc::new(Mutex::new(Vec::new()));
        let task = |i: usize| {
            let out = out.clone();
            Task::new(move || {
                out.lock().unwrap().push(i);
                false
            })
        };
        for i in 0..RING_SLOTS + 1 {
            q.push(task(i)).unwrap();
        }
        assert!(shard.spilled.load(Relaxed), "the ring filled");
        while let Some(t) = q.pop() {
            t.run();
        }
        assert!(!shard.spilled.load(Relaxed), "the drain cleared it");
        q.push(task(RING_SLOTS + 1)).unwrap();
        assert_eq!(shard.ring.len(), 1, "back to the ring");
        q.pop().unwrap().run();
        // A push that read the flag just before the drain cleared it.
        shard.overflow.as_ref().unwrap().push(task(RING_SLOTS + 2));
        q.push(task(RING_SLOTS + 3)).unwrap();
        assert_eq!(shard.ring.len(), 0, "it followed its predecessor");
        assert!(shard.spilled.load(Relaxed));
        while let Some(t) = q.pop() {
            t.run();
        }
        assert_eq!(
            *out.lock().unwrap(),
            (0..RING_SLOTS + 4).collect::<Vec<_>>()
        );
    }

    /// A backlog drained by two workers while two submitters keep adding:
    /// every task runs exactly once, through the ring and the overflow.
    #[test]
    fn a_backlog_drains_through_refills_exactly_once() {
        const PER: usize = 3 * RING_SLOTS;
        let q = Arc::new(LockFreeQueue::with_shards(None, 1));
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let task = |ran: &Arc<std::sync::atomic::AtomicUsize>| {
            let ran = ran.clone();
            Task::new(move || {
                ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                false
            })
        };
        for _ in 0..PER {
            q.push(task(&ran)).unwrap();
        }
        assert!(q.len() >= PER && !q.shards[0].overflow.as_ref().unwrap().is_empty());
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (q, ran) = (q.clone(), ran.clone());
                std::thread::spawn(move || {
                    if i < 2 {
                        for _ in 0..PER {
                            q.push(task(&ran)).unwrap();
                        }
                    } else {
                        while ran.load(std::sync::atomic::Ordering::Relaxed) < 3 * PER {
                            match q.pop() {
                                Some(t) => t.run(),
                                None => std::thread::yield_now(),
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 3 * PER);
        assert!(q.is_empty() && q.pop().is_none() && q.len() == 0);
    }

    #[test]
    fn unbounded_has_a_power_of_two_of_shards_bounded_one() {
        for (cores, want) in [(0, 1), (1, 1), (2, 2), (3, 2), (4, 4), (64, MAX_SHARDS)] {
            assert_eq!(LockFreeQueue::with_shards(None, cores).shards.len(), want);
        }
        assert_eq!(LockFreeQueue::with_shards(Some(8), 4).shards.len(), 1);
    }

    /// A task pushed from any thread is found by a pop from any other: the
    /// pop goes on to the shards that are not its home.
    #[test]
    fn a_pop_finds_tasks_in_every_shard() {
        let q = Arc::new(LockFreeQueue::with_shards(None, 4));
        for h in 0..MAX_SHARDS {
            let q = q.clone();
            std::thread::spawn(move || {
                set_home(h);
                q.push(Task::new(|| false)).unwrap();
            })
            .join()
            .unwrap();
        }
        assert_eq!(q.len(), 4);
        for h in 0..MAX_SHARDS {
            assert!(q.shards[h].len() == 1, "shard {h} got its pusher's task");
        }
        let popper = std::thread::spawn(move || {
            set_home(2);
            let mut n = 0;
            while let Some(t) = q.pop() {
                t.run();
                n += 1;
            }
            assert!(q.is_empty());
            n
        });
        assert_eq!(popper.join().unwrap(), 4);
    }

    /// One submitting thread keeps the queue narrow, however many threads
    /// pop; the first push by another thread widens it for good, and the
    /// first submitter's tasks stay in its home shard before and after.
    #[test]
    fn narrow_until_a_second_submitter() {
        let q = Arc::new(LockFreeQueue::with_shards(None, 2));
        assert_eq!(q.width.narrow(), Some(0), "no push yet");
        let first = {
            let q = q.clone();
            std::thread::spawn(move || {
                set_home(1);
                for _ in 0..3 {
                    q.push(Task::new(|| false)).unwrap();
                }
                seat()
            })
            .join()
            .unwrap()
        };
        assert_eq!(q.width.narrow(), Some(first), "claimed by its first pusher");
        assert_eq!(q.shards[1].len(), 3, "in the pusher's home shard");
        for _ in 0..2 {
            let q = q.clone();
            std::thread::spawn(move || q.pop().unwrap().run())
                .join()
                .unwrap();
        }
        assert_eq!(q.width.narrow(), Some(first), "pops do not widen");
        let q2 = q.clone();
        std::thread::spawn(move || {
            set_home(1);
            q2.push(Task::new(|| false)).unwrap();
        })
        .join()
        .unwrap();
        assert_eq!(q.width.narrow(), None, "a second submitter widened it");
        assert_eq!(q.shards[1].len(), 2, "same home, same shard");
        while let Some(t) = q.pop() {
            t.run();
        }
        assert!(q.is_empty());
    }

    /// Seats are unique per thread, even for threads with the same home, so
    /// a thread that starts after the owner has gone is a second submitter.
    #[test]
    fn seats_are_unique_per_thread() {
        let seats: Vec<usize> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    set_home(0);
                    seat()
                })
                .join()
                .unwrap()
            })
            .collect();
        assert!(seats.iter().all(|&s| s != 0 && s & (MAX_SHARDS - 1) == 0));
        let mut unique = seats.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), seats.len());
    }

    /// A single popper whose home shard never runs dry still takes the
    /// other shards' tasks within a bounded number of pops.
    #[test]
    fn a_busy_home_shard_starves_no_other() {
        let q = Arc::new(LockFreeQueue::with_shards(None, 2));
        let ran = Arc::new(Mutex::new(Vec::new()));
        let pusher = {
            let (q, ran) = (q.clone(), ran.clone());
            std::thread::spawn(move || {
                set_home(1);
                q.push(Task::new(move || {
                    ran.lock().unwrap().push(usize::MAX);
                    false
                }))
                .unwrap();
            })
        };
        pusher.join().unwrap();
        let popper = std::thread::spawn(move || {
            set_home(0);
            for i in 0..10 * FAIR_EVERY as usize {
                // Home always has work: one more pushed for each popped.
                let ran = ran.clone();
                q.push(Task::new(move || {
                    ran.lock().unwrap().push(i);
                    false
                }))
                .unwrap();
                q.pop().unwrap().run();
            }
            let ran = ran.lock().unwrap();
            ran.iter().position(|&i| i == usize::MAX)
        });
        let at = popper.join().unwrap().expect("the other shard's task ran");
        assert!(at < 2 * FAIR_EVERY as usize, "ran only after {at} pops");
    }

    /// How many of `indices` have a smaller index after them: the tasks a
    /// popper took *early*, ahead of older ones of the same submitter.
    /// Taking those out leaves the rest in increasing order.
    fn taken_early(indices: &[usize]) -> usize {
        let mut later_min = usize::MAX;
        let mut early = 0;
        for &i in indices.iter().rev() {
            if i > later_min {
                early += 1;
            }
            later_min = later_min.min(i);
        }
        early
    }

    #[test]
    fn early_tasks_are_those_with_a_smaller_one_after_them() {
        assert_eq!(taken_early(&[0, 1, 2, 3]), 0);
        // The spill race: one overflow task (9) taken ahead of the ring's.
        assert_eq!(taken_early(&[0, 1, 9, 2, 3, 8, 10]), 1);
        assert_eq!(taken_early(&[0, 9, 10, 2, 3]), 2);
        // A queue that is not FIFO at all shows it everywhere.
        assert_eq!(taken_early(&[5, 4, 3, 2, 1, 0]), 5);
    }

    /// At most this many tasks per popper and submitter may run early in
    /// the stress tests below: the spill race (`queue::spill`, "What the
    /// order is") needs a popper descheduled between its look at the ring
    /// and its look at the overflow while the overflow drains and the ring
    /// fills again, so a run sees it once in a while, never often; a queue
    /// that reordered for any other reason would show it in thousands.
    const EARLY_AT_MOST: usize = 4;

    /// `submitters` threads push `per` tasks each while `poppers` threads
    /// pop them (`before(t, i)` runs on submitter `t` before its push `i`):
    /// every task runs exactly once, and each popper runs each submitter's
    /// tasks in the order they were submitted, but for the spill race's few
    /// early tasks ([`EARLY_AT_MOST`]).
    fn every_task_once_in_order(
        q: &Arc<LockFreeQueue>,
        submitters: usize,
        per: usize,
        poppers: usize,
        before: impl Fn(usize, usize) + Send + Sync + 'static,
    ) {
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        thread_local! {
            /// (submitter, index) of the tasks this thread ran, in order.
            static RAN: std::cell::RefCell<Vec<(usize, usize)>> = const {
                std::cell::RefCell::new(Vec::new())
            };
        }
        let seen: Arc<Vec<AtomicUsize>> =
            Arc::new((0..submitters * per).map(|_| AtomicUsize::new(0)).collect());
        let (done, before) = (Arc::new(AtomicUsize::new(0)), Arc::new(before));
        let threads: Vec<_> = (0..submitters + poppers)
            .map(|t| {
                let (q, seen, done, before) =
                    (q.clone(), seen.clone(), done.clone(), before.clone());
                std::thread::spawn(move || {
                    if t < submitters {
                        for i in 0..per {
                            before(t, i);
                            let seen = seen.clone();
                            q.push(Task::new(move || {
                                seen[t * per + i].fetch_add(1, Relaxed);
                                RAN.with(|r| r.borrow_mut().push((t, i)));
                                false
                            }))
                            .unwrap();
                        }
                        return true;
                    }
                    while done.load(Relaxed) < submitters * per {
                        match q.pop() {
                            Some(task) => {
                                task.run();
                                done.fetch_add(1, Relaxed);
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                    let mut of: Vec<Vec<usize>> = vec![Vec::new(); submitters];
                    RAN.with(|r| r.borrow().iter().for_each(|&(s, i)| of[s].push(i)));
                    of.iter().all(|v| taken_early(v) <= EARLY_AT_MOST)
                })
            })
            .collect();
        for t in threads {
            assert!(
                t.join().unwrap(),
                "a popper ran more than {EARLY_AT_MOST} of a submitter's tasks early"
            );
        }
        assert!(
            seen.iter().all(|s| s.load(Relaxed) == 1),
            "each task exactly once"
        );
        assert!(q.is_empty() && q.len() == 0);
    }

    /// Eight submitting threads (two per shard) and four poppers, through
    /// ring and overflow.
    #[test]
    fn sharded_every_task_once_each_submitters_in_order() {
        let q = Arc::new(LockFreeQueue::with_shards(None, 4));
        every_task_once_in_order(&q, 8, RING_SLOTS + 3_000, 4, |_, _| {});
    }

    /// The widening under load: a first submitter (home 0) pushes while two
    /// workers pop; halfway through, a second submitter (home 1) joins and
    /// widens the queue. No task is lost or run twice across the switch, and
    /// each submitter's tasks run in order.
    #[test]
    fn widening_loses_no_task_and_keeps_order() {
        use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
        const PER: usize = RING_SLOTS + 2_000; // through ring and overflow
        for _ in 0..20 {
            let q = Arc::new(LockFreeQueue::with_shards(None, 2));
            let halfway = Arc::new(AtomicBool::new(false));
            every_task_once_in_order(&q, 2, PER, 2, move |t, i| match (t, i) {
                (_, 0) => {
                    set_home(t);
                    while t == 1 && !halfway.load(Relaxed) {
                        std::hint::spin_loop();
                    }
                }
                (0, i) if i == PER / 2 => halfway.store(true, Relaxed),
                _ => {}
            });
            assert_eq!(q.width.narrow(), None, "the second submitter widened it");
        }
    }
}
