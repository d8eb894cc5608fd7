//! Handing a delivered request to the pool (the start of step 2).

use std::collections::HashMap;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream::{self, AckKind};
use tokio::sync::mpsc;

use super::check::header;
use super::{unix_ns, Done, Held, State, RELEASE_DELAY};
use crate::protocol::*;
use crate::tasks::Handler;

/// Hand one delivered request to the pool.
pub(super) fn start(
    state: &Arc<State>,
    handlers: &Arc<HashMap<String, Handler>>,
    journal: &Option<Arc<std::fs::File>>,
    done_tx: &mpsc::UnboundedSender<Done>,
    message: jetstream::Message,
) {
    let info = message.info().ok();
    let delivered = info.as_ref().map_or(1, |i| i.delivered);
    let seq = info.as_ref().map_or(0, |i| i.stream_sequence);
    let task = message
        .subject
        .as_str()
        .strip_prefix(REQ_PREFIX)
        .unwrap_or("")
        .to_string();
    let request = header(&message, H_REQUEST).unwrap_or_else(|| format!("seq{seq}"));
    let client = header(&message, H_CLIENT).unwrap_or_else(|| "_".into());
    let payload = message.payload.clone();
    let key = state.next_key.fetch_add(1, Relaxed);
    let held = Arc::new(Held {
        message,
        since: Instant::now(),
        request: request.clone(),
        client,
        task: task.clone(),
        delivered,
    });
    if let Ok(mut h) = state.held.lock() {
        h.insert(key, held);
    }
    state.running.fetch_add(1, Relaxed);
    let handler = handlers.get(&task).cloned();
    let node = state.name.clone();
    let journal = journal.clone();
    let tx = done_tx.clone();
    let st = state.clone();
    let job = move || {
        if let Some(file) = &journal {
            let line = format!("{request} {delivered} {}\n", unix_ns() / 1_000_000);
            let _ = (&**file).write_all(line.as_bytes());
        }
        let started_ns = unix_ns();
        let outcome = match handler {
            Some(h) => std::panic::catch_unwind(AssertUnwindSafe(|| h(&payload)))
                .unwrap_or_else(|panic| Err(format!("panicked: {}", panic_text(&panic)))),
            None => Err(format!("node {node} has no handler for task `{task}`")),
        };
        let finished_ns = unix_ns();
        st.running.fetch_sub(1, Relaxed);
        st.finished.notify_one();
        let _ = tx.send(Done {
            key,
            outcome,
            started_ns,
            finished_ns,
        });
    };
    if let Err(e) = state.pool.execute(job) {
        // Only at shutdown: release the request (see `RELEASE_DELAY`).
        eprintln!("{}: pool refused a request: {e}", state.name);
        state.running.fetch_sub(1, Relaxed);
        if let Some(held) = state.held.lock().ok().and_then(|mut h| h.remove(&key)) {
            tokio::spawn(async move {
                let _ = held
                    .message
                    .ack_with(AckKind::Nak(Some(RELEASE_DELAY)))
                    .await;
            });
        }
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
