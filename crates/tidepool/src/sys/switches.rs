//! How often a thread gave up its core because it blocked.

/// Voluntary context switches of the calling thread so far (it blocked
/// and gave up its core); `None` where the OS does not count them.
pub fn voluntary_switches() -> Option<u64> {
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
    {
        // SAFETY: getrusage writes into the zeroed struct it is given.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a rusage for the call's duration.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
        (rc == 0).then(|| u64::try_from(ru.ru_nvcsw).unwrap_or(0))
    }
    #[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_sleep_is_a_voluntary_switch_where_counted() {
        let Some(before) = super::voluntary_switches() else {
            return;
        };
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert!(super::voluntary_switches().unwrap() > before);
    }
}
