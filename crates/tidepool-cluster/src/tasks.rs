//! Tasks that travel: a name plus a payload of bytes, run by the handler a
//! node registered under that name. The built-in handlers and their payloads.
//!
//! | name | payload | does |
//! |---|---|---|
//! | `sleep` | decimal microseconds | sleeps (an I/O-bound task); stops early when cancelled |
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

fn sleep(payload: &[u8]) -> Outcome {
    let text = std::str::from_utf8(payload).map_err(|_| "sleep payload is not UTF-8")?;
    let us: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("sleep payload `{text}` is not a number of microseconds"))?;
    if us > 3_600_000_000 {
        return Err(format!("sleep of {us} µs is over the 1 h limit"));
    }
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

fn poison(_: &[u8]) -> Outcome {
    panic!("poison task: always panics")
}

/// The built-in handlers by name.
pub fn builtins() -> Vec<(&'static str, Handler)> {
    vec![
        ("sleep", Arc::new(sleep) as Handler),
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
        let echo = &builtins()[1].1;
        assert_eq!(echo(b"hi"), Ok(b"hi".to_vec()));
    }
}
