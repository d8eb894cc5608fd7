//! Step 2's check before a delivery runs: has this request run before?

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use async_nats::jetstream;

use super::State;
use crate::protocol::{self, *};
use crate::suspect::Suspicion;

/// A header of `m` as text.
pub(super) fn header(m: &async_nats::Message, name: &str) -> Option<String> {
    m.headers
        .as_ref()?
        .get(name)
        .map(|v| v.as_str().to_string())
}

/// Is a result for `request` of `client` in the results stream? Errors other
/// than "none" (a broker restarting, a timeout) are retried for up to 30 s,
/// so that "cannot tell" does not become "no" and run a request again.
pub(super) async fn result_recorded(
    results: &jetstream::stream::Stream,
    client: &str,
    request: &str,
) -> bool {
    use async_nats::jetstream::stream::LastRawMessageErrorKind as Kind;
    let subject = format!("{RES_PREFIX}{client}.{request}");
    let found = protocol::retry(Duration::from_secs(30), || async {
        match results.get_last_raw_message_by_subject(&subject).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == Kind::NoMessageFound => Ok(false),
            Err(e) => Err(e),
        }
    })
    .await;
    // Still cannot tell after 30 s: run it (at least once beats at most once).
    found.unwrap_or(false)
}

/// After the client connected again (a broker restart), read the requests
/// stream's last sequence from the broker it is connected to now: the bound
/// of the first deliveries that may be replays (see `crate::suspect`).
/// Until that read succeeds every first delivery stays suspect.
pub(super) async fn bound_suspicion(state: &State, suspicion: &mut Suspicion, connects: u64) {
    if !suspicion.needs_bound(connects) {
        return;
    }
    let last = protocol::retry(Duration::from_secs(30), || async {
        let stream = state.js.get_stream(REQUESTS).await?;
        anyhow::Ok(stream.cached_info().state.last_sequence)
    })
    .await;
    match last {
        Ok(last) => {
            suspicion.bound(connects, last);
            eprintln!(
                "{}: connected again (connection {connects}): first deliveries up to stream seq \
                 {last} are checked against the results before they run",
                state.name
            );
        }
        Err(e) => eprintln!(
            "{}: connected again but cannot read {REQUESTS}: {e}; every delivery is checked",
            state.name
        ),
    }
}

/// Step 2's check: a delivery that may have run before (a redelivery, or a first
/// delivery that a restarted broker may be replaying, see
/// `crate::suspect`) is checked. If its result is already recorded (its
/// first run recorded it, then the ack was lost or the node died), it is
/// acked without running. A replayed first delivery of a request this node
/// is still running is left alone: the run in progress records and acks it
/// (if that ack is lost too, it comes back as a redelivery after `ack_wait`).
pub(super) async fn already_handled(
    state: &State,
    suspicion: &Suspicion,
    connects: u64,
    message: &jetstream::Message,
) -> bool {
    let info = message.info().ok();
    let delivered = info.as_ref().map_or(1, |i| i.delivered);
    let seq = info.as_ref().map_or(0, |i| i.stream_sequence);
    if !suspicion.suspect(connects, delivered, seq) {
        return false;
    }
    if delivered > 1 {
        state.redelivered.fetch_add(1, Relaxed);
    }
    let (Some(request), Some(client)) = (header(message, H_REQUEST), header(message, H_CLIENT))
    else {
        return false;
    };
    let what = if delivered > 1 {
        format!("delivered again (delivery {delivered}, stream seq {seq})")
    } else {
        format!("delivered as a first delivery after a reconnect (stream seq {seq})")
    };
    let running_here = delivered == 1
        && state.held.lock().is_ok_and(|h| {
            h.values()
                .any(|h| h.request == request && h.client == client)
        });
    if running_here {
        eprintln!(
            "{}: request {request} {what}: this node is running it: left to that run",
            state.name
        );
        return true;
    }
    let recorded = result_recorded(&state.results, &client, &request).await;
    // (After a restart every request queued before it is checked once: only
    // the replays are worth a line, not the whole backlog.)
    if recorded || delivered > 1 {
        eprintln!(
            "{}: request {request} {what}: {}",
            state.name,
            if recorded {
                "its result is already recorded: acked without running"
            } else {
                "running it"
            }
        );
    }
    if !recorded {
        return false;
    }
    state.already_recorded.fetch_add(1, Relaxed);
    let _ = protocol::retry(Duration::from_secs(30), || message.double_ack()).await;
    true
}
