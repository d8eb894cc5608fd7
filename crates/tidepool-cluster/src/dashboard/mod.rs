//! `tidepool cluster dashboard`: one self-contained web page (no external
//! assets) that an operator keeps open. The page asks `/state` once a
//! second; the server keeps what it shows: every node's latest status and
//! its pool size and running tasks over the last two minutes (from the
//! nodes' status reports), the queue depth per priority (the consumers'
//! pending counts), throughput (completed results per second, over the
//! last 5 s), run-time latency, the limits, and the dead letters.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use futures_util::StreamExt;
use serde::Serialize;

use crate::http::{self, Response};
use crate::limits::{self, Limit};
use crate::node::NodeStatus;
use crate::protocol::{self, Priority, DEAD, REQUESTS, STATUS_PREFIX};

/// The page (HTML, CSS and script in one file).
const PAGE: &str = include_str!("page.html");

/// How many samples of history a node keeps (two a second: two minutes).
const HISTORY: usize = 240;

/// A node silent this long is shown as gone, and dropped after 10 times it.
const SILENT: Duration = Duration::from_secs(3);

/// What `/state` answers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    /// When (Unix ns).
    pub at_unix_ns: u64,
    /// The nodes, by name.
    pub nodes: BTreeMap<String, NodeView>,
    /// Requests waiting per priority (`high`, `normal`, `low`).
    pub queue: BTreeMap<String, u64>,
    /// Requests delivered and not acked yet, all priorities.
    pub in_flight: u64,
    /// Results per second over the last 5 s, all nodes.
    pub throughput: f64,
    /// The limits per task name.
    pub limits: BTreeMap<String, Limit>,
    /// Messages in the dead-letter stream.
    pub dead_letters: u64,
    /// What could not be read from the broker just now, if anything.
    pub error: Option<String>,
}

/// One node on the page.
#[derive(Debug, Clone, Serialize)]
pub struct NodeView {
    /// Its latest status.
    pub status: NodeStatus,
    /// Silent for more than 3 s.
    pub gone: bool,
    /// `[seconds ago, pool size, running]`, oldest first.
    pub history: Vec<[f64; 3]>,
}

#[derive(Default)]
struct Board {
    latest: BTreeMap<String, NodeStatus>,
    history: BTreeMap<String, VecDeque<(u64, usize, usize)>>,
    completed: VecDeque<(u64, u64)>,
    broker: Snapshot,
}

impl Board {
    fn heard(&mut self, s: NodeStatus) {
        let h = self.history.entry(s.node.clone()).or_default();
        h.push_back((s.at_unix_ns, s.pool_size, s.running));
        while h.len() > HISTORY {
            h.pop_front();
        }
        self.latest.insert(s.node.clone(), s);
    }

    fn snapshot(&mut self) -> Snapshot {
        let now = protocol::unix_ns();
        let silent = SILENT.as_nanos() as u64;
        self.latest
            .retain(|_, s| now.saturating_sub(s.at_unix_ns) < 10 * silent);
        let latest = &self.latest;
        self.history.retain(|n, _| latest.contains_key(n));
        let total: u64 = self.latest.values().map(|s| s.completed).sum();
        self.completed.push_back((now, total));
        while self
            .completed
            .front()
            .is_some_and(|(t, _)| now - t > 5_000_000_000)
        {
            self.completed.pop_front();
        }
        let throughput = match (self.completed.front(), self.completed.back()) {
            (Some((t0, c0)), Some((t1, c1))) if t1 > t0 => {
                c1.saturating_sub(*c0) as f64 / ((t1 - t0) as f64 / 1e9)
            }
            _ => 0.0,
        };
        let nodes = self
            .latest
            .iter()
            .map(|(name, s)| {
                let history = self.history.get(name).map_or(Vec::new(), |h| {
                    h.iter()
                        .map(|(t, size, running)| {
                            [
                                now.saturating_sub(*t) as f64 / 1e9,
                                *size as f64,
                                *running as f64,
                            ]
                        })
                        .collect()
                });
                let view = NodeView {
                    status: s.clone(),
                    gone: now.saturating_sub(s.at_unix_ns) > silent,
                    history,
                };
                (name.clone(), view)
            })
            .collect();
        Snapshot {
            at_unix_ns: now,
            nodes,
            throughput,
            ..self.broker.clone()
        }
    }
}

/// Read the broker's side once: queue depths, dead letters, limits.
async fn poll_broker(js: &jetstream::Context) -> Snapshot {
    let mut s = Snapshot::default();
    let read = async {
        let requests = js.get_stream(REQUESTS).await?;
        for p in Priority::ALL {
            let (name, _) = p.consumer();
            let mut c: jetstream::consumer::PullConsumer = requests
                .get_consumer(name)
                .await
                .map_err(|e| anyhow::anyhow!("consumer {name}: {e}"))?;
            let info = c.info().await?;
            s.queue.insert(p.as_str().to_string(), info.num_pending);
            s.in_flight += info.num_ack_pending as u64;
        }
        let mut dead = js.get_stream(DEAD).await?;
        s.dead_letters = dead.info().await?.state.messages;
        s.limits = limits::all(js).await?;
        anyhow::Ok(())
    };
    if let Err(e) = read.await {
        s.error = Some(format!("cannot read the broker: {e}"));
    }
    s
}

/// Serve the dashboard of the cluster at `url` on `listener` until
/// `shutdown` completes.
pub async fn serve(
    url: &str,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let client =
        protocol::connect(url, "tidepool-dashboard", Some(Duration::from_secs(30))).await?;
    let js = jetstream::new(client.clone());
    let board = Arc::new(Mutex::new(Board::default()));
    let mut sub = client.subscribe(format!("{STATUS_PREFIX}*")).await?;
    let listen = {
        let board = board.clone();
        async move {
            while let Some(m) = sub.next().await {
                if let Ok(s) = serde_json::from_slice::<NodeStatus>(&m.payload) {
                    if let Ok(mut b) = board.lock() {
                        b.heard(s);
                    }
                }
            }
        }
    };
    let broker = {
        let board = board.clone();
        async move {
            loop {
                let s = poll_broker(&js).await;
                if let Ok(mut b) = board.lock() {
                    b.broker = s;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    let web = http::serve(listener, move |path| {
        let board = board.clone();
        async move {
            match path.as_str() {
                "/" | "/index.html" => Response::ok("text/html; charset=utf-8", PAGE),
                "/state" => {
                    let snap = board.lock().map(|mut b| b.snapshot()).unwrap_or_default();
                    Response::ok(
                        "application/json",
                        serde_json::to_vec(&snap).unwrap_or_default(),
                    )
                }
                other => Response::not_found(other, "/ or /state"),
            }
        }
    });
    tokio::select! {
        _ = listen => {}
        _ = broker => {}
        _ = web => {}
        _ = shutdown => {}
    }
    Ok(())
}
