//! A bounded lock-free queue for pooled mode's sticky groups (`pooled.rs`,
//! "Sticky groups"): `crossbeam-queue`'s `ArrayQueue`, or under `loom` a
//! model of it whose emptiness is read from an atomic count, so that the
//! model sees the stale reads the protocol's fences must rule out.

#[cfg(not(loom))]
/// A bounded MPMC queue (pooled mode uses it with one consumer).
pub(crate) struct Ring<T>(crossbeam_queue::ArrayQueue<T>);

#[cfg(not(loom))]
impl<T> Ring<T> {
    /// A ring for at most `cap` items (at least one).
    pub(crate) fn new(cap: usize) -> Self {
        Ring(crossbeam_queue::ArrayQueue::new(cap.max(1)))
    }

    /// Add an item; the ring is sized so that it is never full.
    pub(crate) fn push(&self, t: T) {
        if self.0.push(t).is_err() {
            panic!("ring sized to the pool overflowed");
        }
    }

    pub(crate) fn pop(&self) -> Option<T> {
        self.0.pop()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(loom)]
/// The model: items under a mutex, emptiness from an atomic count read
/// without it (as `ArrayQueue` reads its indices).
pub(crate) struct Ring<T> {
    items: loom::sync::Mutex<std::collections::VecDeque<T>>,
    len: loom::sync::atomic::AtomicUsize,
    cap: usize,
}

#[cfg(loom)]
impl<T> Ring<T> {
    pub(crate) fn new(cap: usize) -> Self {
        Ring {
            items: loom::sync::Mutex::new(std::collections::VecDeque::new()),
            len: loom::sync::atomic::AtomicUsize::new(0),
            cap: cap.max(1),
        }
    }

    pub(crate) fn push(&self, t: T) {
        use std::sync::atomic::Ordering::Release;
        let mut q = self.items.lock().unwrap();
        assert!(q.len() < self.cap, "ring sized to the pool overflowed");
        q.push_back(t);
        self.len.fetch_add(1, Release);
    }

    pub(crate) fn pop(&self) -> Option<T> {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        if self.len.load(Acquire) == 0 {
            return None;
        }
        let mut q = self.items.lock().unwrap();
        let t = q.pop_front();
        if t.is_some() {
            self.len.fetch_sub(1, Relaxed);
        }
        t
    }

    pub(crate) fn len(&self) -> usize {
        self.len.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
