//! Running a held request on the pool, or finishing or releasing it unrun
//! (the end of step 2); what every step after the pull shares.

use std::collections::HashMap;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use async_nats::jetstream::AckKind;
use tokio::sync::mpsc;

use super::{unix_ns, Done, Held, State, RELEASE_DELAY};
use crate::cancel::with_flag;
use crate::protocol::CANCELLED;
use crate::tasks::Handler;

/// What starting a request needs.
#[derive(Clone)]
pub(super) struct Starter {
    pub(super) state: Arc<State>,
    pub(super) handlers: Arc<HashMap<String, Handler>>,
    pub(super) journal: Option<Arc<std::fs::File>>,
    pub(super) done_tx: mpsc::UnboundedSender<Done>,
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
