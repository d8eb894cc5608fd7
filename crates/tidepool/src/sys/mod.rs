//! Every call tidepool makes to the operating system, behind one portable
//! face: CPU clocks, thread ids and names, the load average, scheduler
//! statistics and slices, the core count.
//!
//! What each platform gives ([`SUPPORT`] says it at run time):
//!
//! | platform | what works | what is missing |
//! |---|---|---|
//! | Linux | everything | — |
//! | macOS, iOS, FreeBSD, DragonFly, OpenBSD | calling thread's and process's CPU time, load average, core count | a worker's CPU time read by the controller, run delay, slices, kernel thread ids and names, timer slack |
//! | anything else (Windows, …) | core count | all the rest: the functions return `None` or do nothing |
//!
//! Where a number is missing the pool still runs: statistics that need it
//! read `None` (never a zero that would look like a measurement). On the
//! middle row `auto` still learns the tasks' compute share from per-task
//! samples of the thread CPU clock; on the last it has none, assumes the
//! tasks compute and stays near the core count (see the README's platform
//! table). Building with
//! `RUSTFLAGS="--cfg tidepool_no_os"` forces the last row on any platform,
//! which is how CI proves that fallback compiles.
//!
//! ```
//! use tidepool::sys;
//!
//! assert!(sys::cores() >= 1);
//! if sys::SUPPORT.cpu_clocks {
//!     assert!(sys::process_cpu_time().is_some());
//! }
//! ```

/// `posix! { A } else { B }` compiles the items `A` where the OS has POSIX
/// CPU clocks and `getloadavg`, and `B` elsewhere; `tidepool_no_os` turns
/// every OS call off. The platform list is written here once.
macro_rules! posix {
    ({ $($yes:item)* } else { $($no:item)* }) => {
        select! {
            all(
                any(
                    target_os = "linux",
                    target_vendor = "apple",
                    target_os = "freebsd",
                    target_os = "dragonfly",
                    target_os = "openbsd"
                ),
                not(tidepool_no_os)
            ),
            { $($yes)* },
            { $($no)* }
        }
    };
}

/// The items of the first block where `$pred` holds, of the second where
/// it does not.
macro_rules! select {
    ($pred:meta, { $($yes:item)* }, { $($no:item)* }) => {
        $( #[cfg($pred)] $yes )*
        $( #[cfg(not($pred))] $no )*
    };
}

posix! {
    { const POSIX: bool = true; }
    else { const POSIX: bool = false; }
}

mod cores;
mod cpu_time;
mod direct_io;
mod load;
mod machine;
mod priority;
mod sched_stat;
mod slice;
mod switches;
mod thread_id;
mod thread_name;
mod timer_slack;

pub use cores::cores;
pub(crate) use cpu_time::ThreadClock;
pub use cpu_time::{process_cpu_time, thread_cpu_time};
pub use load::load_average;
pub use machine::machine_cpu_time;
pub(crate) use sched_stat::SchedStat;
pub(crate) use slice::request_slice;
pub use thread_id::thread_id;
pub use thread_name::{thread_name, THREAD_NAME_MAX};
pub use timer_slack::TimerSlack;

// For the pipeline crate's stages and its disk benchmark: public so that it
// makes no OS call of its own, hidden because an application needs none.
#[doc(hidden)]
pub use direct_io::{flush_and_evict, open_direct, DIRECT_ALIGN};
#[doc(hidden)]
pub use priority::{
    drop_cap_sys_nice, nice, proc_thread_stat, sched_class, set_nice, set_sched_class, SchedClass,
};
#[doc(hidden)]
pub use switches::voluntary_switches;

/// Which of the operating system's numbers and knobs this build can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Support {
    /// [`process_cpu_time`] and [`thread_cpu_time`] read real clocks.
    pub cpu_clocks: bool,
    /// The controller reads each worker's CPU time from outside the worker
    /// (`PoolStats::worker_cpu_time`, `auto`'s compute share).
    pub worker_cpu_time: bool,
    /// Per-thread run delay (time runnable but waiting for a core).
    pub run_delay: bool,
    /// [`load_average`] answers.
    pub load_average: bool,
    /// Scheduler slice requests (`Builder::worker_slice`) reach the kernel.
    pub slices: bool,
    /// [`thread_id`] and [`thread_name`] answer.
    pub thread_info: bool,
    /// [`TimerSlack`] changes the thread's timer slack.
    pub timer_slack: bool,
}

/// What this build supports (fixed at compile time).
pub const SUPPORT: Support = {
    let linux = cfg!(all(target_os = "linux", not(tidepool_no_os)));
    Support {
        cpu_clocks: POSIX,
        worker_cpu_time: linux,
        run_delay: linux,
        load_average: POSIX,
        slices: linux,
        thread_info: linux,
        timer_slack: linux,
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn support_matches_what_the_calls_return() {
        assert_eq!(process_cpu_time().is_some(), SUPPORT.cpu_clocks);
        assert_eq!(thread_cpu_time().is_some(), SUPPORT.cpu_clocks);
        assert_eq!(ThreadClock::current().is_some(), SUPPORT.worker_cpu_time);
        assert_eq!(thread_id().is_some(), SUPPORT.thread_info);
        assert_eq!(thread_name().is_some(), SUPPORT.thread_info);
        if !SUPPORT.load_average {
            assert_eq!(load_average(), None);
        }
        if !SUPPORT.run_delay {
            assert_eq!(SchedStat::current().run_delay(), None);
        }
        if !SUPPORT.slices {
            assert!(!request_slice(std::time::Duration::from_millis(3)));
        }
    }

    #[cfg(tidepool_no_os)]
    #[test]
    fn the_switch_turns_everything_off() {
        assert_eq!(
            SUPPORT,
            Support {
                cpu_clocks: false,
                worker_cpu_time: false,
                run_delay: false,
                load_average: false,
                slices: false,
                thread_info: false,
                timer_slack: false,
            }
        );
        assert!(cores() >= 1);
    }
}
