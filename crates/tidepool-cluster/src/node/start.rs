//! Handing a delivered request to the pool (the start of step 2), after the
//! checks of its headers: priority, not-before, cancellation, limits.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream;

use super::check::header;
use super::gate::gate;
use super::run::{finish_unrun, run, Starter};
use super::{unix_ns, Held};
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
