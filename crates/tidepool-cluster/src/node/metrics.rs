//! `/metrics` of a node (`--metrics-addr`): the Prometheus text format,
//! rendered at each scrape from the node's pool (through the library's
//! exporter: threads, queue, task counters, wait and service histograms,
//! labelled `pool="<node>"`) and the node's counters per task name
//! (labelled `node`, `task`):
//!
//! | metric | what |
//! |---|---|
//! | `tidepool_node_pulled_total` | deliveries pulled |
//! | `tidepool_node_acked_total` | requests recorded and acked |
//! | `tidepool_node_redelivered_total` | deliveries that were not first deliveries |
//! | `tidepool_node_dead_lettered_total` | requests moved to the dead letters |
//! | `tidepool_node_cancelled_total` | requests recorded as cancelled |
//! | `tidepool_node_delayed_total` | deliveries put back until their not-before time |
//! | `tidepool_node_expired_total` | heartbeats withheld from tasks past `--max-task-time` |
//! | `tidepool_node_held` | requests held now (gauge) |

use std::sync::{Arc, Mutex};

use metrics::{counter, describe_counter, describe_gauge, gauge, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use tidepool::export::MetricsExporter;

use super::State;
use crate::http::{self, Response};

/// Histogram buckets, seconds: 100 µs to 1 min.
const BUCKETS: &[f64] = &[
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0,
];

const COUNTERS: &[(&str, &str)] = &[
    ("tidepool_node_pulled_total", "Deliveries pulled"),
    ("tidepool_node_acked_total", "Requests recorded and acked"),
    (
        "tidepool_node_redelivered_total",
        "Deliveries that were not first deliveries",
    ),
    (
        "tidepool_node_dead_lettered_total",
        "Requests moved to the dead-letter stream",
    ),
    (
        "tidepool_node_cancelled_total",
        "Requests recorded as cancelled",
    ),
    (
        "tidepool_node_delayed_total",
        "Deliveries put back until their not-before time",
    ),
    (
        "tidepool_node_expired_total",
        "Heartbeats withheld from tasks past max-task-time",
    ),
];

struct Exporter {
    recorder: PrometheusRecorder,
    pool: Mutex<MetricsExporter>,
}

impl Exporter {
    fn new(node: &str) -> Exporter {
        let builder = PrometheusBuilder::new();
        let builder = builder
            .set_buckets(BUCKETS)
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        metrics::with_local_recorder(&recorder, || {
            MetricsExporter::describe();
            for (name, what) in COUNTERS {
                describe_counter!(*name, Unit::Count, *what);
            }
            describe_gauge!("tidepool_node_held", Unit::Count, "Requests held now");
        });
        Exporter {
            recorder,
            pool: Mutex::new(MetricsExporter::new(node)),
        }
    }

    fn render(&self, state: &State) -> String {
        metrics::with_local_recorder(&self.recorder, || {
            if let Ok(mut e) = self.pool.lock() {
                e.publish(&state.pool.stats());
            }
            let node = state.name.clone();
            gauge!("tidepool_node_held", "node" => node.clone()).set(state.held_len() as f64);
            let per_task = state.per_task.lock().map(|m| m.clone()).unwrap_or_default();
            for (task, c) in per_task {
                let values = [
                    c.pulled,
                    c.acked,
                    c.redelivered,
                    c.dead_lettered,
                    c.cancelled,
                    c.delayed,
                    c.expired,
                ];
                for ((name, _), v) in COUNTERS.iter().zip(values) {
                    counter!(*name, "node" => node.clone(), "task" => task.clone()).absolute(v);
                }
            }
        });
        self.recorder.handle().render()
    }
}

/// Serve `/metrics` on `listener` for as long as the node runs.
pub(super) async fn serve(state: Arc<State>, listener: tokio::net::TcpListener) {
    let exporter = Arc::new(Exporter::new(&state.name));
    http::serve(listener, move |path| {
        let (state, exporter) = (state.clone(), exporter.clone());
        async move {
            match path.as_str() {
                "/metrics" => Response::ok(
                    "text/plain; version=0.0.4; charset=utf-8",
                    exporter.render(&state),
                ),
                other => Response::not_found(other, "/metrics"),
            }
        }
    })
    .await
}
