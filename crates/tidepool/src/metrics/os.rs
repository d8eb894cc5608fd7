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

/// How long thread `tid` of this process has been runnable but waiting for a
/// CPU (the run-queue delay in `/proc/self/task/TID/schedstat`), if the
/// kernel keeps scheduler statistics.
pub(crate) fn run_delay(tid: libc::pid_t) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let ns: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_nanos(ns))
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
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
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
    fn run_delay_is_readable_for_this_thread() {
        if std::path::Path::new("/proc/self/task").exists() {
            // Present on Linux with scheduler statistics; absent is allowed.
            let _ = run_delay(current_thread_id());
        }
        assert!(cpu_clock(current_thread_cpu_clock().unwrap()).is_some());
    }

    #[test]
    fn load_average_is_sane() {
        if let Some(avg) = load_average() {
            assert!(avg.iter().all(|v| v.is_finite() && *v >= 0.0));
        }
        assert!(cores() >= 1);
    }
}
