//! The kernel's id of a thread.

/// The calling thread's kernel thread id (Linux `gettid`, the number `top
/// -H` and `/proc/self/task/` show); `None` elsewhere.
pub fn thread_id() -> Option<u64> {
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
    {
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) };
        u64::try_from(tid).ok()
    }
    #[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn threads_have_distinct_ids() {
        let here = super::thread_id();
        let there = std::thread::spawn(super::thread_id).join().unwrap();
        if here.is_some() {
            assert_ne!(here, there);
        }
    }
}
