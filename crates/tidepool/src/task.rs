//! A unit of work as it travels through the queue.
//!
//! Small closures (up to 32 bytes of captures — an `Arc`, a few integers) are
//! stored *inside* the task, so the task moves through the queue by value and
//! submitting it allocates nothing: no `malloc` on the submitting thread, no
//! `free` on the worker. That is Xu & Bode's node recycling (thesis §4.2: the
//! task queue reuses its nodes "to remove the overhead of repeated malloc and
//! free calls") taken one step further: the queue's slots are the nodes.
//! Larger closures are boxed and the box pointer is stored instead.

use std::fmt;
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// Clock ticks of a task's submission and acceptance (0 with statistics off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Stamps {
    pub(crate) submitted: u64,
    pub(crate) accepted: u64,
}

/// Room for a closure's captures inside the task.
type Storage = MaybeUninit<[usize; 4]>;

/// A task waiting in a pool's queue.
///
/// [`Pool::shutdown_now`](crate::Pool::shutdown_now) hands back the tasks that
/// never started; [`run`](Task::run) runs one on the calling thread, and
/// dropping it cancels it (its `JoinHandle` then reports
/// [`JoinError::Cancelled`](crate::JoinError::Cancelled)).
// `repr(C)` with the function pointer (the niche an `Option<Task>` uses)
// last: every copy of a task, whole or without its discriminant, then
// moves the same 16-byte chunks from offset 0, so each load is served by
// one earlier store. With the pointer first (the compiler's choice), the
// copies after a `pop`'s `Some` check read 16 bytes from offset 8 across
// two 16-byte stores, which the CPU cannot forward: a stall per chunk,
// several per task (`docs/design.md`, "Task copies").
#[repr(C)]
pub struct Task {
    pub(crate) stamps: Stamps,
    storage: Storage,
    /// Consumes the closure held in `storage`: runs it (`Op::Run`, returning
    /// true if the user's code panicked and the panic was already handed to a
    /// handle) or drops it unrun (`Op::Drop`). One pointer for both keeps a
    /// task at 56 bytes.
    consume: unsafe fn(*mut Storage, Op) -> bool,
}

/// What `Task::consume` does with the closure.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Run,
    Drop,
}

// SAFETY: `Task`s are only built from `Send` closures (`Task::stamped`), and
// nothing reads the closure through a shared reference.
unsafe impl Send for Task {}
// SAFETY: a `&Task` gives access only to the stamps, never to the closure.
unsafe impl Sync for Task {}

/// What a task runs: a closure returning whether it panicked, or a named
/// body the submitter can take back unrun (see [`Task::into_body`]).
pub(crate) trait Body: Send + 'static {
    /// Run; true if the user's code panicked (and was already handled).
    fn call(self) -> bool;
}

impl<F: FnOnce() -> bool + Send + 'static> Body for F {
    #[inline]
    fn call(self) -> bool {
        self()
    }
}

unsafe fn consume_inline<F: Body>(storage: *mut Storage, op: Op) -> bool {
    // SAFETY (caller): `storage` holds an `F` written by `Task::stamped`,
    // which is moved out here exactly once.
    let f = ptr::read(storage as *mut F);
    op == Op::Run && f.call()
}

unsafe fn consume_boxed<F: Body>(storage: *mut Storage, op: Op) -> bool {
    let f = ptr::read(storage as *mut Box<F>);
    op == Op::Run && (*f).call()
}

impl Task {
    /// Wrap a closure that returns whether it panicked (no timestamps).
    #[cfg(test)]
    pub(crate) fn new(f: impl FnOnce() -> bool + Send + 'static) -> Self {
        Self::stamped(f, 0)
    }

    /// Wrap a closure submitted (and accepted) at `ticks`.
    #[inline]
    pub(crate) fn stamped<F: Body>(f: F, ticks: u64) -> Self {
        let mut storage = Storage::uninit();
        let stamps = Stamps {
            submitted: ticks,
            accepted: ticks,
        };
        if Self::fits_inline::<F>() {
            // SAFETY: `F` fits in `storage` in size and alignment.
            unsafe { ptr::write(storage.as_mut_ptr() as *mut F, f) };
            Task {
                stamps,
                consume: consume_inline::<F>,
                storage,
            }
        } else {
            // SAFETY: a `Box` is one pointer: it always fits.
            unsafe { ptr::write(storage.as_mut_ptr() as *mut Box<F>, Box::new(f)) };
            Task {
                stamps,
                consume: consume_boxed::<F>,
                storage,
            }
        }
    }

    /// Take the body back unrun (a rejected submission returns it).
    ///
    /// # Safety
    /// `F` must be the type this task was built with by [`Task::stamped`].
    pub(crate) unsafe fn into_body<F: Body>(self) -> F {
        let mut this = ManuallyDrop::new(self);
        let storage: *mut Storage = &mut this.storage;
        if Self::fits_inline::<F>() {
            ptr::read(storage as *mut F)
        } else {
            *ptr::read(storage as *mut Box<F>)
        }
    }

    /// Whether a closure of type `F` is stored inside the task.
    pub(crate) const fn fits_inline<F>() -> bool {
        size_of::<F>() <= size_of::<Storage>() && align_of::<F>() <= align_of::<Storage>()
    }

    /// Run on the current thread, catching a panic; true if it panicked.
    #[inline]
    pub(crate) fn call(self) -> bool {
        self.call_catching().unwrap_or(true)
    }

    /// Run on the current thread: `Ok(true)` if the task panicked and its
    /// handle took the panic, `Err(payload)` if nobody took it.
    #[inline]
    pub(crate) fn call_catching(self) -> Result<bool, Box<dyn std::any::Any + Send>> {
        let mut this = ManuallyDrop::new(self);
        let consume = this.consume;
        let storage: *mut Storage = &mut this.storage;
        // SAFETY: `storage` holds the closure `consume` expects; `this` is
        // never dropped, so the closure is consumed exactly once.
        catch_unwind(AssertUnwindSafe(|| unsafe { consume(storage, Op::Run) }))
    }

    /// Run the task on the calling thread. A panic in the task is caught and
    /// delivered as it would have been on a worker.
    pub fn run(self) {
        self.call();
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: a task that is dropped (not `call`ed) still holds its closure.
        unsafe { (self.consume)(&mut self.storage, Op::Drop) };
    }
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("stamps", &self.stamps)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts drops of its payload.
    struct Probe(Arc<AtomicUsize>);
    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn small_closures_live_inline_large_ones_are_boxed() {
        let arc = Arc::new(());
        let small = move || Arc::strong_count(&arc) == 0;
        assert!(Task::fits_inline::<typeof_helper::Closure<8>>());
        assert!(!Task::fits_inline::<typeof_helper::Closure<64>>());
        assert!(!Task::stamped(small, 1).call());
        assert_eq!(size_of::<Task>(), 56);
    }

    mod typeof_helper {
        /// A stand-in closure type of `N` bytes.
        pub struct Closure<const N: usize>(#[allow(dead_code)] pub [u8; N]);
    }

    /// Runs one task built from `make` and drops another unrun, checking
    /// that the body runs once and the captures drop once each time.
    fn run_once_drop_once<F>(make: impl Fn(Probe, Arc<AtomicUsize>) -> F, inline: bool)
    where
        F: FnOnce() -> bool + Send + 'static,
    {
        assert_eq!(Task::fits_inline::<F>(), inline);
        let drops = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let t = Task::stamped(make(Probe(drops.clone()), ran.clone()), 7);
        assert_eq!(t.stamps.submitted, 7);
        assert!(!t.call());
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "captures dropped after the run"
        );

        drop(Task::stamped(make(Probe(drops.clone()), ran.clone()), 0));
        assert_eq!(ran.load(Ordering::SeqCst), 1, "a dropped task never runs");
        assert_eq!(drops.load(Ordering::SeqCst), 2, "its captures are dropped");
    }

    #[test]
    fn inline_and_boxed_closures_run_once_and_drop_once() {
        run_once_drop_once(
            |probe, ran| {
                move || {
                    let _keep = &probe;
                    ran.fetch_add(1, Ordering::SeqCst);
                    false
                }
            },
            true,
        );
        run_once_drop_once(
            |probe, ran| {
                let pad = [1u8; 64];
                move || {
                    let _keep = &probe;
                    assert_eq!(pad[63], 1);
                    ran.fetch_add(1, Ordering::SeqCst);
                    false
                }
            },
            false,
        );
    }

    #[test]
    fn run_catches_panics_and_still_drops_captures() {
        let drops = Arc::new(AtomicUsize::new(0));
        let probe = Probe(drops.clone());
        let t = Task::new(move || {
            let _keep = &probe;
            panic!("inside a task")
        });
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        assert!(t.call());
        std::panic::set_hook(prev);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert!(!Task::new(|| false).call());
    }
}
