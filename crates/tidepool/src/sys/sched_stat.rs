//! A thread's scheduler statistics: how long it waited for a core.

use std::time::Duration;

/// One thread's scheduler statistics (Linux `/proc/self/task/TID/schedstat`),
/// opened once and re-read in place: the path lookup, open and close were
/// most of the cost of a fresh read, and the controller reads every live
/// worker's on each call. At most 256 stay open
/// across the process (a library must not eat its user's file descriptor
/// limit); threads beyond that open the file on each read. Elsewhere every
/// read is `None`.

#[derive(Debug)]
pub(crate) struct SchedStat(imp::Inner);

impl SchedStat {
    /// The calling thread's statistics.
    pub(crate) fn current() -> Self {
        SchedStat(imp::Inner::current())
    }

    /// How long the thread has been runnable but waiting for a CPU (its
    /// run-queue delay). Valid while the thread lives.
    pub(crate) fn run_delay(&self) -> Option<Duration> {
        self.0.field(1).map(Duration::from_nanos)
    }
}

#[cfg(all(target_os = "linux", not(tidepool_no_os)))]
mod imp {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// Open scheduler-statistics files kept across the process.
    pub(super) const CACHED_SCHEDSTAT_FILES: usize = 256;
    static CACHED: AtomicUsize = AtomicUsize::new(0);

    #[derive(Debug)]
    pub(super) struct Inner {
        path: String,
        file: Option<std::fs::File>,
    }

    impl Inner {
        pub(super) fn current() -> Self {
            let tid = super::super::thread_id().unwrap_or(0);
            let path = format!("/proc/self/task/{tid}/schedstat");
            let reserved = CACHED
                .fetch_update(Relaxed, Relaxed, |n| {
                    (n < CACHED_SCHEDSTAT_FILES).then_some(n + 1)
                })
                .is_ok();
            let file = if reserved {
                let file = std::fs::File::open(&path).ok();
                if file.is_none() {
                    CACHED.fetch_sub(1, Relaxed);
                }
                file
            } else {
                None
            };
            Inner { path, file }
        }

        /// Field `index` of the file: 0 is time on a CPU (ns), 1 the run
        /// delay (ns), 2 the number of times the thread was scheduled.
        pub(super) fn field(&self, index: usize) -> Option<u64> {
            use std::os::unix::fs::FileExt;
            // Three decimal numbers: a few dozen bytes. `pread` at 0 makes
            // the kernel format them afresh.
            let mut buf = [0u8; 128];
            let n = match &self.file {
                Some(file) => file.read_at(&mut buf, 0).ok()?,
                None => {
                    use std::io::Read;
                    std::fs::File::open(&self.path).ok()?.read(&mut buf).ok()?
                }
            };
            let text = std::str::from_utf8(&buf[..n]).ok()?;
            text.split_whitespace().nth(index)?.parse().ok()
        }

        /// Whether this one keeps its file open.
        #[cfg(test)]
        pub(super) fn is_cached(&self) -> bool {
            self.file.is_some()
        }

        #[cfg(test)]
        pub(super) fn exists(&self) -> bool {
            std::path::Path::new(&self.path).exists()
        }
    }

    impl Drop for Inner {
        fn drop(&mut self) {
            if self.file.take().is_some() {
                CACHED.fetch_sub(1, Relaxed);
            }
        }
    }
}

#[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
mod imp {
    #[derive(Debug)]
    pub(super) struct Inner;

    impl Inner {
        pub(super) fn current() -> Self {
            Inner
        }

        pub(super) fn field(&self, _index: usize) -> Option<u64> {
            None
        }

        #[cfg(test)]
        pub(super) fn exists(&self) -> bool {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_is_reread_in_place() {
        let stat = SchedStat::current();
        if !stat.0.exists() {
            // No scheduler statistics here (not Linux, or not kept): absent.
            assert_eq!(stat.run_delay(), None);
            return;
        }
        let delay = stat.run_delay().expect("run delay");
        let on_cpu = stat.0.field(0).expect("time on a CPU");
        let before = crate::sys::thread_cpu_time().unwrap();
        let mut x = 0u64;
        while crate::sys::thread_cpu_time().unwrap() - before < Duration::from_millis(5) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        // The same open file shows the new numbers, not a cached first read.
        assert!(stat.0.field(0).unwrap() >= on_cpu + 4_000_000);
        assert!(stat.run_delay().unwrap() >= delay);
    }

    /// Only Linux caches the files (elsewhere there are none to open).
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
    #[test]
    fn open_schedstat_files_are_bounded() {
        if !SchedStat::current().0.exists() {
            return;
        }
        // Other tests may hold a few; past the budget, reads still work by
        // opening the file each time.
        use imp::CACHED_SCHEDSTAT_FILES;
        let many: Vec<SchedStat> = (0..CACHED_SCHEDSTAT_FILES + 8)
            .map(|_| SchedStat::current())
            .collect();
        let open = many.iter().filter(|s| s.0.is_cached()).count();
        assert!(open <= CACHED_SCHEDSTAT_FILES, "{open} open");
        let uncached = many.iter().find(|s| !s.0.is_cached()).expect("over budget");
        assert!(uncached.run_delay().is_some());
        drop(many);
        // Dropping gives the budget back.
        assert!(SchedStat::current().0.is_cached());
    }
}
