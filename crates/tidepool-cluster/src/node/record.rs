//! Recording a finished request: its result, then its ack (steps 2 and 4),
//! and the dead-letter stream for what failed on every delivery.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, message::PublishMessage, AckKind};
use async_nats::HeaderMap;
use futures_util::StreamExt;
use serde::Deserialize;

use super::check::result_recorded;
use super::{Done, Held, State};
use crate::protocol::{self, *};
use crate::tasks::Outcome;

/// How long a node keeps retrying to record a result or an ack across a
/// broker outage before it gives up (the request is then redelivered).
const RECORD_PATIENCE: Duration = Duration::from_secs(600);

/// Publish a result (or an error result) with the request id as message id.
async fn publish_result(
    js: &jetstream::Context,
    node: &str,
    client: &str,
    request: &str,
    delivered: i64,
    outcome: &Outcome,
    times: (u64, u64),
) -> anyhow::Result<bool> {
    let mut headers = HeaderMap::new();
    headers.insert(H_REQUEST, request);
    headers.insert(H_NODE, node);
    headers.insert(H_DELIVERED, delivered.to_string().as_str());
    headers.insert(H_STARTED, times.0.to_string().as_str());
    headers.insert(H_FINISHED, times.1.to_string().as_str());
    let payload = match outcome {
        Ok(out) => out.clone(),
        Err(e) => {
            headers.insert(H_ERROR, one_line(e).as_str());
            Vec::new()
        }
    };
    let ack = js
        .send_publish(
            format!("{RES_PREFIX}{client}.{request}"),
            PublishMessage::build()
                .headers(headers)
                .payload(payload.into())
                .message_id(request),
        )
        .await?
        .await?;
    Ok(ack.duplicate)
}

/// Header values are one line.
fn one_line(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// Record one finished task (step 2 and 4 of the protocol).
pub(super) async fn record(state: Arc<State>, done: Done) {
    let Some(held) = state
        .held
        .lock()
        .ok()
        .and_then(|h| h.get(&done.key).cloned())
    else {
        return; // released at shutdown
    };
    if held.lease.load(Relaxed) {
        state.limiter.release(&held.task, &held.request).await;
    }
    let times = (done.started_ns, done.finished_ns);
    let result = match &done.outcome {
        Ok(_) => {
            state.completed.fetch_add(1, Relaxed);
            record_result(&state, &held, &done.outcome, times).await
        }
        Err(e) if done.last => {
            if e == CANCELLED {
                state.cancelled.fetch_add(1, Relaxed);
                state.count(&held.task, |c| c.cancelled += 1);
            } else {
                eprintln!("{}: request {}: {e}", state.name, held.request);
            }
            record_result(&state, &held, &done.outcome, times).await
        }
        Err(e) if held.delivered >= state.settings.max_deliver as i64 => {
            state.failures.fetch_add(1, Relaxed);
            eprintln!(
                "{}: request {} failed on its last delivery ({}): {e}",
                state.name, held.request, held.delivered
            );
            let error = format!("dead-lettered after {} deliveries: {e}", held.delivered);
            match dead_letter(
                &state.js,
                &held.task,
                &held.request,
                held.delivered,
                &error,
                held.message.payload.clone(),
            )
            .await
            {
                Ok(()) => {
                    state.dead_lettered.fetch_add(1, Relaxed);
                    state.count(&held.task, |c| c.dead_lettered += 1);
                    record_result(&state, &held, &Err(error), times).await
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => {
            state.failures.fetch_add(1, Relaxed);
            eprintln!(
                "{}: request {} failed (delivery {}): {e}",
                state.name, held.request, held.delivered
            );
            let delay = Duration::from_millis(200 * held.delivered.clamp(1, 25) as u64);
            let _ = held.message.ack_with(AckKind::Nak(Some(delay))).await;
            Ok(())
        }
    };
    if let Err(e) = result {
        // Not recorded or not acked: the broker redelivers it after ack_wait.
        eprintln!("{}: request {}: {e}", state.name, held.request);
    }
    if let Ok(mut h) = state.held.lock() {
        h.remove(&done.key);
    }
}

/// Publish the result (retrying across a broker outage), then ack.
async fn record_result(
    state: &State,
    held: &Held,
    outcome: &Outcome,
    times: (u64, u64),
) -> anyhow::Result<()> {
    let duplicate = protocol::retry(RECORD_PATIENCE, || {
        publish_result(
            &state.js,
            &state.name,
            &held.client,
            &held.request,
            held.delivered,
            outcome,
            times,
        )
    })
    .await
    .map_err(|e| anyhow::anyhow!("result not recorded: {e}"))?;
    if duplicate {
        state.duplicates.fetch_add(1, Relaxed);
    }
    protocol::retry(RECORD_PATIENCE, || held.message.double_ack())
        .await
        .map_err(|e| anyhow::anyhow!("result recorded but not acked: {e}"))?;
    state.count(&held.task, |c| c.acked += 1);
    Ok(())
}

/// Put a request on the dead-letter stream with its error.
async fn dead_letter(
    js: &jetstream::Context,
    task: &str,
    request: &str,
    delivered: i64,
    error: &str,
    payload: bytes::Bytes,
) -> anyhow::Result<()> {
    let task = if valid_task_name(task) { task } else { "_" };
    protocol::retry(RECORD_PATIENCE, || async {
        let mut headers = HeaderMap::new();
        headers.insert(H_REQUEST, request);
        headers.insert(H_TASK, task);
        headers.insert(H_DELIVERED, delivered.to_string().as_str());
        headers.insert(H_ERROR, one_line(error).as_str());
        js.send_publish(
            format!("{DEAD_PREFIX}{task}"),
            PublishMessage::build()
                .headers(headers)
                .payload(payload.clone())
                .message_id(request),
        )
        .await?
        .await?;
        anyhow::Ok(())
    })
    .await
    .map_err(|e| anyhow::anyhow!("cannot dead-letter {request}: {e}"))
}

/// The broker's advisory when a request used up its deliveries without an
/// ack (every node that took it stalled or died): move it to the dead-letter
/// stream. One node in the queue group handles each advisory.
pub(super) async fn dead_letter_advisories(state: Arc<State>, client: async_nats::Client) {
    #[derive(Deserialize)]
    struct Advisory {
        stream_seq: u64,
        deliveries: i64,
    }
    let subject = format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{REQUESTS}.*");
    let Ok(mut sub) = client
        .queue_subscribe(subject, "tidepool-dead".into())
        .await
    else {
        return;
    };
    while let Some(m) = sub.next().await {
        let Ok(adv) = serde_json::from_slice::<Advisory>(&m.payload) else {
            continue;
        };
        let Ok(stream) = state.js.get_stream(REQUESTS).await else {
            continue;
        };
        let Ok(raw) = stream.get_raw_message(adv.stream_seq).await else {
            continue; // acked meanwhile
        };
        let get = |n: &str| raw.headers.get(n).map(|v| v.as_str().to_string());
        let request = get(H_REQUEST).unwrap_or_else(|| format!("seq{}", adv.stream_seq));
        let client_id = get(H_CLIENT).unwrap_or_else(|| "_".into());
        let task = Priority::of_subject(raw.subject.as_str())
            .map_or("_", |(t, _)| t)
            .to_string();
        if result_recorded(&state.results, &client_id, &request).await {
            // It was done: its result is recorded and only the ack was lost
            // (or is still on its way). Not a dead letter: remove it.
            eprintln!(
                "{}: request {request} (stream seq {}) reached {} deliveries but its result is \
                 recorded: removed from the queue, not dead-lettered",
                state.name, adv.stream_seq, adv.deliveries
            );
            let _ = stream.delete_message(adv.stream_seq).await;
            continue;
        }
        let error = format!(
            "dead-lettered after {} deliveries: no ack within the ack wait ({:?}) on any of them",
            adv.deliveries, state.settings.ack_wait
        );
        eprintln!(
            "{}: request {request} (stream seq {}): {error}",
            state.name, adv.stream_seq
        );
        if dead_letter(
            &state.js,
            &task,
            &request,
            adv.deliveries,
            &error,
            raw.payload.clone(),
        )
        .await
        .is_ok()
        {
            state.dead_lettered.fetch_add(1, Relaxed);
            state.count(&task, |c| c.dead_lettered += 1);
            let _ = publish_result(
                &state.js,
                &state.name,
                &client_id,
                &request,
                adv.deliveries,
                &Err(error),
                (0, 0),
            )
            .await;
            let _ = stream.delete_message(adv.stream_seq).await;
        }
    }
}
