//! The node's upkeep while it runs: heartbeats and lease renewals for what
//! it holds (step 3)
//! and its status for `tidepool cluster status`.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;

use super::{Held, State};
use crate::protocol::*;

/// Step 3: progress acks for every held request, every `ack_wait / 3`.
pub(super) async fn heartbeat(state: Arc<State>) {
    let every = state.settings.ack_wait / 3;
    loop {
        tokio::time::sleep(every).await;
        let held: Vec<Arc<Held>> = state
            .held
            .lock()
            .map(|h| h.values().cloned().collect())
            .unwrap_or_default();
        let mut leases: HashMap<String, Vec<String>> = HashMap::new();
        for h in held {
            if h.since.elapsed() >= state.max_task_time {
                // A hung handler: no heartbeat, no lease renewal.
                state.count(&h.task, |c| c.expired += 1);
                continue;
            }
            let _ = h.message.ack_with(AckKind::Progress).await;
            if h.lease.load(Relaxed) {
                leases
                    .entry(h.task.clone())
                    .or_default()
                    .push(h.request.clone());
            }
        }
        if !leases.is_empty() {
            state.limiter.renew(leases).await;
        }
    }
}

/// Publish the node's status twice a second on core NATS.
pub(super) async fn publish_status(state: Arc<State>, client: async_nats::Client) {
    let subject = format!("{STATUS_PREFIX}{}", state.name);
    loop {
        if let Ok(json) = serde_json::to_vec(&state.status()) {
            let _ = client.publish(subject.clone(), json.into()).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
