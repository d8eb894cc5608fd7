//! The OS calls this crate makes, all from `tidepool::sys`, the one home for
//! OS calls: per-thread nice values and scheduling classes (on Linux they
//! belong to one thread, which is what lets each stage run at its own
//! priority), giving up `CAP_SYS_NICE`, I/O that bypasses the page cache, a
//! thread's CPU time and its voluntary context switches.

pub use tidepool::sys::{
    drop_cap_sys_nice, flush_and_evict, nice, open_direct, proc_thread_stat, sched_class, set_nice,
    set_sched_class, thread_cpu_time, thread_id, voluntary_switches, SchedClass, DIRECT_ALIGN,
};
