//! The calling thread's timer slack: how late the kernel may wake a sleep.

use std::time::Duration;

/// Lowers the calling thread's timer slack while it lives (Linux
/// `PR_SET_TIMERSLACK`; the default 50 µs would make short sleeps late),
/// and restores the old one when dropped. Does nothing elsewhere.
///
/// ```
/// let _precise = tidepool::sys::TimerSlack::lower(std::time::Duration::from_micros(1));
/// std::thread::sleep(std::time::Duration::from_micros(100)); // wakes within ~1 µs of the deadline
/// ```
#[derive(Debug)]
#[must_use = "the old slack comes back when the guard is dropped"]
pub struct TimerSlack {
    /// The slack before, in nanoseconds (0 when unknown or unchanged).
    old: u64,
    /// Not `Send`: the slack belongs to the thread that set it.
    _thread: std::marker::PhantomData<*const ()>,
}

impl TimerSlack {
    /// Set the calling thread's slack to `slack` until the guard drops.
    pub fn lower(slack: Duration) -> TimerSlack {
        let ns = slack.as_nanos().clamp(1, u64::MAX as u128) as u64;
        TimerSlack {
            old: imp::set(ns),
            _thread: std::marker::PhantomData,
        }
    }

    /// The calling thread's slack now, if the OS tells.
    pub fn current() -> Option<Duration> {
        imp::get().map(Duration::from_nanos)
    }
}

impl Drop for TimerSlack {
    fn drop(&mut self) {
        if self.old > 0 {
            imp::set(self.old);
        }
    }
}

#[cfg(all(target_os = "linux", not(tidepool_no_os)))]
mod imp {
    pub(super) fn get() -> Option<u64> {
        // SAFETY: PR_GET_TIMERSLACK only reads the calling thread's slack.
        let old = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        u64::try_from(old).ok().filter(|&n| n > 0)
    }

    /// Set the slack; return the old one (0 if unknown or not set).
    pub(super) fn set(ns: u64) -> u64 {
        let Some(old) = get() else { return 0 };
        // SAFETY: PR_SET_TIMERSLACK only sets the calling thread's slack.
        let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
        if rc == 0 {
            old
        } else {
            0
        }
    }
}

#[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
mod imp {
    pub(super) fn get() -> Option<u64> {
        None
    }

    pub(super) fn set(_ns: u64) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_is_lowered_and_restored() {
        let Some(before) = TimerSlack::current() else {
            return; // not Linux
        };
        {
            let _guard = TimerSlack::lower(Duration::from_micros(1));
            assert_eq!(TimerSlack::current(), Some(Duration::from_micros(1)));
        }
        assert_eq!(TimerSlack::current(), Some(before));
    }
}
