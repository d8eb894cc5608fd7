//! The unbounded queue's overflow: crossbeam-queue 0.3.14's `SegQueue`
//! (MIT OR Apache-2.0, the same licence as this crate), with one change — its
//! blocks are recycled instead of freed — and one addition, the read-only
//! hint [`SegQueue::looks_empty`].
//!
//! A `SegQueue` is a lock-free linked list of 31-slot blocks. Upstream, the
//! pusher that fills a block `calloc`s the next one and the popper that
//! empties a block frees it. With 64-byte task slots a block is ~2 KiB, and a
//! backlog of 100 000 tasks is 6 MiB that glibc hands back to the kernel
//! (`MADV_DONTNEED`) once the backlog drains, only to fault it in again,
//! zeroed page by page, at the next backlog: `perf record` of eight
//! submitters put a quarter of all CPU time in page faults, page clearing,
//! `unmap_page_range` and `sysmalloc` (`docs/design.md`, "The
//! overflow").
//!
//! Here a freed block goes onto the queue's own spare list (up to
//! [`MAX_SPARE_BLOCKS`]) and the next block is taken from it, its slot
//! states and `next` pointer reset. The queue's protocol is untouched:
//! `SegQueue` only ever frees a block once no thread can touch it again
//! (the `DESTROY` hand-off below), and a thread holding a stale block
//! pointer never dereferences it before a compare-exchange on the
//! monotonic head or tail index, which fails once the block was retired.
//! So handing the block back out is indistinguishable from `malloc`
//! returning the same address — which it is free to do anyway.

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{self, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crossbeam_utils::{Backoff, CachePadded};

/// Spare blocks a queue keeps at most (2 KiB each with tasks: 32 MiB, a
/// backlog of ~500 000 tasks); blocks freed beyond that go back to `malloc`.
/// Like a `VecDeque`'s capacity, the memory of the largest backlog (up to
/// this) stays with the queue until the pool is dropped: the next backlog
/// then touches no fresh page. With 4 096 (8 MiB) eight submitters of
/// 400 000 tasks still faulted 2.5× the pages of the crossbeam pool.
pub(crate) const MAX_SPARE_BLOCKS: usize = 16_384;

// Bits indicating the state of a slot: a value was written into it, read
// from it, or the block is being destroyed.
const WRITE: usize = 1;
const READ: usize = 2;
const DESTROY: usize = 4;

// Each block covers one "lap" of indices; the last index of a lap is the
// moment the next block is being installed.
const LAP: u64 = 32;
const BLOCK_CAP: usize = LAP as usize - 1;
// Lower index bits reserved for metadata; the one there says "not the last block".
const SHIFT: u64 = 1;
const HAS_NEXT: u64 = 1;

#[repr(C)]
struct Slot<T> {
    value: UnsafeCell<MaybeUninit<T>>,
    state: AtomicUsize,
}

impl<T> Slot<T> {
    /// Waits until a value is written into the slot.
    fn wait_write(&self) {
        let backoff = Backoff::new();
        while self.state.load(Ordering::Acquire) & WRITE == 0 {
            backoff.snooze();
        }
    }
}

/// Cache-line aligned, with the slots first: a task's slot (56 bytes of
/// task, 8 of state) is then exactly one line, so a pusher filling one slot
/// and a popper emptying the one before never write the same line.
/// (Upstream puts `next` first and aligns to 8, so every slot straddles two
/// lines and each shares one with its neighbour.)
#[repr(C, align(64))]
struct Block<T> {
    slots: [Slot<T>; BLOCK_CAP],
    next: AtomicPtr<Block<T>>,
}

impl<T> Block<T> {
    /// A zeroed block: `next` null, every slot state 0, values uninitialised.
    fn alloc() -> *mut Block<T> {
        let layout = std::alloc::Layout::new::<Self>();
        // SAFETY: the layout is not zero-sized (it holds an `AtomicPtr`).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout)
        }
        // Zero is a valid `AtomicPtr` (null), `AtomicUsize` and `MaybeUninit`.
        ptr.cast()
    }

    /// Frees a block from `alloc`.
    ///
    /// # Safety
    /// No thread may use `this` again.
    unsafe fn free(this: *mut Block<T>) {
        std::alloc::dealloc(this.cast(), std::alloc::Layout::new::<Self>());
    }

    /// Waits until the next pointer is set.
    fn wait_next(&self) -> *mut Block<T> {
        let backoff = Backoff::new();
        loop {
            let next = self.next.load(Ordering::Acquire);
            if !next.is_null() {
                return next;
            }
            backoff.snooze();
        }
    }
}

/// A position in a queue.
struct Position<T> {
    index: AtomicU64,
    block: AtomicPtr<Block<T>>,
}

/// An unbounded lock-free MPMC FIFO whose blocks are recycled.
pub(crate) struct SegQueue<T> {
    head: CachePadded<Position<T>>,
    tail: CachePadded<Position<T>>,
    /// Retired blocks, ready for reuse (locked once per 31 tasks).
    spare: Mutex<Vec<SpareBlock<T>>>,
}

/// A retired block on the spare list.
struct SpareBlock<T>(*mut Block<T>);

// SAFETY: a spare block is owned by the list: no thread references it.
unsafe impl<T: Send> Send for SpareBlock<T> {}

// SAFETY: as crossbeam's `SegQueue`: values move between threads by value.
unsafe impl<T: Send> Send for SegQueue<T> {}
// SAFETY: as above; all shared state is atomic or behind the spare lock.
unsafe impl<T: Send> Sync for SegQueue<T> {}

impl<T> SegQueue<T> {
    /// An empty queue (allocates nothing until the first push).
    pub(crate) fn new() -> Self {
        SegQueue {
            head: CachePadded::new(Position {
                block: AtomicPtr::new(ptr::null_mut()),
                index: AtomicU64::new(0),
            }),
            tail: CachePadded::new(Position {
                block: AtomicPtr::new(ptr::null_mut()),
                index: AtomicU64::new(0),
            }),
            spare: Mutex::new(Vec::new()),
        }
    }

    /// A fresh block: a spare one reset, or a new one.
    fn new_block(&self) -> *mut Block<T> {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match spare {
            Some(SpareBlock(block)) => {
                // SAFETY: a spare block is owned by us alone (see `retire`).
                unsafe {
                    (*block).next.store(ptr::null_mut(), Ordering::Relaxed);
                    for slot in &(*block).slots {
                        slot.state.store(0, Ordering::Relaxed);
                    }
                }
                // Published to other threads by the `Release` stores that
                // install it (as a fresh allocation would be).
                block
            }
            None => Block::alloc(),
        }
    }

    /// Keep a block nobody uses any more for reuse (or free it).
    ///
    /// # Safety
    /// No thread may use `block` again.
    unsafe fn retire(&self, block: *mut Block<T>) {
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < MAX_SPARE_BLOCKS {
            spare.push(SpareBlock(block));
        } else {
            drop(spare);
            Block::free(block);
        }
    }

    /// Sets the `DESTROY` bit in slots from `start` on and retires the block,
    /// unless a reader still uses a slot: that reader then finishes the job.
    ///
    /// # Safety
    /// Called by the reader of slot `start - 1` (or of the last slot).
    unsafe fn destroy(&self, this: *mut Block<T>, start: usize) {
        // The last slot need not be marked: its reader began the destruction.
        for i in start..BLOCK_CAP - 1 {
            let slot = (*this).slots.get_unchecked(i);
            if slot.state.load(Ordering::Acquire) & READ == 0
                && slot.state.fetch_or(DESTROY, Ordering::AcqRel) & READ == 0
            {
                return;
            }
        }
        self.retire(this);
    }

    /// Push at the tail.
    pub(crate) fn push(&self, value: T) {
        let backoff = Backoff::new();
        let mut tail = self.tail.index.load(Ordering::Acquire);
        let mut block = self.tail.block.load(Ordering::Acquire);
        let mut next_block: *mut Block<T> = ptr::null_mut();

        loop {
            let offset = ((tail >> SHIFT) % LAP) as usize;

            // End of the block: wait until the next one is installed.
            if offset == BLOCK_CAP {
                backoff.snooze();
                tail = self.tail.index.load(Ordering::Acquire);
                block = self.tail.block.load(Ordering::Acquire);
                continue;
            }

            // About to fill the block: get the next one ready in advance.
            if offset + 1 == BLOCK_CAP && next_block.is_null() {
                next_block = self.new_block();
            }

            // The first push installs the first block.
            if block.is_null() {
                let new = self.new_block();
                if self
                    .tail
                    .block
                    .compare_exchange(block, new, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
                {
                    self.head.block.store(new, Ordering::Release);
                    block = new;
                } else {
                    if next_block.is_null() {
                        next_block = new;
                    } else {
                        // SAFETY: never published.
                        unsafe { self.retire(new) };
                    }
                    tail = self.tail.index.load(Ordering::Acquire);
                    block = self.tail.block.load(Ordering::Acquire);
                    continue;
                }
            }

            let new_tail = tail + (1 << SHIFT);
            match self.tail.index.compare_exchange_weak(
                tail,
                new_tail,
                Ordering::SeqCst,
                Ordering::Acquire,
            ) {
                // SAFETY: the compare-exchange reserved slot `offset` of
                // `block`, which stays alive until that slot has been read.
                Ok(_) => unsafe {
                    if offset + 1 == BLOCK_CAP {
                        let next = std::mem::replace(&mut next_block, ptr::null_mut());
                        let next_index = new_tail.wrapping_add(1 << SHIFT);
                        self.tail.block.store(next, Ordering::Release);
                        self.tail.index.store(next_index, Ordering::Release);
                        (*block).next.store(next, Ordering::Release);
                    }
                    let slot = (*block).slots.get_unchecked(offset);
                    slot.value.get().write(MaybeUninit::new(value));
                    slot.state.fetch_or(WRITE, Ordering::Release);
                    if !next_block.is_null() {
                        // Prepared but another pusher installed the block.
                        self.retire(next_block);
                    }
                    return;
                },
                Err(t) => {
                    tail = t;
                    block = self.tail.block.load(Ordering::Acquire);
                    backoff.spin();
                }
            }
        }
    }

    /// Pop the head, if any.
    pub(crate) fn pop(&self) -> Option<T> {
        let backoff = Backoff::new();
        let mut head = self.head.index.load(Ordering::Acquire);
        let mut block = self.head.block.load(Ordering::Acquire);

        loop {
            let offset = ((head >> SHIFT) % LAP) as usize;

            // End of the block: wait until the next one is installed.
            if offset == BLOCK_CAP {
                backoff.snooze();
                head = self.head.index.load(Ordering::Acquire);
                block = self.head.block.load(Ordering::Acquire);
                continue;
            }

            let mut new_head = head + (1 << SHIFT);
            if new_head & HAS_NEXT == 0 {
                atomic::fence(Ordering::SeqCst);
                let tail = self.tail.index.load(Ordering::Relaxed);
                if head >> SHIFT == tail >> SHIFT {
                    return None;
                }
                // Head and tail in different blocks: set `HAS_NEXT` in head.
                if (head >> SHIFT) / LAP != (tail >> SHIFT) / LAP {
                    new_head |= HAS_NEXT;
                }
            }

            // Null only while the first push is in progress.
            if block.is_null() {
                backoff.snooze();
                head = self.head.index.load(Ordering::Acquire);
                block = self.head.block.load(Ordering::Acquire);
                continue;
            }

            match self.head.index.compare_exchange_weak(
                head,
                new_head,
                Ordering::SeqCst,
                Ordering::Acquire,
            ) {
                // SAFETY: the compare-exchange reserved slot `offset` of
                // `block`; the block lives until every slot was read.
                Ok(_) => unsafe {
                    if offset + 1 == BLOCK_CAP {
                        let next = (*block).wait_next();
                        let mut next_index = (new_head & !HAS_NEXT).wrapping_add(1 << SHIFT);
                        if !(*next).next.load(Ordering::Relaxed).is_null() {
                            next_index |= HAS_NEXT;
                        }
                        self.head.block.store(next, Ordering::Release);
                        self.head.index.store(next_index, Ordering::Release);
                    }

                    let slot = (*block).slots.get_unchecked(offset);
                    slot.wait_write();
                    let value = slot.value.get().read().assume_init();

                    // Retire the block at its end, or if a thread wanted to
                    // but could not because we were still reading this slot.
                    if offset + 1 == BLOCK_CAP {
                        self.destroy(block, 0);
                    } else if slot.state.fetch_or(READ, Ordering::AcqRel) & DESTROY != 0 {
                        self.destroy(block, offset + 1);
                    }
                    return Some(value);
                },
                Err(h) => {
                    head = h;
                    block = self.head.block.load(Ordering::Acquire);
                    backoff.spin();
                }
            }
        }
    }

    /// A hint for skipping a `pop` (and its fence) on an empty queue: true
    /// if it looked empty. Reads only the head while head and tail are in
    /// different blocks (a backlog), so a popper does not pull in the tail's
    /// line, which every push writes. May be stale either way.
    #[inline]
    pub(crate) fn looks_empty(&self) -> bool {
        let head = self.head.index.load(Ordering::Relaxed);
        head & HAS_NEXT == 0 && head >> SHIFT == self.tail.index.load(Ordering::Relaxed) >> SHIFT
    }

    /// True if the queue holds nothing (`SeqCst` loads of head and tail).
    pub(crate) fn is_empty(&self) -> bool {
        let head = self.head.index.load(Ordering::SeqCst);
        let tail = self.tail.index.load(Ordering::SeqCst);
        head >> SHIFT == tail >> SHIFT
    }

    /// Values in the queue now.
    pub(crate) fn len(&self) -> usize {
        loop {
            let mut tail = self.tail.index.load(Ordering::SeqCst);
            let mut head = self.head.index.load(Ordering::SeqCst);
            // Consistent only if the tail did not move meanwhile.
            if self.tail.index.load(Ordering::SeqCst) == tail {
                tail &= !((1 << SHIFT) - 1);
                head &= !((1 << SHIFT) - 1);
                // Indices on a block's end count as the next block's start.
                if (tail >> SHIFT) & (LAP - 1) == LAP - 1 {
                    tail = tail.wrapping_add(1 << SHIFT);
                }
                if (head >> SHIFT) & (LAP - 1) == LAP - 1 {
                    head = head.wrapping_add(1 << SHIFT);
                }
                // Rotate so that head falls into the first block.
                let lap = (head >> SHIFT) / LAP;
                tail = tail.wrapping_sub((lap * LAP) << SHIFT);
                head = head.wrapping_sub((lap * LAP) << SHIFT);
                tail >>= SHIFT;
                head >>= SHIFT;
                // The difference, minus one end index per block between them.
                return (tail - head - tail / LAP) as usize;
            }
        }
    }

    /// Spare blocks held now.
    #[cfg(test)]
    fn spare_blocks(&self) -> usize {
        self.spare.lock().unwrap().len()
    }
}

impl<T> Drop for SegQueue<T> {
    fn drop(&mut self) {
        let mut head = *self.head.index.get_mut() & !((1 << SHIFT) - 1);
        let tail = *self.tail.index.get_mut() & !((1 << SHIFT) - 1);
        let mut block = *self.head.block.get_mut();
        // SAFETY: exclusive access; the values between head and tail are
        // initialised, and every block from head on is owned by the queue.
        unsafe {
            while head != tail {
                let offset = ((head >> SHIFT) % LAP) as usize;
                if offset < BLOCK_CAP {
                    let slot = (*block).slots.get_unchecked(offset);
                    (*slot.value.get()).assume_init_drop();
                } else {
                    let next = *(*block).next.get_mut();
                    Block::free(block);
                    block = next;
                }
                head = head.wrapping_add(1 << SHIFT);
            }
            if !block.is_null() {
                Block::free(block);
            }
            for SpareBlock(b) in self
                .spare
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..)
            {
                Block::free(b);
            }
        }
    }
}

impl<T> fmt::Debug for SegQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("SegQueue { .. }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_task_slot_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Slot<crate::task::Task>>(), 64);
        assert_eq!(std::mem::align_of::<Block<crate::task::Task>>(), 64);
        assert_eq!(std::mem::offset_of!(Block<crate::task::Task>, slots), 0);
    }

    #[test]
    fn fifo_across_blocks_and_recycles_them() {
        let q = SegQueue::new();
        for round in 0..3 {
            for i in 0..10 * BLOCK_CAP {
                q.push(i);
            }
            assert_eq!(q.len(), 10 * BLOCK_CAP);
            for i in 0..10 * BLOCK_CAP {
                assert_eq!(q.pop(), Some(i), "round {round}");
            }
            assert!(q.is_empty() && q.pop().is_none());
            assert_eq!(q.len(), 0);
            // Every block the round filled is spare now (the current tail
            // block stays installed).
            assert!(q.spare_blocks() >= 9, "round {round}: {}", q.spare_blocks());
        }
        assert!(q.spare_blocks() <= 11, "blocks were reused, not piled up");
    }

    #[test]
    fn looks_empty_agrees_with_is_empty_when_quiet() {
        let q = SegQueue::new();
        assert!(q.looks_empty());
        for n in [1, BLOCK_CAP - 1, BLOCK_CAP, 3 * BLOCK_CAP + 2] {
            for i in 0..n {
                q.push(i);
                assert!(!q.looks_empty(), "{i} of {n} pushed");
            }
            for i in 0..n {
                assert!(!q.looks_empty(), "{i} of {n} popped");
                q.pop().unwrap();
            }
            assert!(q.looks_empty() && q.is_empty());
        }
    }

    #[test]
    fn drop_frees_queued_values() {
        let q = SegQueue::new();
        let v = Arc::new(());
        for _ in 0..3 * BLOCK_CAP + 5 {
            q.push(v.clone());
        }
        for _ in 0..BLOCK_CAP + 2 {
            q.pop();
        }
        drop(q);
        assert_eq!(Arc::strong_count(&v), 1);
    }

    /// Four pushers and four poppers through backlogs that grow and drain
    /// again and again (so blocks go through the spare list many times):
    /// every value comes out exactly once, and each pusher's in order.
    #[test]
    fn recycled_blocks_lose_and_duplicate_nothing() {
        const PUSHERS: usize = 4;
        const PER: usize = 20_000;
        let q = Arc::new(SegQueue::new());
        let seen: Arc<Vec<AtomicUsize>> =
            Arc::new((0..PUSHERS * PER).map(|_| AtomicUsize::new(0)).collect());
        let popped = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2 * PUSHERS)
            .map(|t| {
                let (q, seen, popped) = (q.clone(), seen.clone(), popped.clone());
                std::thread::spawn(move || {
                    if t < PUSHERS {
                        for i in 0..PER {
                            q.push(t * PER + i);
                            if i % 3_000 == 0 {
                                std::thread::yield_now();
                            }
                        }
                    } else {
                        let mut last = [None; PUSHERS];
                        while popped.load(Ordering::Relaxed) < PUSHERS * PER {
                            match q.pop() {
                                Some(v) => {
                                    assert_eq!(seen[v].fetch_add(1, Ordering::Relaxed), 0);
                                    let (p, i) = (v / PER, v % PER);
                                    assert!(last[p].is_none_or(|l| l < i), "order");
                                    last[p] = Some(i);
                                    popped.fetch_add(1, Ordering::Relaxed);
                                }
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
        assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
        assert!(q.is_empty() && q.pop().is_none());
    }
}
