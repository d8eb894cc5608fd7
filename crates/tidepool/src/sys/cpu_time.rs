//! CPU time: the process's, the calling thread's, and a worker's read from
//! another thread.

use std::time::Duration;

/// CPU time consumed by the whole process so far (all threads, user +
/// system); `None` where the OS has no such clock (see [`super::SUPPORT`]).
pub fn process_cpu_time() -> Option<Duration> {
    imp::process()
}

/// CPU time consumed by the calling thread so far; `None` where the OS has
/// no such clock.
pub fn thread_cpu_time() -> Option<Duration> {
    imp::thread()
}

/// A thread's CPU-time clock, taken on that thread and readable from any
/// thread of the process while it lives (Linux only).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ThreadClock(imp::ClockId);

impl ThreadClock {
    /// The calling thread's clock.
    pub(crate) fn current() -> Option<ThreadClock> {
        imp::current_thread_clock().map(ThreadClock)
    }

    /// The CPU time its thread consumed so far. Valid only while that
    /// thread lives.
    pub(crate) fn read(self) -> Option<Duration> {
        imp::read(self.0)
    }
}

posix! {
    {
        mod imp {
            use std::time::Duration;

            pub(super) type ClockId = libc::clockid_t;

            pub(super) fn process() -> Option<Duration> {
                read(libc::CLOCK_PROCESS_CPUTIME_ID)
            }

            pub(super) fn thread() -> Option<Duration> {
                read(libc::CLOCK_THREAD_CPUTIME_ID)
            }

            #[cfg(target_os = "linux")]
            pub(super) fn current_thread_clock() -> Option<ClockId> {
                let mut clock: libc::clockid_t = 0;
                // SAFETY: pthread_self is always valid for the calling thread; the
                // call writes one clockid into `clock`.
                let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
                (rc == 0).then_some(clock)
            }

            /// macOS has no `pthread_getcpuclockid`; keep one code path for the
            /// other Unixes too.
            #[cfg(not(target_os = "linux"))]
            pub(super) fn current_thread_clock() -> Option<ClockId> {
                None
            }

            pub(super) fn read(clock: ClockId) -> Option<Duration> {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: clock_gettime writes one timespec into the struct we pass.
                let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
                (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
            }
        }
    } else {
        mod imp {
            use std::time::Duration;

            #[derive(Debug, Clone, Copy)]
            pub(super) enum ClockId {}

            pub(super) fn process() -> Option<Duration> {
                None
            }

            pub(super) fn thread() -> Option<Duration> {
                None
            }

            pub(super) fn current_thread_clock() -> Option<ClockId> {
                None
            }

            pub(super) fn read(clock: ClockId) -> Option<Duration> {
                match clock {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_advances_with_work() {
        let Some(before) = thread_cpu_time() else {
            return; // no CPU clocks here (see SUPPORT)
        };
        let mut x = 0u64;
        while thread_cpu_time().unwrap() - before < Duration::from_millis(5) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(process_cpu_time().unwrap() >= Duration::from_millis(5));
        if let Some(clock) = ThreadClock::current() {
            // Read from another thread, the worker's clock shows its work.
            let seen = std::thread::scope(|s| s.spawn(|| clock.read()).join().unwrap());
            assert!(seen.unwrap() >= Duration::from_millis(5));
        }
    }
}
