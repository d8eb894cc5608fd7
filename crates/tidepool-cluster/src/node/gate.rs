//! The gate a request waits at before it runs, when it must: its
//! not-before time, then its task's limits.
//!
//! - **Not before**: a request whose `Tidepool-Not-Before` is more than
//!   `HOLD_AT_MOST` ahead is nak'ed with a delay that ends then (the broker
//!   delivers it again at that time, to any node; this uses one delivery of
//!   its `max_deliver`). One that is due sooner is held, with heartbeats,
//!   until then.
//! - **Limits**: the request waits for a lease (see [`crate::limits`]).
//! - A request cancelled while it waits is recorded as cancelled; one held
//!   by a node that starts to stop is released to the broker.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;

use super::run::{finish_unrun, release, run, Starter};
use super::{unix_ns, Held};
use crate::protocol::CANCELLED;

/// A not-before time at most this far ahead is waited for on the node.
const HOLD_AT_MOST: Duration = Duration::from_secs(1);

/// Wait at the gate, then run held request `key` (or record or release it).
pub(super) async fn gate(s: Starter, key: u64, held: Arc<Held>, not_before: Option<u64>) {
    let state = &s.state;
    if let Some(at) = not_before {
        let ahead = Duration::from_nanos(at.saturating_sub(unix_ns()));
        if ahead > HOLD_AT_MOST {
            state.delayed.fetch_add(1, Relaxed);
            state.count(&held.task, |c| c.delayed += 1);
            state.running.fetch_sub(1, Relaxed);
            state.finished.notify_one();
            if let Ok(mut h) = state.held.lock() {
                h.remove(&key);
            }
            let _ = held.message.ack_with(AckKind::Nak(Some(ahead))).await;
            return;
        }
        tokio::time::sleep(ahead).await;
    }
    let stop = || state.draining.load(Relaxed) || state.cancels.is_cancelled(&held.request);
    match state.limiter.admit(&held.task, &held.request, stop).await {
        None if state.cancels.is_cancelled(&held.request) => {
            finish_unrun(&s, key, CANCELLED.into());
        }
        None => release(&s, key),
        Some(lease) => {
            held.lease.store(lease, Relaxed);
            if state.draining.load(Relaxed) {
                if lease {
                    state.limiter.release(&held.task, &held.request).await;
                }
                release(&s, key);
            } else {
                run(&s, key, &held);
            }
        }
    }
}
