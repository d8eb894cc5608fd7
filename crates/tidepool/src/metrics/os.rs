//! What the operating system says about the process: load average and CPU time.

use std::time::Duration;

/// The 1, 5 and 15 minute load averages (`getloadavg`), if the OS tells.
pub fn load_average() -> Option<[f64; 3]> {
    let mut avg = [0.0f64; 3];
    // SAFETY: getloadavg writes at most 3 doubles into the buffer we pass.
    let n = unsafe { libc::getloadavg(avg.as_mut_ptr(), 3) };
    (n == 3).then_some(avg)
}

/// CPU time consumed by the whole process so far (all threads, user + system).
pub fn process_cpu_time() -> Option<Duration> {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time consumed by the calling thread so far.
pub fn thread_cpu_time() -> Option<Duration> {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The calling thread's CPU-time clock, readable from any thread of the
/// process while this thread lives.
pub(crate) fn current_thread_cpu_clock() -> Option<libc::clockid_t> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: pthread_self is always valid for the calling thread; the call
    // writes one clockid into `clock`.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
    (rc == 0).then_some(clock)
}

/// The calling thread's kernel thread id.
pub(crate) fn current_thread_id() -> libc::pid_t {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// One thread's scheduler statistics (`/proc/self/task/TID/schedstat`),
/// opened once and re-read in place: the path lookup, open and close were
/// most of the cost of a fresh read, and the controller reads every live
/// worker's on each call. At most [`CACHED_SCHEDSTAT_FILES`] stay open
/// across the process (a library must not eat its user's file descriptor
/// limit); threads beyond that open the file on each read.
#[derive(Debug)]
pub(crate) struct SchedStat {
    path: String,
    file: Option<std::fs::File>,
}

/// Open scheduler-statistics files kept across the process.
pub(crate) const CACHED_SCHEDSTAT_FILES: usize = 256;
static CACHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl SchedStat {
    /// The statistics of thread `tid` of this process (reads give `None`
    /// if the kernel keeps none).
    pub(crate) fn of(tid: libc::pid_t) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
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
        SchedStat { path, file }
    }

    /// How long the thread has been runnable but waiting for a CPU (its
    /// run-queue delay). Valid while the thread lives.
    pub(crate) fn run_delay(&self) -> Option<Duration> {
        self.field(1).map(Duration::from_nanos)
    }

    /// Field `index` of the file: 0 is time on a CPU (ns), 1 the run delay
    /// (ns), 2 the number of times the thread was scheduled.
    fn field(&self, index: usize) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        // Three decimal numbers: a few dozen bytes. `pread` at 0 makes the
        // kernel format them afresh.
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
    fn is_cached(&self) -> bool {
        self.file.is_some()
    }
}

impl Drop for SchedStat {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            CACHED.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Read a CPU-time clock (from `current_thread_cpu_clock`).
pub(crate) fn cpu_clock(clock: libc::clockid_t) -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the struct we pass.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// Logical CPUs available to this process.
///
/// Read once: the standard library reads the cgroup quota files on every
/// call, and every statistics snapshot wants the number.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Ask the scheduler for a time slice for the calling thread (Linux 6.12+
/// EEVDF: `sched_attr::sched_runtime` of a `SCHED_OTHER` thread is its slice
/// request, 0.1–100 ms; 0 restores the default). Keeps the thread's nice
/// value. Returns whether the kernel accepted it.
#[cfg(target_os = "linux")]
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
#[cfg(not(target_os = "linux"))]
pub(crate) fn request_slice(_slice: Duration) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_advances_with_work() {
        let before = thread_cpu_time().expect("thread CPU clock");
        let mut x = 0u64;
        while thread_cpu_time().unwrap() - before < Duration::from_millis(5) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(process_cpu_time().unwrap() >= Duration::from_millis(5));
    }

    #[test]
    fn schedstat_is_reread_in_place() {
        assert!(cpu_clock(current_thread_cpu_clock().unwrap()).is_some());
        let tid = current_thread_id();
        let stat = SchedStat::of(tid);
        if !std::path::Path::new(&format!("/proc/self/task/{tid}/schedstat")).exists() {
            // No scheduler statistics here (not Linux, or not kept): absent.
            assert_eq!(stat.run_delay(), None);
            return;
        }
        let delay = stat.run_delay().expect("run delay");
        let on_cpu = stat.field(0).expect("time on a CPU");
        let before = thread_cpu_time().unwrap();
        let mut x = 0u64;
        while thread_cpu_time().unwrap() - before < Duration::from_millis(5) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        // The same open file shows the new numbers, not a cached first read.
        assert!(stat.field(0).unwrap() >= on_cpu + 4_000_000);
        assert!(stat.run_delay().unwrap() >= delay);
    }

    #[test]
    fn open_schedstat_files_are_bounded() {
        let tid = current_thread_id();
        if !std::path::Path::new(&format!("/proc/self/task/{tid}/schedstat")).exists() {
            return;
        }
        // Other tests may hold a few; past the budget, reads still work by
        // opening the file each time.
        let many: Vec<SchedStat> = (0..CACHED_SCHEDSTAT_FILES + 8)
            .map(|_| SchedStat::of(tid))
            .collect();
        let open = many.iter().filter(|s| s.is_cached()).count();
        assert!(open <= CACHED_SCHEDSTAT_FILES, "{open} open");
        let uncached = many.iter().find(|s| !s.is_cached()).expect("over budget");
        assert!(uncached.run_delay().is_some());
        drop(many);
        // Dropping gives the budget back.
        assert!(SchedStat::of(tid).is_cached());
    }

    #[test]
    fn load_average_is_sane() {
        if let Some(avg) = load_average() {
            assert!(avg.iter().all(|v| v.is_finite() && *v >= 0.0));
        }
        assert!(cores() >= 1);
    }
}
