//! The node's command-line options, shared by the `tidepool-node` binary and
//! `tidepool node`, and the cluster settings shared by every subcommand.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use tidepool::{policy::PolicySpec, QueueFlavor};

use crate::duration;
use crate::node::{Node, NodeConfig, NodeStatus};
use crate::protocol::Settings;

fn policy(s: &str) -> Result<PolicySpec, String> {
    match PolicySpec::parse(s) {
        Ok(PolicySpec::ThreadPerRequest) => {
            Err("`tpr` is not a pool policy: a node needs a pool".into())
        }
        Ok(p) => Ok(p),
        Err(e) => Err(e.to_string()),
    }
}

/// A `HOST:PORT` to listen on (an IP address; port 0 picks a free one).
pub fn socket_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.parse().map_err(|_| {
        format!(
            "`{s}` is not HOST:PORT with an IP address and a port 0..=65535 (e.g. 127.0.0.1:9187)"
        )
    })
}

fn queue(s: &str) -> Result<QueueFlavor, String> {
    s.parse::<QueueFlavor>().map_err(|e| e.to_string())
}

/// A broker URL as `--nats` takes it, checked when the options are parsed.
fn nats_url(s: &str) -> Result<String, String> {
    crate::protocol::check_url(s)?;
    Ok(s.to_string())
}

/// Where the broker is: `--nats URL` (or `TIDEPOOL_NATS`), shared by every
/// command that talks to a cluster.
#[derive(Debug, Clone, Args)]
pub struct NatsArgs {
    /// Broker URL(s), comma-separated for a cluster (nats://HOST:PORT).
    #[arg(
        long = "nats",
        value_name = "URL",
        env = "TIDEPOOL_NATS",
        default_value = "nats://127.0.0.1:4222",
        value_parser = nats_url
    )]
    pub url: String,
}

/// Where the broker is and the stream settings every participant shares.
#[derive(Debug, Clone, Args)]
pub struct BrokerArgs {
    /// The broker.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// How long a node may hold a request without an ack or a progress
    /// heartbeat before it goes to another node (1s..=1h; used when the
    /// streams are created).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration::ack_wait)]
    pub ack_wait: Duration,
    /// Deliveries of a request before it is dead-lettered (1..1000).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub max_deliver: u32,
    /// Copies of each stream (1..5): 3 on a three-server NATS cluster.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub replicas: usize,
}

impl BrokerArgs {
    /// The validated settings.
    pub fn settings(&self) -> Result<Settings, String> {
        let s = Settings {
            ack_wait: self.ack_wait,
            max_deliver: self.max_deliver,
            replicas: self.replicas,
            ..Settings::default()
        };
        s.validate()?;
        Ok(s)
    }
}

/// `tidepool-node` / `tidepool node`: run one node.
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// Broker and stream settings.
    #[command(flatten)]
    pub broker: BrokerArgs,
    /// The node's name (default: node-PID).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Sizing policy of the node's pool: auto, frequency (Bahadur et al.),
    /// fixed:N, watermark:MIN..MAX, xu-bode, hisdyn, hill-climb.
    #[arg(long, value_name = "SPEC", default_value = "auto", value_parser = policy)]
    pub policy: PolicySpec,
    /// Queue flavor of the pool: lock-free, mutex, spin, hybrid (Bahadur et al.).
    #[arg(long, value_name = "FLAVOR", default_value = "lock-free", value_parser = queue)]
    pub queue: QueueFlavor,
    /// Lower bound of the pool size.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_threads: usize,
    /// Upper bound of the pool size.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_threads: usize,
    /// Requests held beyond the pool's size (0..10000): 1 lets an on-demand
    /// policy see that the pool is short.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub slack: usize,
    /// Append `REQUEST DELIVERY` to FILE as each task starts (an audit trail
    /// that survives SIGKILL).
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// On SIGTERM, how long to let running tasks finish before releasing them
    /// (0s..=1h).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration::drain_timeout)]
    pub drain_timeout: Duration,
    /// Stop heartbeats for a task running longer than this (a hung handler),
    /// so that its request goes to another node after the ack wait (1s..=1d).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = duration::max_task_time)]
    pub max_task_time: Duration,
    /// Serve the node's metrics at http://HOST:PORT/metrics (Prometheus text).
    #[arg(long, value_name = "HOST:PORT", value_parser = socket_addr)]
    pub metrics_addr: Option<std::net::SocketAddr>,
}

impl NodeArgs {
    /// The node configuration, validated.
    pub fn config(&self) -> Result<NodeConfig, String> {
        let settings = self.broker.settings()?;
        if self.min_threads == 0 || self.min_threads > self.max_threads {
            return Err(format!(
                "--min-threads {} must be between 1 and --max-threads ({})",
                self.min_threads, self.max_threads
            ));
        }
        if self.max_threads > tidepool::MAX_THREADS {
            return Err(format!(
                "--max-threads {} must be between 1 and {}",
                self.max_threads,
                tidepool::MAX_THREADS
            ));
        }
        if self.slack > 10_000 {
            return Err(format!(
                "--slack {} must be between 0 and 10000",
                self.slack
            ));
        }
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| format!("node-{}", std::process::id()));
        if !crate::protocol::valid_task_name(&name) {
            return Err(format!(
                "--name `{name}` is not allowed: use 1 to 64 of A-Z a-z 0-9 - _"
            ));
        }
        Ok(NodeConfig {
            url: self.broker.nats.url.clone(),
            name,
            policy: self.policy.clone(),
            queue: self.queue,
            min_threads: self.min_threads,
            max_threads: self.max_threads,
            slack: self.slack,
            settings,
            journal: self.journal.clone(),
            drain_timeout: self.drain_timeout,
            max_task_time: self.max_task_time,
            metrics_addr: self.metrics_addr,
        })
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
pub async fn stop_signal() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Resolves once `flag` is raised (polled every 50 ms): a flag that a
/// signal handler sets (the CLI's Ctrl-C flag), as a future.
pub async fn raised(flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    while !flag.load(std::sync::atomic::Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Run `work` until it ends (`Some`) or `interrupt` completes first
/// (`None`; `work` is dropped, which drops the process guards it holds).
pub async fn until<T>(
    work: impl std::future::Future<Output = T>,
    interrupt: impl std::future::Future<Output = ()>,
) -> Option<T> {
    tokio::select! {
        r = work => Some(r),
        _ = interrupt => None,
    }
}

/// Run `f` to completion on a fresh multi-threaded runtime (two workers:
/// the broker I/O is light; the pool's own threads do the work).
pub fn block_on<F: std::future::Future>(f: F) -> std::io::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    Ok(runtime.block_on(f))
}

/// Run a node (its handlers registered) until SIGTERM or SIGINT (Ctrl-C),
/// then stop gracefully.
pub fn run_node(node: Node) -> anyhow::Result<NodeStatus> {
    block_on(node.run(stop_signal()))?
}
