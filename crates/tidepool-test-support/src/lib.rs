//! Helpers for tidepool's own tests (see the README): waiting for a
//! condition with no timing margin to tune, only a ceiling that turns a hang
//! into a failure; counting the process's threads by name.

use std::time::{Duration, Instant};

/// How long [`eventually`] waits before it fails the test.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Poll `cond` until it holds (true) or `limit` has passed (false: `cond`
/// is checked once more at the end). Polls at 1 ms, doubling up to 50 ms.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    cond()
}

/// Wait until `cond` holds; panics naming `what` after [`PATIENCE`].
#[track_caller]
pub fn eventually(what: &str, cond: impl FnMut() -> bool) {
    assert!(wait_until(PATIENCE, cond), "timed out waiting for: {what}");
}

/// Threads of this process whose name starts with `prefix`, read from
/// `/proc/self/task`. Panics where that cannot be read (not Linux): a count
/// of 0 must mean no such thread, never no way to tell.
pub fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("counting threads by name reads /proc/self/task (Linux)")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_met_later_is_waited_for() {
        let mut calls = 0;
        assert!(wait_until(PATIENCE, || {
            calls += 1;
            calls == 5
        }));
        assert_eq!(calls, 5);
    }

    #[test]
    fn a_condition_never_met_gives_up_at_the_limit() {
        let start = Instant::now();
        assert!(!wait_until(Duration::from_millis(20), || false));
        assert!(start.elapsed() >= Duration::from_millis(20));
    }
}
