//! The lock-free queue's preallocated ring: crossbeam-queue 0.3.14's
//! `ArrayQueue` (MIT OR Apache-2.0, the same licence as this crate; Dmitry
//! Vyukov's bounded MPMC queue), cut to what the pool uses, with one change:
//! a thread that waits on another's unfinished operation on a slot yields
//! its core after a few spins, instead of only spinning.
//!
//! A push claims its slot by moving the tail, *then* writes the task and
//! the slot's stamp. A pop that finds the tail moved but the stamp not yet
//! written must wait for that write: the task is the oldest, and FIFO order
//! forbids taking the next. Upstream, that wait only spins. A pusher
//! preempted between its claim and its write — the front end of a server,
//! on a machine where 60 workers and a database share two cores — then
//! leaves every worker that looks for a task spinning a whole scheduler
//! slice before the pusher runs again: `perf record` of a pool of 64 on
//! two cores showed 64 workers in `ArrayQueue::pop` for 100–150 ms at a
//! time, and every request in flight waited that long (a few times a
//! minute, enough to set a 10 s phase's 99th percentile). Yielding hands
//! the core to the preempted thread. A push that finds its slot still being
//! read by a preempted pop waits the same way.

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::sync::atomic::{self, AtomicU64, Ordering};

use crossbeam_utils::{Backoff, CachePadded};

/// A slot: its stamp says whose turn it is (the tail's: to be written; the
/// head's plus one: to be read), and the task.
struct Slot<T> {
    stamp: AtomicU64,
    value: UnsafeCell<MaybeUninit<T>>,
}

/// A bounded multi-producer multi-consumer FIFO (module docs).
pub(crate) struct Ring<T> {
    /// Where pops take from: an index in the buffer below `one_lap`, the
    /// lap above.
    head: CachePadded<AtomicU64>,
    /// Where pushes go, as `head`.
    tail: CachePadded<AtomicU64>,
    buffer: Box<[Slot<T>]>,
    cap: usize,
    /// `{ lap: 1, index: 0 }`: the smallest power of two above `cap`.
    one_lap: u64,
    /// Waits on an unfinished operation that got as far as yielding.
    #[cfg(test)]
    yielded: std::sync::atomic::AtomicUsize,
    /// Pushes hold their claimed slot, unwritten, while this is set.
    #[cfg(test)]
    hold_claims: std::sync::atomic::AtomicBool,
}

// SAFETY: as `ArrayQueue`: a slot's value is only touched by the one thread
// whose compare-exchange claimed it, and handed over by its stamp.
unsafe impl<T: Send> Sync for Ring<T> {}
unsafe impl<T: Send> Send for Ring<T> {}

impl<T> Ring<T> {
    /// A ring of `cap` slots (at least one).
    pub(crate) fn new(cap: usize) -> Self {
        assert!(cap > 0, "capacity must be non-zero");
        let buffer = (0..cap)
            .map(|i| Slot {
                stamp: AtomicU64::new(i as u64),
                value: UnsafeCell::new(MaybeUninit::uninit()),
            })
            .collect();
        let one_lap = (cap as u64 + 1).next_power_of_two();
        Ring {
            head: CachePadded::new(AtomicU64::new(0)),
            tail: CachePadded::new(AtomicU64::new(0)),
            buffer,
            cap,
            one_lap,
            #[cfg(test)]
            yielded: Default::default(),
            #[cfg(test)]
            hold_claims: Default::default(),
        }
    }

    /// The position after `pos`.
    fn next(&self, pos: u64) -> u64 {
        let index = (pos & (self.one_lap - 1)) as usize;
        if index + 1 < self.cap {
            pos + 1
        } else {
            (pos & !(self.one_lap - 1)).wrapping_add(self.one_lap)
        }
    }

    /// Wait a moment for another thread's unfinished operation on a slot:
    /// spin briefly, then give the core away (module docs).
    fn wait_for_other(&self, backoff: &Backoff) {
        #[cfg(test)]
        if backoff.is_completed() {
            self.yielded.fetch_add(1, Ordering::Relaxed);
        }
        backoff.snooze();
    }

    /// Add `value` at the tail; gives it back if the ring is full.
    pub(crate) fn push(&self, value: T) -> Result<(), T> {
        let backoff = Backoff::new();
        let mut tail = self.tail.load(Ordering::Relaxed);
        loop {
            let index = (tail & (self.one_lap - 1)) as usize;
            // SAFETY: the index part of a position is below `cap`.
            let slot = unsafe { self.buffer.get_unchecked(index) };
            let stamp = slot.stamp.load(Ordering::Acquire);
            if tail == stamp {
                match self.tail.compare_exchange_weak(
                    tail,
                    self.next(tail),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        #[cfg(test)]
                        while self.hold_claims.load(Ordering::Acquire) {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        // SAFETY: the claim makes this thread the slot's
                        // only writer until the stamp hands it on.
                        unsafe { slot.value.get().write(MaybeUninit::new(value)) };
                        slot.stamp.store(tail + 1, Ordering::Release);
                        return Ok(());
                    }
                    Err(t) => {
                        tail = t;
                        backoff.spin();
                    }
                }
            } else if stamp.wrapping_add(self.one_lap) == tail + 1 {
                // The slot still holds last lap's task.
                atomic::fence(Ordering::SeqCst);
                let head = self.head.load(Ordering::Relaxed);
                if head.wrapping_add(self.one_lap) == tail {
                    return Err(value);
                }
                // Not full: a pop has claimed the slot and not read it yet.
                self.wait_for_other(&backoff);
                tail = self.tail.load(Ordering::Relaxed);
            } else {
                // Another push moved the tail past this position.
                self.wait_for_other(&backoff);
                tail = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Take the task at the head, if any.
    pub(crate) fn pop(&self) -> Option<T> {
        let backoff = Backoff::new();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let index = (head & (self.one_lap - 1)) as usize;
            // SAFETY: the index part of a position is below `cap`.
            let slot = unsafe { self.buffer.get_unchecked(index) };
            let stamp = slot.stamp.load(Ordering::Acquire);
            if head + 1 == stamp {
                match self.head.compare_exchange_weak(
                    head,
                    self.next(head),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // SAFETY: the claim makes this thread the slot's
                        // only reader; the stamp said it was written.
                        let value = unsafe { slot.value.get().read().assume_init() };
                        slot.stamp
                            .store(head.wrapping_add(self.one_lap), Ordering::Release);
                        return Some(value);
                    }
                    Err(h) => {
                        head = h;
                        backoff.spin();
                    }
                }
            } else if stamp == head {
                atomic::fence(Ordering::SeqCst);
                if self.tail.load(Ordering::Relaxed) == head {
                    return None;
                }
                // A push has claimed the slot and not written it yet.
                self.wait_for_other(&backoff);
                head = self.head.load(Ordering::Relaxed);
            } else {
                // Another pop moved the head past this position.
                self.wait_for_other(&backoff);
                head = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// True if the ring holds nothing (`SeqCst` loads of head and tail).
    pub(crate) fn is_empty(&self) -> bool {
        let head = self.head.load(Ordering::SeqCst);
        let tail = self.tail.load(Ordering::SeqCst);
        tail == head
    }

    /// Tasks in the ring (claimed slots included).
    pub(crate) fn len(&self) -> usize {
        loop {
            let tail = self.tail.load(Ordering::SeqCst);
            let head = self.head.load(Ordering::SeqCst);
            if self.tail.load(Ordering::SeqCst) == tail {
                return self.distance(head, tail);
            }
        }
    }

    /// Slots from `head` to `tail`.
    fn distance(&self, head: u64, tail: u64) -> usize {
        let hix = (head & (self.one_lap - 1)) as usize;
        let tix = (tail & (self.one_lap - 1)) as usize;
        if hix < tix {
            tix - hix
        } else if hix > tix {
            self.cap - hix + tix
        } else if tail == head {
            0
        } else {
            self.cap
        }
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        if std::mem::needs_drop::<T>() {
            let head = *self.head.get_mut();
            let tail = *self.tail.get_mut();
            let hix = (head & (self.one_lap - 1)) as usize;
            for i in 0..self.distance(head, tail) {
                let index = (hix + i) % self.cap;
                // SAFETY: with `&mut self` no operation is unfinished, and
                // the slots from head to tail hold written tasks.
                unsafe { (*self.buffer[index].value.get()).assume_init_drop() };
            }
        }
    }
}

impl<T> fmt::Debug for Ring<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ring")
            .field("len", &self.len())
            .field("cap", &self.cap)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn fifo_full_and_wraps_around() {
        let r = Ring::new(3);
        for lap in 0..5 {
            for i in 0..3 {
                r.push(lap * 10 + i).unwrap();
            }
            assert_eq!(r.push(99), Err(99), "full");
            assert_eq!(r.len(), 3);
            for i in 0..3 {
                assert_eq!(r.pop(), Some(lap * 10 + i));
            }
            assert_eq!(r.pop(), None);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn dropping_drops_the_tasks_left() {
        let token = Arc::new(());
        let r = Ring::new(4);
        // Around the ring more than once, ending with four in it.
        for _ in 0..3 {
            r.push(token.clone()).unwrap();
            r.push(token.clone()).unwrap();
            r.pop();
        }
        r.push(token.clone()).unwrap();
        assert!(r.push(token.clone()).is_err(), "full with four");
        assert_eq!(Arc::strong_count(&token), 5);
        drop(r);
        assert_eq!(Arc::strong_count(&token), 1);
    }

    #[test]
    fn many_threads_lose_and_repeat_nothing() {
        let r = Arc::new(Ring::new(8));
        let per = 20_000u64;
        let pushers: Vec<_> = (0..3u64)
            .map(|p| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..per {
                        let mut v = p * per + i;
                        while let Err(back) = r.push(v) {
                            v = back;
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let poppers: Vec<_> = (0..3)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    let deadline = Instant::now() + Duration::from_secs(60);
                    while got.len() < per as usize && Instant::now() < deadline {
                        match r.pop() {
                            Some(v) => got.push(v),
                            None => std::thread::yield_now(),
                        }
                    }
                    got
                })
            })
            .collect();
        pushers.into_iter().for_each(|h| h.join().unwrap());
        let mut all: Vec<u64> = poppers
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..3 * per).collect::<Vec<_>>());
    }

    #[test]
    fn a_pop_waiting_on_an_unwritten_push_gives_its_core_away() {
        let r = Arc::new(Ring::new(4));
        r.hold_claims.store(true, Ordering::Release);
        let pusher = {
            let r = r.clone();
            std::thread::spawn(move || r.push(7))
        };
        while r.is_empty() {
            std::thread::yield_now();
        }
        // The slot is claimed and unwritten: the pop must wait, yielding.
        let popper = {
            let r = r.clone();
            std::thread::spawn(move || r.pop())
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while r.yielded.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let yielded = r.yielded.load(Ordering::Relaxed);
        r.hold_claims.store(false, Ordering::Release);
        pusher.join().unwrap().unwrap();
        assert_eq!(
            popper.join().unwrap(),
            Some(7),
            "the wait ends with the task"
        );
        assert!(yielded > 0, "the waiting pop only spun");
    }
}
