//! The whole machine's CPU time: how busy every core was, whoever ran on it.

use std::time::Duration;

/// CPU time of all the machine's cores since boot: `(busy, total)`, where
/// busy is every state but idle and I/O wait (Linux `/proc/stat`, first
/// line, in clock ticks of usually 10 ms). `None` elsewhere. Over a window,
/// busy over total is the share of the machine's cores that something ran
/// on — the pool's workers or any other process, such as a database the
/// tasks wait on.
pub fn machine_cpu_time() -> Option<(Duration, Duration)> {
    imp::machine_cpu_time()
}

#[cfg(all(target_os = "linux", not(tidepool_no_os)))]
mod imp {
    use std::io::Read;
    use std::time::Duration;

    pub(super) fn machine_cpu_time() -> Option<(Duration, Duration)> {
        // The first line only: the per-core lines and counters after it
        // would cost more to read than they are worth here.
        let mut buf = [0u8; 256];
        let n = std::fs::File::open("/proc/stat")
            .ok()?
            .read(&mut buf)
            .ok()?;
        let (busy, total) = parse(std::str::from_utf8(&buf[..n]).ok()?)?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let hz = u64::try_from(hz).ok().filter(|&h| h > 0)?;
        let time = |ticks: u64| Duration::from_nanos(ticks.saturating_mul(1_000_000_000 / hz));
        Some((time(busy), time(total)))
    }

    /// Busy and total ticks of `/proc/stat`'s `cpu` line: user, nice,
    /// system, idle, iowait, irq, softirq, steal (guest time is inside
    /// user already).
    pub(super) fn parse(stat: &str) -> Option<(u64, u64)> {
        let line = stat.lines().next()?;
        let mut fields = line.split_whitespace();
        if fields.next()? != "cpu" {
            return None;
        }
        let v: Vec<u64> = fields
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        if v.len() < 5 {
            return None;
        }
        let idle = v[3] + v[4];
        let total: u64 = v.iter().sum();
        Some((total - idle, total))
    }
}

#[cfg(not(all(target_os = "linux", not(tidepool_no_os))))]
mod imp {
    use std::time::Duration;

    pub(super) fn machine_cpu_time() -> Option<(Duration, Duration)> {
        None
    }
}

#[cfg(test)]
mod tests {
    #[cfg(all(target_os = "linux", not(tidepool_no_os)))]
    #[test]
    fn parses_the_cpu_line() {
        let stat = "cpu  100 5 50 800 20 3 2 10 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(super::imp::parse(stat), Some((170, 990)));
        assert_eq!(super::imp::parse("intr 1 2 3\n"), None);
        assert_eq!(super::imp::parse("cpu  1 2 x 4 5\n"), None);
    }

    #[test]
    fn busy_is_within_total_and_both_grow() {
        let Some((busy, total)) = super::machine_cpu_time() else {
            return;
        };
        assert!(busy <= total);
        // Spin until the kernel's tick moves the counters.
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(5) {
            let (b, t) = super::machine_cpu_time().unwrap();
            if t > total {
                assert!(b >= busy);
                return;
            }
        }
        panic!("/proc/stat did not move in 5 s");
    }
}
