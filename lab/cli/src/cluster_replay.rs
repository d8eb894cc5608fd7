//! Replay a tidepool workload across the cluster: each trace task becomes a
//! `trace` request (its compute and blocked time), submitted at its arrival
//! offset; the papers' metrics come from four instants per request, and the
//! nodes' status reports give each node's pool size over time.
//!
//! Instants: *submitted* (client publishes), *accepted* (the broker confirmed
//! it stored the request), *started* and *finished* (on the node). So
//! `response` is the broker's store latency, `wait` the broker hop to a node
//! plus the node's queue, `turnaround` submit → finished. Node instants are
//! the node's wall clock: on several hosts, clock skew enters `wait`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tidepool_cluster::protocol::unix_ns;
use tidepool_cluster::status::Recorder;
use tidepool_cluster::tasks::Outcome;
use tidepool_cluster::{Client, Node};
use tidepool_workload::metrics::{summarize, LatencySummary, TaskMetrics, TaskRecord};
use tidepool_workload::{BusyLoop, TaskBody, TaskSpec, Trace};

/// The payload of a `trace` task: JSON `{"cpu_us":N,"blocked_us":N}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TracePayload {
    /// Compute, µs.
    pub cpu_us: u64,
    /// Blocked (sleep), µs.
    pub blocked_us: u64,
}

impl TracePayload {
    /// The payload for one task of a trace.
    pub fn of(task: &TaskSpec) -> TracePayload {
        TracePayload {
            cpu_us: task.cpu.as_micros() as u64,
            blocked_us: task.blocked.as_micros() as u64,
        }
    }

    /// Encode as JSON bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("two integers always serialise")
    }
}

/// The `trace` handler: a trace task's body (calibrated compute, then sleep).
pub fn trace(payload: &[u8]) -> Outcome {
    let p: TracePayload = serde_json::from_slice(payload)
        .map_err(|e| format!("trace payload is not {{\"cpu_us\":N,\"blocked_us\":N}}: {e}"))?;
    TaskBody::new(
        Duration::from_micros(p.cpu_us),
        Duration::from_micros(p.blocked_us),
    )
    .run(&BusyLoop::global());
    Ok(Vec::new())
}

/// Give `node` the laboratory's `trace` handler.
pub fn with_trace(mut node: Node) -> Node {
    node.register("trace", trace)
        .expect("`trace` is a valid task name");
    node
}

/// The result of a cluster replay.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterRun {
    /// The workload's name.
    pub workload: String,
    /// Requests submitted.
    pub requests: u64,
    /// Requests whose handler failed (dead-lettered).
    pub failed: u64,
    /// The papers' metrics (µs): response (submit → stored), wait (stored →
    /// started on a node), processing, turnaround (submit → finished).
    pub metrics: TaskMetrics,
    /// The broker hop: submit → start on a node.
    pub submit_to_start: LatencySummary,
    /// Submit → result back at the client.
    pub end_to_end: LatencySummary,
    /// Results per node.
    pub per_node: BTreeMap<String, u64>,
    /// Each node's pool size over time: `[seconds since start, size]`.
    pub pool_sizes: BTreeMap<String, Vec<[f64; 2]>>,
    /// The broker's CPU time per request, µs (known when the run started
    /// its own broker).
    pub broker_cpu_us_per_request: Option<f64>,
}

/// Replay `trace` through `client` (arrival gaps divided by `speed`), wait
/// for every result (up to `timeout` after the last submission).
pub async fn replay(
    client: &Client,
    trace: &Trace,
    speed: f64,
    timeout: Duration,
) -> anyhow::Result<ClusterRun> {
    if !(speed.is_finite() && speed > 0.0) {
        anyhow::bail!("speed {speed} must be > 0");
    }
    let recorder = Recorder::start(client.nats()).await?;
    let t0_ns = unix_ns();
    let t0 = tokio::time::Instant::now();
    let mut at = Duration::ZERO;
    let mut submits = Vec::with_capacity(trace.len());
    for task in &trace.tasks {
        at += task.start_delay.div_f64(speed);
        tokio::time::sleep_until(t0 + at).await;
        let c = client.clone();
        let payload = TracePayload::of(task).encode();
        submits.push(tokio::spawn(
            async move { c.submit("trace", payload).await },
        ));
    }
    let mut pending = Vec::with_capacity(submits.len());
    for s in submits {
        pending.push(s.await??);
    }
    let results = client.wait_all(pending, timeout).await?;
    let samples = recorder.stop();

    let rel = |ns: u64| ns.saturating_sub(t0_ns);
    let mut records = Vec::with_capacity(results.len());
    let mut per_node = BTreeMap::new();
    let mut failed = 0;
    for (i, r) in results.iter().enumerate() {
        *per_node.entry(r.node.clone()).or_insert(0u64) += 1;
        if r.output.is_err() {
            failed += 1;
        }
        let ran = r.started_ns > 0;
        records.push(TaskRecord {
            request_id: i as u64,
            app_id: trace.tasks.get(i).map_or(0, |t| t.app_id),
            scheduled_ns: rel(r.submitted_ns),
            submitted_ns: rel(r.submitted_ns),
            accepted_ns: Some(rel(r.accepted_ns)),
            started_ns: ran.then(|| rel(r.started_ns)),
            finished_ns: ran.then(|| rel(r.finished_ns)),
        });
    }
    let submit_to_start = LatencySummary::from_ns(
        results
            .iter()
            .filter(|r| r.started_ns > 0)
            .map(|r| r.started_ns.saturating_sub(r.submitted_ns)),
    );
    let end_to_end = LatencySummary::from_ns(
        results
            .iter()
            .map(|r| r.received_ns.saturating_sub(r.submitted_ns)),
    );
    let mut pool_sizes: BTreeMap<String, Vec<[f64; 2]>> = BTreeMap::new();
    for s in samples {
        pool_sizes
            .entry(s.node.clone())
            .or_default()
            .push([rel(s.at_unix_ns) as f64 / 1e9, s.pool_size as f64]);
    }
    Ok(ClusterRun {
        workload: trace.name.clone(),
        requests: trace.len() as u64,
        failed,
        metrics: summarize(&records),
        submit_to_start,
        end_to_end,
        per_node,
        pool_sizes,
        broker_cpu_us_per_request: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_payloads_round_trip_and_bad_ones_are_errors() {
        let t = TracePayload {
            cpu_us: 10,
            blocked_us: 20,
        };
        assert_eq!(trace(&t.encode()), Ok(Vec::new()));
        assert!(trace(b"{}").unwrap_err().contains("cpu_us"));
    }
}
