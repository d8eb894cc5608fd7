//! CPU time from `/proc`: of this process (the service), and of the database
//! (the postmaster, the backends it has reaped, and those still running).

use std::fs;
use std::time::Duration;

/// Clock ticks per second of `/proc`'s times.
fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no side effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Fields of `/proc/PID/stat` after the command name: (ppid, utime, stime, cutime, cstime).
fn stat(pid: &str) -> Option<(i32, u64, u64, u64, u64)> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: split after the last `)`.
    let rest: Vec<&str> = s.get(s.rfind(')')? + 2..)?.split(' ').collect();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some((
        rest.get(1)?.parse().ok()?,
        field(14)?,
        field(15)?,
        field(16)?,
        field(17)?,
    ))
}

/// CPU time used by this process so far.
pub fn own_cpu() -> Duration {
    stat("self").map_or(Duration::ZERO, |(_, u, s, _, _)| ticks(u + s))
}

/// CPU time used by the process tree under `pid` (one level of children,
/// which is PostgreSQL's shape): its own, its reaped children's, and its
/// live children's.
pub fn tree_cpu(pid: i32) -> Duration {
    let Some((_, u, s, cu, cs)) = stat(&pid.to_string()) else {
        return Duration::ZERO;
    };
    let mut total = u + s + cu + cs;
    if let Ok(entries) = fs::read_dir("/proc") {
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name
                .to_str()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            if let Some((ppid, u, s, _, _)) = stat(name) {
                if ppid == pid {
                    total += u + s;
                }
            }
        }
    }
    ticks(total)
}

fn ticks(n: u64) -> Duration {
    Duration::from_secs_f64(n as f64 / ticks_per_sec())
}

/// Process ids whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                found.push(pid);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cpu_grows_with_work() {
        let before = own_cpu();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        assert!(own_cpu() > before);
    }

    #[test]
    fn a_child_counts_in_its_parents_tree() {
        let me = std::process::id() as i32;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        // Reaped by `wait`: its CPU is now in our children's times.
        let (_, u, s, cu, cs) = stat("self").unwrap();
        assert!(cu + cs > 0, "the shell loop's CPU is missing");
        assert!(tree_cpu(me) >= ticks(u + s + cu + cs));
        assert!(processes_mentioning("no such command line, surely").is_empty());
        assert!(stat(&pid.to_string()).is_none());
    }
}
