//! A node: a tidepool [`Pool`] that takes requests from the broker.
//!
//! ## The protocol
//!
//! 1. **Pull what can start now.** The puller asks the nodes' shared pull
//!    consumers, highest priority first (`pull.rs`), for `free = max(target,
//!    live) + slack − running` requests, where `running` counts requests
//!    held and not finished (also those waiting at the gate, `gate.rs`, for
//!    their not-before time or a lease of their task's limit).
//!    The pool's sizing policy sets `target`, so the policy is the node's
//!    back-pressure: a slow or small node pulls little, and nothing waits in
//!    a node's queue that another node could run. `slack` (default 1) lets
//!    the pool see one queued request, which is what makes an on-demand
//!    policy (`auto`) grow.
//! 2. **Run, then record, then ack (late ack).** Each delivered request is
//!    checked (`start.rs`) and handed to the pool (`run.rs`). A worker runs the handler
//!    (a panic is caught and is a failure) and hands the outcome back. The
//!    result is published to the results stream with `Nats-Msg-Id` = the
//!    request id, and only once the broker has stored it (the publish ack)
//!    is the request acked (with the broker's confirmation). A node that dies
//!    anywhere before the ack leaves the request unacked: the broker delivers
//!    it again after `ack_wait`, another node runs it again, and its result
//!    publish is dropped as a duplicate by the broker if the first one was
//!    stored. So **every request runs at least once and its result is
//!    recorded once** (within the duplicate window, 2 h by default). A
//!    redelivery whose result is already stored is acked without running, and
//!    so is a first delivery that a restarted broker may be replaying (its
//!    consumer state can be older than what it delivered before it stopped;
//!    see `suspect.rs` for which first deliveries are checked).
//! 3. **Heartbeats.** Every `ack_wait / 3` the node sends a progress ack
//!    (`+WPI`) for each request it holds, so long tasks are not redelivered
//!    while they run. A node that stalls (stopped, swapping, wedged) sends
//!    none, so its requests go to other nodes after `ack_wait`. Nor does a
//!    task that runs past `max_task_time` (a hung handler) get heartbeats:
//!    its request goes to another node too.
//! 4. **Failures.** A failed delivery is nak'ed with a growing delay, so
//!    another attempt (often on another node) follows. The delivery that
//!    reaches `max_deliver` publishes the request, with its error, to the
//!    dead-letter stream and an error result to the results stream (so the
//!    submitter's future resolves), then acks it. A request whose deliveries
//!    all timed out (it stalled every node that took it) is moved by whichever
//!    node hears the broker's max-deliveries advisory.
//! 5. **Graceful stop** (SIGTERM, or the `shutdown` future): stop pulling,
//!    nak at once what arrives late, let running tasks finish and record
//!    their results, up to `drain_timeout`; what still runs then is nak'ed so
//!    that other nodes take it at once.

mod check;
mod gate;
mod lease;
mod metrics;
mod pull;
mod record;
mod run;
mod start;
mod upkeep;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, AckKind};
use serde::{Deserialize, Serialize};
use tidepool::{policy::PolicySpec, Pool, QueueFlavor};
use tokio::sync::{mpsc, Notify};

use crate::cancel::Cancellations;
use crate::protocol::{self, *};
use crate::tasks::{builtins, Handler, Outcome};
use lease::Limiter;
use record::{dead_letter_advisories, record};
use upkeep::{heartbeat, publish_status};

/// How a node runs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Broker URL(s), comma-separated.
    pub url: String,
    /// The node's name (status subject, result header).
    pub name: String,
    /// The pool's sizing policy (`tpr` is not a pool and is refused).
    pub policy: PolicySpec,
    /// The pool's queue flavor.
    pub queue: QueueFlavor,
    /// Pool size bounds.
    pub min_threads: usize,
    /// Pool size bounds.
    pub max_threads: usize,
    /// Requests held beyond the pool's size (see the module docs).
    pub slack: usize,
    /// Stream and consumer settings (used if this node creates them).
    pub settings: Settings,
    /// Append `REQUEST DELIVERY UNIX_MS` to this file as each task starts (an audit
    /// that survives SIGKILL: each line is one `write` to an `O_APPEND` file).
    pub journal: Option<PathBuf>,
    /// How long a graceful stop waits for running tasks.
    pub drain_timeout: Duration,
    /// Heartbeats for a request stop after this long, so a task that hangs
    /// gives its request back to the broker (redelivered after `ack_wait`).
    pub max_task_time: Duration,
    /// Serve `/metrics` (Prometheus text) here.
    pub metrics_addr: Option<std::net::SocketAddr>,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            url: "nats://127.0.0.1:4222".into(),
            name: format!("node-{}", std::process::id()),
            policy: PolicySpec::Auto,
            queue: QueueFlavor::default(),
            min_threads: 1,
            max_threads: 256,
            slack: 1,
            settings: Settings::default(),
            journal: None,
            drain_timeout: Duration::from_secs(30),
            max_task_time: Duration::from_secs(3600),
            metrics_addr: None,
        }
    }
}

/// What a node publishes on `tidepool.status.<node>` twice a second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Node name.
    pub node: String,
    /// Process id.
    pub pid: u32,
    /// Sizing policy spec.
    pub policy: String,
    /// Worker threads alive.
    pub pool_size: usize,
    /// The policy's target size.
    pub target_size: usize,
    /// Requests running or queued in the pool.
    pub running: usize,
    /// Requests held (running, or finished and not yet acked).
    pub in_flight: usize,
    /// Requests completed successfully (result recorded and acked).
    pub completed: u64,
    /// Failed deliveries (errors and panics).
    pub failures: u64,
    /// Deliveries this node got that were not first deliveries.
    pub redelivered: u64,
    /// Requests this node moved to the dead-letter stream.
    pub dead_lettered: u64,
    /// Result publishes the broker dropped as duplicates.
    pub duplicate_results_dropped: u64,
    /// Redeliveries acked without running because their result was already
    /// recorded (the first run's ack was lost, or its node died after recording).
    pub already_recorded: u64,
    /// Requests recorded as cancelled.
    #[serde(default)]
    pub cancelled: u64,
    /// Deliveries put back until their not-before time.
    #[serde(default)]
    pub delayed: u64,
    /// Draining for a graceful stop.
    pub draining: bool,
    /// The limits per task name this node enforces.
    #[serde(default)]
    pub limits: std::collections::BTreeMap<String, crate::limits::Limit>,
    /// Counters per task name.
    #[serde(default)]
    pub per_task: std::collections::BTreeMap<String, TaskCounters>,
    /// Run time of the pool's tasks since the node started, median, ms.
    #[serde(default)]
    pub service_p50_ms: f64,
    /// Run time, 99th percentile, ms.
    #[serde(default)]
    pub service_p99_ms: f64,
    /// When this status was taken (Unix ns).
    pub at_unix_ns: u64,
}

/// A node: handlers by task name, and the settings of its pool.
pub struct Node {
    config: NodeConfig,
    handlers: HashMap<String, Handler>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.handlers.keys().collect();
        names.sort();
        f.debug_struct("Node")
            .field("config", &self.config)
            .field("handlers", &names)
            .finish()
    }
}

/// One finished task, on its way to be recorded and acked.
struct Done {
    key: u64,
    outcome: Outcome,
    started_ns: u64,
    finished_ns: u64,
    /// Record this outcome as it is, even an error: no retry (a cancelled
    /// request, or one that can never run).
    last: bool,
}

/// A request the node holds until it is acked or released.
struct Held {
    message: jetstream::Message,
    since: Instant,
    request: String,
    client: String,
    task: String,
    delivered: i64,
    /// It holds a lease of its task's concurrency limit.
    lease: AtomicBool,
}

/// The node's shared state between the puller, the workers, the recorder,
/// the heartbeat and the status publisher.
struct State {
    name: String,
    policy: String,
    settings: Settings,
    pool: Pool,
    slack: usize,
    max_task_time: Duration,
    js: jetstream::Context,
    results: jetstream::stream::Stream,
    held: Mutex<HashMap<u64, Arc<Held>>>,
    next_key: AtomicU64,
    running: AtomicUsize,
    finished: Notify,
    completed: AtomicU64,
    failures: AtomicU64,
    redelivered: AtomicU64,
    dead_lettered: AtomicU64,
    duplicates: AtomicU64,
    already_recorded: AtomicU64,
    cancelled: AtomicU64,
    delayed: AtomicU64,
    draining: AtomicBool,
    limiter: Arc<Limiter>,
    cancels: Arc<Cancellations>,
    /// Counters per task name.
    per_task: Mutex<std::collections::BTreeMap<String, TaskCounters>>,
}

/// A node's counters for one task name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCounters {
    /// Deliveries pulled.
    pub pulled: u64,
    /// Requests whose result was recorded and which were acked.
    pub acked: u64,
    /// Deliveries that were not first deliveries.
    pub redelivered: u64,
    /// Requests moved to the dead-letter stream.
    pub dead_lettered: u64,
    /// Requests recorded as cancelled.
    pub cancelled: u64,
    /// Deliveries put back because their not-before time was ahead.
    pub delayed: u64,
    /// Heartbeats withheld because the task ran past `max_task_time`.
    pub expired: u64,
}

impl State {
    /// Requests the pool can start now (step 1 of the protocol).
    fn free(&self) -> usize {
        let size = self.pool.target_size().max(self.pool.live_threads());
        (size + self.slack).saturating_sub(self.running.load(Relaxed))
    }

    /// Count something for `task`.
    fn count(&self, task: &str, f: impl FnOnce(&mut TaskCounters)) {
        if let Ok(mut m) = self.per_task.lock() {
            f(m.entry(task.to_string()).or_default());
        }
    }

    fn held_len(&self) -> usize {
        self.held.lock().map_or(0, |h| h.len())
    }

    fn status(&self) -> NodeStatus {
        let stats = self.pool.stats();
        let ms = |q: f64| {
            stats
                .service
                .quantile(q)
                .map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        NodeStatus {
            service_p50_ms: ms(0.5),
            service_p99_ms: ms(0.99),
            node: self.name.clone(),
            pid: std::process::id(),
            policy: self.policy.clone(),
            pool_size: self.pool.live_threads(),
            target_size: self.pool.target_size(),
            running: self.running.load(Relaxed),
            in_flight: self.held_len(),
            completed: self.completed.load(Relaxed),
            failures: self.failures.load(Relaxed),
            redelivered: self.redelivered.load(Relaxed),
            dead_lettered: self.dead_lettered.load(Relaxed),
            duplicate_results_dropped: self.duplicates.load(Relaxed),
            already_recorded: self.already_recorded.load(Relaxed),
            cancelled: self.cancelled.load(Relaxed),
            delayed: self.delayed.load(Relaxed),
            draining: self.draining.load(Relaxed),
            limits: self.limiter.all().into_iter().collect(),
            per_task: self.per_task.lock().map(|m| m.clone()).unwrap_or_default(),
            at_unix_ns: unix_ns(),
        }
    }
}

impl Node {
    /// A node with the built-in handlers (see [`crate::tasks`]).
    pub fn new(config: NodeConfig) -> Node {
        let mut node = Node {
            config,
            handlers: HashMap::new(),
        };
        for (name, h) in builtins() {
            node.handlers.insert(name.to_string(), h);
        }
        node
    }

    /// Register (or replace) the handler for task `name`.
    pub fn register<F>(&mut self, name: &str, handler: F) -> anyhow::Result<()>
    where
        F: Fn(&[u8]) -> Outcome + Send + Sync + 'static,
    {
        if !valid_task_name(name) {
            anyhow::bail!("task name `{name}` is not allowed: use 1 to 64 of A-Z a-z 0-9 - _");
        }
        self.handlers.insert(name.to_string(), Arc::new(handler));
        Ok(())
    }

    fn build_pool(&self) -> anyhow::Result<Pool> {
        let c = &self.config;
        let builder = Pool::builder().name(&c.name).queue(c.queue);
        let builder = match &c.policy {
            PolicySpec::Fixed(n) => builder.threads(*n),
            PolicySpec::ThreadPerRequest => {
                anyhow::bail!("policy `tpr` is not a pool policy: a node needs a pool")
            }
            spec => builder
                .min_threads(c.min_threads)
                .max_threads(c.max_threads)
                .policy_boxed(spec.build().expect("every spec but tpr builds")),
        };
        builder
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the node's pool: {e}"))
    }

    /// Run until `shutdown` completes, then stop gracefully. Connects with a
    /// retry loop (a broker that is down is waited for, not an error).
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> anyhow::Result<NodeStatus> {
        let c = self.config.clone();
        c.settings.validate().map_err(|e| anyhow::anyhow!(e))?;
        if c.slack > 10_000 {
            anyhow::bail!("slack {} is out of range: allowed 0..=10000", c.slack);
        }
        let pool = self.build_pool()?;
        let journal = match &c.journal {
            Some(path) => Some(Arc::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| anyhow::anyhow!("cannot open journal {}: {e}", path.display()))?,
            )),
            None => None,
        };
        let metrics_listener = match c.metrics_addr {
            Some(addr) => Some(crate::http::bind(addr, "--metrics-addr").await?),
            None => None,
        };
        let client = protocol::connect(&c.url, &c.name, None).await?;
        eprintln!("{}: connected to {}", c.name, c.url);
        let js = jetstream::new(client.clone());
        let mut consumers =
            protocol::retry(Duration::from_secs(60), || ensure_streams(&js, &c.settings)).await?;
        // The consumer's settings are the cluster's (the first participant
        // created it): heartbeats and the last-delivery check follow them.
        let settings = match consumers[1].info().await {
            Ok(info) => Settings {
                ack_wait: info.config.ack_wait,
                max_deliver: info.config.max_deliver.clamp(1, i64::from(u32::MAX)) as u32,
                ..c.settings
            },
            Err(e) => anyhow::bail!("cannot read consumer {CONSUMER}: {e}"),
        };
        if settings != c.settings {
            eprintln!(
                "{}: using the cluster's ack wait {:?} and max deliver {}",
                c.name, settings.ack_wait, settings.max_deliver
            );
        }
        let results = protocol::retry(Duration::from_secs(60), || js.get_stream(RESULTS))
            .await
            .map_err(|e| anyhow::anyhow!("cannot open stream {RESULTS}: {e}"))?;
        let bucket = |name: &'static str| {
            let js = js.clone();
            async move {
                protocol::retry(Duration::from_secs(60), || js.get_key_value(name))
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot open bucket {name}: {e}"))
            }
        };
        let limiter = Arc::new(Limiter::new(
            &c.name,
            bucket(LIMITS).await?,
            bucket(LEASES).await?,
            settings.ack_wait,
        ));
        let cancels = Arc::new(Cancellations::new(settings.duplicate_window));
        let state = Arc::new(State {
            name: c.name.clone(),
            policy: c.policy.to_string(),
            settings,
            pool,
            slack: c.slack,
            max_task_time: c.max_task_time,
            js: js.clone(),
            results,
            held: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            finished: Notify::new(),
            completed: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            redelivered: AtomicU64::new(0),
            dead_lettered: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            already_recorded: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
            draining: AtomicBool::new(false),
            limiter: limiter.clone(),
            cancels: cancels.clone(),
            per_task: Mutex::new(Default::default()),
        });
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Done>();

        // The recorder: publish each result, then ack (one task per result,
        // so a slow broker round trip does not serialise them).
        let recorder = {
            let state = state.clone();
            tokio::spawn(async move {
                while let Some(done) = done_rx.recv().await {
                    tokio::spawn(record(state.clone(), done));
                }
            })
        };
        if let Some(listener) = metrics_listener {
            eprintln!(
                "{}: serving http://{}/metrics",
                c.name,
                listener.local_addr()?
            );
            tokio::spawn(metrics::serve(state.clone(), listener));
        }
        let background = [
            tokio::spawn(heartbeat(state.clone())),
            tokio::spawn(publish_status(state.clone(), client.clone())),
            tokio::spawn(dead_letter_advisories(state.clone(), client.clone())),
            tokio::spawn(limiter.watch()),
            tokio::spawn(cancels.watch(bucket(CANCEL).await?)),
        ];

        // The puller, until shutdown.
        let handlers = Arc::new(self.handlers);
        let starter = run::Starter {
            state: state.clone(),
            handlers,
            journal,
            done_tx,
        };
        pull::pull(&starter, &client, &mut consumers, shutdown).await;

        // Graceful stop: let running tasks finish and record, then release.
        state.draining.store(true, Relaxed);
        eprintln!(
            "{}: stopping: {} requests held, waiting up to {:?}",
            c.name,
            state.held_len(),
            c.drain_timeout
        );
        let deadline = Instant::now() + c.drain_timeout;
        while state.held_len() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left: Vec<Arc<Held>> = state
            .held
            .lock()
            .map(|mut h| h.drain().map(|(_, v)| v).collect())
            .unwrap_or_default();
        for held in &left {
            let _ = held.message.ack_with(AckKind::Nak(None)).await;
        }
        if !left.is_empty() {
            eprintln!("{}: released {} unfinished requests", c.name, left.len());
        }
        let _ = client.flush().await;
        let status = state.status();
        for task in background {
            task.abort();
        }
        recorder.abort();
        if left.is_empty() {
            // Every worker is idle: join them.
            tokio::task::spawn_blocking(move || drop(state)).await.ok();
        } else {
            // Tasks still run on workers that cannot be interrupted; the
            // process exits without joining them (their requests were released).
            std::mem::forget(state);
        }
        eprintln!("{}: stopped", c.name);
        Ok(status)
    }
}

/// What a stopping node does with a request it cannot start: release it to
/// be delivered again after this delay. Not at once: a nak without delay is
/// redelivered at once to a waiting pull, which may be this node's own, and
/// could go round until the request used up its deliveries and was
/// dead-lettered without ever running (seen in the chaos test: a request
/// redelivered as the nodes stopped went through deliveries 2 to 5 in 2 ms).
const RELEASE_DELAY: Duration = Duration::from_secs(1);
