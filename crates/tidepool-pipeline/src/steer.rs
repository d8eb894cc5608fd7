//! Steered wake-ups: a thread that frees its core hands it to the thread
//! it wakes, by placing that thread on its own CPU.
//!
//! # Why
//!
//! When a stage thread is about to wait (its input is empty) it pays the
//! wake-ups it owes (`running.rs`), so that another stage thread takes its
//! core. But the kernel queues the woken thread where *it* chooses — often
//! behind the thread running on the other core, since neither core is idle
//! at the moment of the wake-up. The payer's core then goes idle, and the
//! idle core does not pull the queued thread over (it ran there a moment
//! ago: "cache hot"), so both wait — a median 180 µs per such idle period,
//! 14% of both cores in a traced `balanced-compute` run (`docs/benchmarks.md`,
//! pipelines, session 4). So the payer steers the one thread it wakes onto
//! its own CPU: before the notify, under the queue's lock, it reads the
//! waiter's CPU mask, narrows it to the payer's current CPU, and leaves
//! the saved mask in the queue; the woken thread, on its way out of the
//! wait, puts its mask back. It then runs on the core its payer frees.
//!
//! # Protocol
//!
//! Only a payment made by a counted thread that is about to free its core
//! (it leaves the count, or pays ahead having taken its input's last
//! buffer) steers, at most one waiter per payment, and only a queue's sole
//! waiter (whom the notify must then reach). A queue keeps at most one
//! steered waiter: its tid and saved mask, set under the queue's lock
//! before the notify. Every waiter, each time it returns from the wait
//! (woken, spuriously or by the end of the stream or an abort), looks
//! under the same lock for its own tid there and, if found, takes the
//! saved mask and restores it before doing anything else. A waiter cannot
//! return between the save and the narrowing (both under the lock it needs
//! to return), so no mask is ever lost, and a waiter is steered only while
//! it waits. Steering changes where a thread runs, never whether it is
//! woken: the wake-up protocol (`queue.rs`, `running.rs`) is unchanged, and
//! a failed system call only means the wake-up is not steered.

use std::cell::Cell;

/// A thread's saved CPU mask.
#[cfg(target_os = "linux")]
pub(crate) type Mask = libc::cpu_set_t;
/// A thread's saved CPU mask (none where the OS has no affinity calls).
#[cfg(not(target_os = "linux"))]
pub(crate) type Mask = ();

/// A waiter steered onto its payer's CPU, with the mask to restore.
pub(crate) struct Steered {
    /// The waiter's kernel thread id.
    pub(crate) tid: i32,
    /// Its mask before the steering.
    pub(crate) mask: Mask,
}

impl std::fmt::Debug for Steered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Steered").field("tid", &self.tid).finish()
    }
}

std::thread_local!(static TID: Cell<i32> = const { Cell::new(0) });

/// The calling thread's kernel thread id (cached: one `gettid` per thread).
pub(crate) fn tid() -> i32 {
    TID.with(|t| {
        if t.get() == 0 {
            t.set(crate::sys::thread_id());
        }
        t.get()
    })
}

/// The CPU the calling thread runs on.
pub(crate) fn current_cpu() -> Option<usize> {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        // SAFETY: no arguments; returns -1 on failure.
        let c = unsafe { libc::sched_getcpu() };
        usize::try_from(c).ok()
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    None
}

/// Narrow thread `tid`'s CPU mask to `cpu`; returns its mask before.
pub(crate) fn steer(tid: i32, cpu: usize) -> Option<Steered> {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        if tid <= 0 || cpu >= libc::CPU_SETSIZE as usize {
            return None;
        }
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls get
        // its exact size.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::sched_getaffinity(tid, size, &mut mask) } != 0 {
            return None;
        }
        // SAFETY: `cpu` is below CPU_SETSIZE.
        if !unsafe { libc::CPU_ISSET(cpu, &mask) } {
            return None; // the waiter may not run there
        }
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        unsafe { libc::CPU_SET(cpu, &mut one) };
        if unsafe { libc::sched_setaffinity(tid, size, &one) } != 0 {
            return None;
        }
        Some(Steered { tid, mask })
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    {
        let _ = (tid, cpu);
        None
    }
}

/// Put the calling thread's mask back after a steering.
pub(crate) fn restore(s: &Steered) {
    #[cfg(all(target_os = "linux", not(loom)))]
    // SAFETY: the mask was read by sched_getaffinity, with its exact size.
    unsafe {
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &s.mask);
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    let _ = s;
}

#[cfg(all(test, not(loom), target_os = "linux"))]
mod tests {
    use super::*;

    /// Steering narrows a thread's mask to one CPU and restoring puts the
    /// old mask back.
    #[test]
    fn steer_narrows_and_restore_puts_back() {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let get = || {
            let mut m: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            assert_eq!(unsafe { libc::sched_getaffinity(0, size, &mut m) }, 0);
            m
        };
        let before = get();
        let cpu = current_cpu().expect("sched_getcpu works on Linux");
        let s = steer(tid(), cpu).expect("a thread may narrow its own mask");
        let during = get();
        assert_eq!(unsafe { libc::CPU_COUNT(&during) }, 1);
        assert!(unsafe { libc::CPU_ISSET(cpu, &during) });
        restore(&s);
        let after = get();
        assert!(unsafe { libc::CPU_EQUAL(&before, &after) });
    }
}
