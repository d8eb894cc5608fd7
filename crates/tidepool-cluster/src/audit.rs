//! Count what the broker holds: results per request (and so duplicates),
//! dead letters, requests still queued. The chaos scenario's ground truth.

use async_nats::jetstream;
use futures_util::TryStreamExt;
use serde::Serialize;

use crate::protocol::*;

/// What the streams hold for one client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Audit {
    /// Result messages stored for the client's requests.
    pub results: u64,
    /// Requests with at least one stored result.
    pub distinct_results: u64,
    /// Result messages beyond the first of their request.
    pub duplicate_results: u64,
    /// Messages in the dead-letter stream (all clients).
    pub dead_lettered: u64,
    /// Requests still in the request stream (all clients).
    pub requests_queued: u64,
}

/// Audit the streams for the requests of client `client_id`.
pub async fn audit(js: &jetstream::Context, client_id: &str) -> anyhow::Result<Audit> {
    let results = js.get_stream(RESULTS).await?;
    let mut subjects = results
        .info_with_subjects(format!("{RES_PREFIX}{client_id}.>"))
        .await?;
    let mut a = Audit::default();
    while let Some((_subject, count)) = subjects.try_next().await? {
        a.results += count as u64;
        a.distinct_results += 1;
        a.duplicate_results += (count as u64).saturating_sub(1);
    }
    a.dead_lettered = js.get_stream(DEAD).await?.info().await?.state.messages;
    a.requests_queued = js.get_stream(REQUESTS).await?.info().await?.state.messages;
    Ok(a)
}
