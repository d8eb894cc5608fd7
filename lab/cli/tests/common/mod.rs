//! Helpers shared by the tests that run the `tidepool` binary as a process.
#![allow(dead_code)] // each test file uses its own subset

use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// Wait for `child` at most `limit`, calling `on_poll` every 20 ms while it
/// runs; a child still running after `limit` is a hang and fails the test.
pub fn finish_within(
    mut child: Child,
    limit: Duration,
    what: &str,
    mut on_poll: impl FnMut(),
) -> Output {
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        on_poll();
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("{what}: still running after {limit:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Send `signal` (`-INT`, `-TERM`, …) to `pid` with kill(1).
pub fn send_signal(signal: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {signal} {pid}");
}
