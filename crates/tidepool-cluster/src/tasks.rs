//! Tasks that travel: a name plus a payload of bytes, run by the handler a
//! node registered under that name. The built-in handlers and their payloads.
//!
//! | name | payload | does |
//! |---|---|---|
//! | `sleep` | decimal microseconds | sleeps (an I/O-bound task); stops early when cancelled |
//! | `spin` | decimal microseconds | burns that much of its thread's CPU time (a compute-bound task); stops early when cancelled |
//! | `echo` | anything | returns the payload |
//! | `poison` | anything | always panics (to see the dead-letter path) |

use std::sync::Arc;
use std::time::Duration;

/// What a handler returns: the result's payload, or an error message.
pub type Outcome = Result<Vec<u8>, String>;

/// A task handler: runs on a pool worker, may block, may panic (a panic is
/// a failed delivery).
pub type Handler = Arc<dyn Fn(&[u8]) -> Outcome + Send + Sync>;

/// The payload of a `sleep` task of `d`.
pub fn sleep_payload(d: Duration) -> Vec<u8> {
    d.as_micros().to_string().into_bytes()
}

/// The payload of a `spin` task of `d` of CPU time.
pub fn spin_payload(d: Duration) -> Vec<u8> {
    sleep_payload(d)
}

/// A `sleep` or `spin` payload: decimal microseconds, at most an hour.
fn micros(task: &str, payload: &[u8]) -> Result<u64, String> {
    let text = std::str::from_utf8(payload).map_err(|_| format!("{task} payload is not UTF-8"))?;
    let us: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{task} payload `{text}` is not a number of microseconds"))?;
    if us > 3_600_000_000 {
        return Err(format!("{task} of {us} µs is over the 1 h limit"));
    }
    Ok(us)
}

fn sleep(payload: &[u8]) -> Outcome {
    let us = micros("sleep", payload)?;
    // In slices, so that a cancelled request stops early.
    let until = std::time::Instant::now() + Duration::from_micros(us);
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(Vec::new());
        }
        if crate::cancel::cancelled() {
            return Err("cancelled while sleeping".into());
        }
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
}

/// CPU time this thread has used (Linux and the BSDs: a per-thread clock).
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only `t`; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Burn the payload's microseconds of this thread's CPU time: on a busy
/// machine the task takes longer in wall time but always costs the same
/// work, so more threads than cores cannot make it look cheaper.
fn spin(payload: &[u8]) -> Outcome {
    let us = micros("spin", payload)?;
    let until = thread_cpu_time() + Duration::from_micros(us);
    let mut x = 0u64;
    let mut rounds = 0u32;
    while thread_cpu_time() < until {
        for i in 0..256u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        rounds = rounds.wrapping_add(1);
        if rounds.is_multiple_of(64) && crate::cancel::cancelled() {
            return Err("cancelled while spinning".into());
        }
    }
    Ok(Vec::new())
}

fn poison(_: &[u8]) -> Outcome {
    panic!("poison task: always panics")
}

/// The built-in handlers by name.
pub fn builtins() -> Vec<(&'static str, Handler)> {
    vec![
        ("sleep", Arc::new(sleep) as Handler),
        ("spin", Arc::new(spin)),
        ("echo", Arc::new(|p: &[u8]| Ok(p.to_vec()))),
        ("poison", Arc::new(poison)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_bad_ones_are_errors() {
        assert_eq!(
            sleep(&sleep_payload(Duration::from_micros(5))),
            Ok(Vec::new())
        );
        assert!(sleep(b"five").unwrap_err().contains("microseconds"));
        assert!(sleep(b"99999999999").unwrap_err().contains("1 h"));
        assert!(spin(b"five").unwrap_err().contains("spin payload"));
        let echo = &builtins()
            .into_iter()
            .find(|(n, _)| *n == "echo")
            .unwrap()
            .1;
        assert_eq!(echo(b"hi"), Ok(b"hi".to_vec()));
    }

    #[test]
    fn spin_burns_its_cpu_time_on_its_own_thread() {
        let before = thread_cpu_time();
        assert_eq!(
            spin(&spin_payload(Duration::from_millis(20))),
            Ok(Vec::new())
        );
        let used = thread_cpu_time() - before;
        // At least what was asked (however loaded the machine: CPU time,
        // not wall time); the upper bound is loose (one clock tick).
        assert!(used >= Duration::from_millis(20), "{used:?}");
        assert!(used < Duration::from_secs(2), "{used:?}");
    }
}
