//! Scheduler slice requests.

use std::time::Duration;

/// Ask the scheduler for a time slice for the calling thread (Linux 6.12+
/// EEVDF: `sched_attr::sched_runtime` of a `SCHED_OTHER` thread is its slice
/// request, 0.1–100 ms; 0 restores the default). Keeps the thread's nice
/// value. Returns whether the kernel accepted it; always `false` elsewhere.
#[cfg(all(target_os = "linux", not(tidepool_no_os)))]
pub(crate) fn request_slice(slice: Duration) -> bool {
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        sched_policy: u32,
        sched_flags: u64,
        sched_nice: i32,
        sched_priority: u32,
        sched_runtime: u64,
        sched_deadline: u64,
        sched_period: u64,
    }
    // SAFETY: getpriority reads the calling thread's nice value.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: slice.as_nanos().min(u64::MAX as u128) as u64,
        sched_deadline: 0,
        sched_period: 0,
    };
    // SAFETY: a valid, fully initialised sched_attr of the size it declares,
    // for the calling thread (pid 0).
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) == 0 }
}

/// Elsewhere there is no slice to ask for.
#[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
pub(crate) fn request_slice(_slice: Duration) -> bool {
    false
}
