//! Handing a delivered request to the pool (the start of step 2), after the
//! checks of its headers: priority, not-before, cancellation, limits.

use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream::{self, AckKind};

use super::check::header;
use super::gate::gate;
use super::pull::Starter;
use super::{unix_ns, Done, Held, RELEASE_DELAY};
use crate::cancel::with_flag;
use crate::protocol::*;

/// Take one delivered request: hold it, check it, and run it now or once its
/// gate opens (see [`gate`]).
pub(super) fn start(s: &Starter, message: jetstream::Message) {
    let state = &s.state;
    let info = message.info().ok();
    let delivered = info.as_ref().map_or(1, |i| i.delivered);
    let seq = info.as_ref().map_or(0, |i| i.stream_sequence);
    let (task, priority) = Priority::of_subject(message.subject.as_str())
        .map_or((String::new(), Priority::Normal), |(t, p)| {
            (t.to_string(), p)
        });
    let request = header(&message, H_REQUEST).unwrap_or_else(|| format!("seq{seq}"));
    let client = header(&message, H_CLIENT).unwrap_or_else(|| "_".into());
    let problem = header_problem(&message, priority);
    let not_before = header(&message, H_NOT_BEFORE).and_then(|v| v.trim().parse::<u64>().ok());
    let key = state.next_key.fetch_add(1, Relaxed);
    let held = Arc::new(Held {
        message,
        since: Instant::now(),
        request: request.clone(),
        client,
        task: task.clone(),
        delivered,
        lease: AtomicBool::new(false),
    });
    state.count(&task, |c| {
        c.pulled += 1;
        if delivered > 1 {
            c.redelivered += 1;
        }
    });
    if let Ok(mut h) = state.held.lock() {
        h.insert(key, held.clone());
    }
    state.running.fetch_add(1, Relaxed);
    if let Some(problem) = problem {
        finish_unrun(s, key, problem);
    } else if state.cancels.is_cancelled(&request) {
        finish_unrun(s, key, CANCELLED.into());
    } else if not_before.is_some_and(|t| t > unix_ns()) || state.limiter.limit(&task).is_some() {
        tokio::spawn(gate(s.clone(), key, held, not_before));
    } else {
        run(s, key, &held);
    }
}

/// What is wrong with a request's headers, if anything (recorded as its
/// error result without running it: no delivery could run it).
fn header_problem(message: &jetstream::Message, priority: Priority) -> Option<String> {
    if let Some(text) = header(message, H_PRIORITY) {
        match text.parse::<Priority>() {
            Err(e) => return Some(format!("header {H_PRIORITY}: {e}")),
            Ok(p) if p != priority => {
                return Some(format!(
                    "header {H_PRIORITY} is `{}` but the subject `{}` is a {} request: publish \
                     to {}",
                    p.as_str(),
                    message.subject,
                    priority.as_str(),
                    p.subject("<task>")
                ))
            }
            Ok(_) => {}
        }
    }
    if let Some(text) = header(message, H_NOT_BEFORE) {
        if text.trim().parse::<u64>().is_err() {
            return Some(format!(
                "header {H_NOT_BEFORE} `{text}` is not a Unix time in nanoseconds"
            ));
        }
    }
    None
}

/// Record `error` as the result of held request `key` without running it.
pub(super) fn finish_unrun(s: &Starter, key: u64, error: String) {
    s.state.running.fetch_sub(1, Relaxed);
    s.state.finished.notify_one();
    let _ = s.done_tx.send(Done {
        key,
        outcome: Err(error),
        started_ns: 0,
        finished_ns: 0,
        last: true,
    });
}

/// Give held request `key` back to the broker (a stopping node).
pub(super) fn release(s: &Starter, key: u64) {
    s.state.running.fetch_sub(1, Relaxed);
    s.state.finished.notify_one();
    if let Some(held) = s.state.held.lock().ok().and_then(|mut h| h.remove(&key)) {
        tokio::spawn(async move {
            let _ = held
                .message
                .ack_with(AckKind::Nak(Some(RELEASE_DELAY)))
                .await;
        });
    }
}

/// Hand held request `key` to the pool.
pub(super) fn run(s: &Starter, key: u64, held: &Held) {
    let state = &s.state;
    let handler = s.handlers.get(&held.task).cloned();
    let node = state.name.clone();
    let journal = s.journal.clone();
    let tx = s.done_tx.clone();
    let st = state.clone();
    let flag = state.cancels.flag(&held.request);
    let (request, task, delivered) = (held.request.clone(), held.task.clone(), held.delivered);
    let payload = held.message.payload.clone();
    let job = move || {
        let (outcome, started_ns, finished_ns, last) = if flag.load(Relaxed) {
            (Err(CANCELLED.to_string()), 0, 0, true)
        } else {
            if let Some(file) = &journal {
                let line = format!("{request} {delivered} {}\n", unix_ns() / 1_000_000);
                let _ = (&**file).write_all(line.as_bytes());
            }
            let started_ns = unix_ns();
            let outcome = match handler {
                Some(h) => with_flag(flag.clone(), || {
                    std::panic::catch_unwind(AssertUnwindSafe(|| h(&payload)))
                        .unwrap_or_else(|panic| Err(format!("panicked: {}", panic_text(&panic))))
                }),
                None => Err(format!("node {node} has no handler for task `{task}`")),
            };
            let finished_ns = unix_ns();
            // A cancelled handler that gave up: recorded as cancelled, once.
            if flag.load(Relaxed) && outcome.is_err() {
                (Err(CANCELLED.to_string()), started_ns, finished_ns, true)
            } else {
                (outcome, started_ns, finished_ns, false)
            }
        };
        st.cancels.done(&request);
        st.running.fetch_sub(1, Relaxed);
        st.finished.notify_one();
        let _ = tx.send(Done {
            key,
            outcome,
            started_ns,
            finished_ns,
            last,
        });
    };
    if let Err(e) = state.pool.execute(job) {
        // Only at shutdown: release the request (see `RELEASE_DELAY`).
        eprintln!("{}: pool refused a request: {e}", state.name);
        state.cancels.done(&held.request);
        release(s, key);
    }
}

/// A panic's message, as text.
fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic".into()
    }
}
