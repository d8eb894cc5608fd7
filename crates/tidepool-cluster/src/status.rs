//! Collect the nodes' status reports (`tidepool cluster status`, and the
//! per-node pool sizes over time in `tidepool cluster replay`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;

use crate::node::NodeStatus;
use crate::protocol::STATUS_PREFIX;

/// Listen for `listen` and return the latest status of every node heard
/// (nodes report twice a second), by node name.
pub async fn collect(
    client: &async_nats::Client,
    listen: Duration,
) -> anyhow::Result<BTreeMap<String, NodeStatus>> {
    let mut sub = client.subscribe(format!("{STATUS_PREFIX}*")).await?;
    let mut latest = BTreeMap::new();
    let until = tokio::time::Instant::now() + listen;
    while let Ok(Some(m)) = tokio::time::timeout_at(until, sub.next()).await {
        if let Ok(s) = serde_json::from_slice::<NodeStatus>(&m.payload) {
            latest.insert(s.node.clone(), s);
        }
    }
    Ok(latest)
}

/// Records every status report it hears until [`stop`](Recorder::stop):
/// pool sizes over time.
#[derive(Debug)]
pub struct Recorder {
    samples: Arc<Mutex<Vec<NodeStatus>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Start listening.
    pub async fn start(client: &async_nats::Client) -> anyhow::Result<Recorder> {
        let mut sub = client.subscribe(format!("{STATUS_PREFIX}*")).await?;
        let samples = Arc::new(Mutex::new(Vec::new()));
        let s = samples.clone();
        let task = tokio::spawn(async move {
            while let Some(m) = sub.next().await {
                if let Ok(st) = serde_json::from_slice::<NodeStatus>(&m.payload) {
                    if let Ok(mut v) = s.lock() {
                        v.push(st);
                    }
                }
            }
        });
        Ok(Recorder { samples, task })
    }

    /// Stop and return what was heard, in arrival order.
    pub fn stop(self) -> Vec<NodeStatus> {
        self.task.abort();
        self.samples.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// Wait until `n` nodes report (or `timeout` passes; then an error naming
/// how many did).
pub async fn wait_for_nodes(
    client: &async_nats::Client,
    n: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let heard = collect(client, Duration::from_millis(600)).await?.len();
        if heard >= n {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("only {heard} of {n} nodes reported within {timeout:?}");
        }
    }
}
