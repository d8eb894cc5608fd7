//! A node: a tidepool [`Pool`] that takes requests from the broker.
//!
//! ## The protocol
//!
//! 1. **Pull what can start now.** The puller asks the nodes' shared pull
//!    consumer for `free = max(target, live) + slack − running` requests,
//!    where `running` counts requests handed to the pool and not finished.
//!    The pool's sizing policy sets `target`, so the policy is the node's
//!    back-pressure: a slow or small node pulls little, and nothing waits in
//!    a node's queue that another node could run. `slack` (default 1) lets
//!    the pool see one queued request, which is what makes an on-demand
//!    policy (`auto`) grow.
//! 2. **Run, then record, then ack (late ack).** A worker runs the handler
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

use std::collections::HashMap;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, message::PublishMessage, AckKind};
use async_nats::HeaderMap;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tidepool::{policy::PolicySpec, Pool, QueueFlavor};
use tokio::sync::{mpsc, Notify};

use crate::protocol::{self, *};
use crate::suspect::Suspicion;
use crate::tasks::{builtins, Handler, Outcome};

/// How a node runs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Broker URL(s), comma-separated.
    pub url: String,
    /// The node's name (status subject, result header).
    pub name: String,
    /// The pool's sizing policy (`tpr` is not a pool and is refused).
    pub policy: PolicySpec,
    /// The pool's queue flavour.
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
    /// Draining for a graceful stop.
    pub draining: bool,
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
}

/// A request the node holds until it is acked or released.
struct Held {
    message: jetstream::Message,
    since: Instant,
    request: String,
    client: String,
    task: String,
    delivered: i64,
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
    draining: AtomicBool,
}

impl State {
    /// Requests the pool can start now (step 1 of the protocol).
    fn free(&self) -> usize {
        let size = self.pool.target_size().max(self.pool.size());
        (size + self.slack).saturating_sub(self.running.load(Relaxed))
    }

    fn held_len(&self) -> usize {
        self.held.lock().map_or(0, |h| h.len())
    }

    fn status(&self) -> NodeStatus {
        NodeStatus {
            node: self.name.clone(),
            pid: std::process::id(),
            policy: self.policy.clone(),
            pool_size: self.pool.size(),
            target_size: self.pool.target_size(),
            running: self.running.load(Relaxed),
            in_flight: self.held_len(),
            completed: self.completed.load(Relaxed),
            failures: self.failures.load(Relaxed),
            redelivered: self.redelivered.load(Relaxed),
            dead_lettered: self.dead_lettered.load(Relaxed),
            duplicate_results_dropped: self.duplicates.load(Relaxed),
            already_recorded: self.already_recorded.load(Relaxed),
            draining: self.draining.load(Relaxed),
            at_unix_ns: unix_ns(),
        }
    }
}

/// How long a node keeps retrying to record a result or an ack across a
/// broker outage before it gives up (the request is then redelivered).
const RECORD_PATIENCE: Duration = Duration::from_secs(600);

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
        let client = protocol::connect(&c.url, &c.name, None).await?;
        eprintln!("{}: connected to {}", c.name, c.url);
        let js = jetstream::new(client.clone());
        let mut consumer =
            protocol::retry(Duration::from_secs(60), || ensure_streams(&js, &c.settings)).await?;
        // The consumer's settings are the cluster's (the first participant
        // created it): heartbeats and the last-delivery check follow them.
        let settings = match consumer.info().await {
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
            draining: AtomicBool::new(false),
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
        let background = [
            tokio::spawn(heartbeat(state.clone())),
            tokio::spawn(publish_status(state.clone(), client.clone())),
            tokio::spawn(dead_letter_advisories(state.clone(), client.clone())),
        ];

        // The puller, until shutdown.
        let handlers = Arc::new(self.handlers);
        let connection = client.statistics();
        let mut suspicion = Suspicion::new(connection.connects.load(Relaxed));
        tokio::pin!(shutdown);
        let mut backoff = Duration::from_millis(50);
        'pull: loop {
            let free = state.free();
            if free == 0 {
                tokio::select! {
                    _ = &mut shutdown => break 'pull,
                    _ = state.finished.notified() => {}
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
                continue;
            }
            let batch = consumer
                .batch()
                .max_messages(free)
                .expires(PULL_EXPIRES)
                .messages();
            let mut batch = tokio::select! {
                _ = &mut shutdown => break 'pull,
                b = batch => match b {
                    Ok(b) => b,
                    Err(e) => {
                        eprintln!("{}: cannot pull requests: {e}; retrying in {backoff:?}", c.name);
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                },
            };
            loop {
                tokio::select! {
                    // A stop takes precedence over starting what arrives.
                    biased;
                    _ = &mut shutdown => {
                        state.draining.store(true, Relaxed);
                        // Whatever this pull still delivers is released at once.
                        release_rest(&c.name, &mut batch).await;
                        break 'pull;
                    }
                    m = batch.next() => match m {
                        None => break,
                        Some(Ok(message)) => {
                            backoff = Duration::from_millis(50);
                            let connects = connection.connects.load(Relaxed);
                            bound_suspicion(&state, &mut suspicion, connects).await;
                            if !already_handled(&state, &suspicion, connects, &message).await {
                                start(&state, &handlers, &journal, &done_tx, message);
                            }
                        }
                        Some(Err(e)) => {
                            if !is_benign_pull_end(&*e) {
                                eprintln!("{}: pull interrupted: {e}", c.name);
                                tokio::time::sleep(backoff).await;
                                backoff = (backoff * 2).min(Duration::from_secs(2));
                            }
                            break;
                        }
                    }
                }
            }
        }

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

/// A batch that ends by timeout or because the server has nothing is normal.
fn is_benign_pull_end(e: &dyn std::fmt::Display) -> bool {
    let text = e.to_string().to_lowercase();
    text.contains("timeout") || text.contains("timed out") || text.contains("no messages")
}

/// How long one pull request waits at the broker for requests.
const PULL_EXPIRES: Duration = Duration::from_millis(500);

/// What a stopping node does with a request its last pull still delivers:
/// release it to be delivered again after this delay. Not at once: a nak
/// without delay is redelivered at once to a waiting pull, and the one
/// waiting is this node's own (it lives until `PULL_EXPIRES`), which would
/// nak it again, and so on until the request used up its deliveries and was
/// dead-lettered without ever running (seen in the chaos test: a request
/// redelivered as the nodes stopped went through deliveries 2 to 5 in 2 ms).
/// After the delay this pull has expired, so another node gets it.
const RELEASE_DELAY: Duration = Duration::from_millis(2 * PULL_EXPIRES.as_millis() as u64);

/// Release everything a pull still delivers after shutdown began.
async fn release_rest(name: &str, batch: &mut async_nats::jetstream::consumer::pull::Batch) {
    let until = tokio::time::Instant::now() + PULL_EXPIRES + Duration::from_millis(100);
    let mut released = 0;
    while let Ok(Some(Ok(m))) = tokio::time::timeout_at(until, batch.next()).await {
        let _ = m.ack_with(AckKind::Nak(Some(RELEASE_DELAY))).await;
        released += 1;
    }
    if released > 0 {
        eprintln!("{name}: released {released} requests delivered as it stopped");
    }
}

fn header(m: &async_nats::Message, name: &str) -> Option<String> {
    m.headers
        .as_ref()?
        .get(name)
        .map(|v| v.as_str().to_string())
}

/// Is a result for `request` of `client` in the results stream? Errors other
/// than "none" (a broker restarting, a timeout) are retried for up to 30 s,
/// so that "cannot tell" does not become "no" and run a request again.
async fn result_recorded(results: &jetstream::stream::Stream, client: &str, request: &str) -> bool {
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
async fn bound_suspicion(state: &State, suspicion: &mut Suspicion, connects: u64) {
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
async fn already_handled(
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

/// Hand one delivered request to the pool.
fn start(
    state: &Arc<State>,
    handlers: &Arc<HashMap<String, Handler>>,
    journal: &Option<Arc<std::fs::File>>,
    done_tx: &mpsc::UnboundedSender<Done>,
    message: jetstream::Message,
) {
    let info = message.info().ok();
    let delivered = info.as_ref().map_or(1, |i| i.delivered);
    let seq = info.as_ref().map_or(0, |i| i.stream_sequence);
    let task = message
        .subject
        .as_str()
        .strip_prefix(REQ_PREFIX)
        .unwrap_or("")
        .to_string();
    let request = header(&message, H_REQUEST).unwrap_or_else(|| format!("seq{seq}"));
    let client = header(&message, H_CLIENT).unwrap_or_else(|| "_".into());
    let payload = message.payload.clone();
    let key = state.next_key.fetch_add(1, Relaxed);
    let held = Arc::new(Held {
        message,
        since: Instant::now(),
        request: request.clone(),
        client,
        task: task.clone(),
        delivered,
    });
    if let Ok(mut h) = state.held.lock() {
        h.insert(key, held);
    }
    state.running.fetch_add(1, Relaxed);
    let handler = handlers.get(&task).cloned();
    let node = state.name.clone();
    let journal = journal.clone();
    let tx = done_tx.clone();
    let st = state.clone();
    let job = move || {
        if let Some(file) = &journal {
            let line = format!("{request} {delivered} {}\n", unix_ns() / 1_000_000);
            let _ = (&**file).write_all(line.as_bytes());
        }
        let started_ns = unix_ns();
        let outcome = match handler {
            Some(h) => std::panic::catch_unwind(AssertUnwindSafe(|| h(&payload)))
                .unwrap_or_else(|panic| Err(format!("panicked: {}", panic_text(&panic)))),
            None => Err(format!("node {node} has no handler for task `{task}`")),
        };
        let finished_ns = unix_ns();
        st.running.fetch_sub(1, Relaxed);
        st.finished.notify_one();
        let _ = tx.send(Done {
            key,
            outcome,
            started_ns,
            finished_ns,
        });
    };
    if let Err(e) = state.pool.execute(job) {
        // Only at shutdown: release the request (see `RELEASE_DELAY`).
        eprintln!("{}: pool refused a request: {e}", state.name);
        state.running.fetch_sub(1, Relaxed);
        if let Some(held) = state.held.lock().ok().and_then(|mut h| h.remove(&key)) {
            tokio::spawn(async move {
                let _ = held
                    .message
                    .ack_with(AckKind::Nak(Some(RELEASE_DELAY)))
                    .await;
            });
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic".into()
    }
}

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
async fn record(state: Arc<State>, done: Done) {
    let Some(held) = state
        .held
        .lock()
        .ok()
        .and_then(|h| h.get(&done.key).cloned())
    else {
        return; // released at shutdown
    };
    let times = (done.started_ns, done.finished_ns);
    let result = match &done.outcome {
        Ok(_) => {
            state.completed.fetch_add(1, Relaxed);
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
        .map_err(|e| anyhow::anyhow!("result recorded but not acked: {e}"))
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

/// Step 3: progress acks for every held request, every `ack_wait / 3`.
async fn heartbeat(state: Arc<State>) {
    let every = state.settings.ack_wait / 3;
    loop {
        tokio::time::sleep(every).await;
        let held: Vec<Arc<Held>> = state
            .held
            .lock()
            .map(|h| {
                h.values()
                    .filter(|h| h.since.elapsed() < state.max_task_time)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for h in held {
            let _ = h.message.ack_with(AckKind::Progress).await;
        }
    }
}

/// Publish the node's status twice a second on core NATS.
async fn publish_status(state: Arc<State>, client: async_nats::Client) {
    let subject = format!("{STATUS_PREFIX}{}", state.name);
    loop {
        if let Ok(json) = serde_json::to_vec(&state.status()) {
            let _ = client.publish(subject.clone(), json.into()).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The broker's advisory when a request used up its deliveries without an
/// ack (every node that took it stalled or died): move it to the dead-letter
/// stream. One node in the queue group handles each advisory.
async fn dead_letter_advisories(state: Arc<State>, client: async_nats::Client) {
    #[derive(Deserialize)]
    struct Advisory {
        stream_seq: u64,
        deliveries: i64,
    }
    let subject = format!("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{REQUESTS}.{CONSUMER}");
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
        let task = raw
            .subject
            .as_str()
            .strip_prefix(REQ_PREFIX)
            .unwrap_or("_")
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
