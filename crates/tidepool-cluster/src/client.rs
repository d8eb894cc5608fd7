//! Submitting work: `submit(name, payload)` gives a future of the result.
//!
//! Each client has an id; its requests are `<client>-<n>` and their results
//! arrive on `tidepool.res.<client>.>`, read by an ordered consumer on the
//! results stream (which survives broker restarts by resuming after the last
//! result it saw). A request is published with `Nats-Msg-Id` = its id and
//! re-published until the broker acknowledges it, so a retry across an outage
//! never queues it twice.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, message::PublishMessage};
use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::oneshot;

use crate::protocol::{self, *};

/// The result of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskResult {
    /// The request id.
    pub request: String,
    /// The node that ran it (the delivery whose result was recorded).
    pub node: String,
    /// Which delivery produced it (1 = the first).
    pub delivered: u32,
    /// The handler's output, or its error (also for dead-lettered requests).
    pub output: Result<Bytes, String>,
    /// When the client published the request (Unix ns, the client's clock).
    pub submitted_ns: u64,
    /// When the broker confirmed it stored the request (Unix ns, client clock).
    pub accepted_ns: u64,
    /// When the task started on the node (Unix ns, the node's clock; 0 if
    /// it never ran, e.g. dead-lettered after timeouts).
    pub started_ns: u64,
    /// When it finished on the node (Unix ns, the node's clock).
    pub finished_ns: u64,
    /// When the client received the result (Unix ns, client clock).
    pub received_ns: u64,
}

/// How a request is to run: its priority and the earliest time it may start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubmitOptions {
    /// Among waiting requests, nodes start higher priorities first.
    pub priority: Priority,
    /// Not started before this instant (Unix ns).
    pub not_before_ns: Option<u64>,
}

/// A submitted request: `.await` it for its result.
#[derive(Debug)]
pub struct Pending {
    /// The request id.
    pub request: String,
    submitted_ns: u64,
    accepted_ns: u64,
    rx: oneshot::Receiver<TaskResult>,
}

impl Pending {
    /// Wait for the result (`Err` if the client was dropped first).
    pub async fn result(self) -> anyhow::Result<TaskResult> {
        let mut r = self
            .rx
            .await
            .map_err(|_| anyhow::anyhow!("client closed before result of {}", self.request))?;
        r.submitted_ns = self.submitted_ns;
        r.accepted_ns = self.accepted_ns;
        Ok(r)
    }
}

#[derive(Default)]
struct Waiting {
    senders: HashMap<String, oneshot::Sender<TaskResult>>,
    /// Results that arrived before their sender was registered (the publish
    /// ack raced with a very fast node).
    early: HashMap<String, TaskResult>,
    seen: HashSet<String>,
    received: u64,
    duplicates: u64,
}

/// A connection that submits requests and collects their results.
#[derive(Debug, Clone)]
pub struct Client {
    id: String,
    nats: async_nats::Client,
    js: jetstream::Context,
    next: Arc<AtomicU64>,
    waiting: Arc<Mutex<Waiting>>,
    reader: Arc<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiting")
            .field("pending", &self.senders.len())
            .field("received", &self.received)
            .finish()
    }
}

/// How long a submit retries while the broker is away before it fails.
const SUBMIT_PATIENCE: Duration = Duration::from_secs(120);

impl Client {
    /// Connect (retrying while the broker is down, up to `patience`), create
    /// the streams if missing, and start reading results.
    pub async fn connect(
        url: &str,
        settings: &Settings,
        patience: Duration,
    ) -> anyhow::Result<Client> {
        settings.validate().map_err(|e| anyhow::anyhow!(e))?;
        let id = format!(
            "c{:x}{:x}",
            std::process::id(),
            unix_ns() & 0xffff_ffff_ffff
        );
        let nats = protocol::connect(url, &format!("tidepool-client-{id}"), Some(patience)).await?;
        let js = jetstream::new(nats.clone());
        protocol::retry(patience, || ensure_streams(&js, settings)).await?;
        let waiting = Arc::new(Mutex::new(Waiting::default()));
        let reader = tokio::spawn(read_results(js.clone(), id.clone(), waiting.clone()));
        Ok(Client {
            id,
            nats,
            js,
            next: Arc::new(AtomicU64::new(0)),
            waiting,
            reader: Arc::new(reader),
        })
    }

    /// This client's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Results received so far, and results received twice (which the
    /// results stream's deduplication should make impossible).
    pub fn received(&self) -> (u64, u64) {
        self.waiting
            .lock()
            .map_or((0, 0), |w| (w.received, w.duplicates))
    }

    /// The core NATS connection (for node status reports).
    pub fn nats(&self) -> &async_nats::Client {
        &self.nats
    }

    /// The JetStream context (for audits of the streams).
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    fn register(&self, request: &str) -> oneshot::Receiver<TaskResult> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.waiting.lock() {
            match w.early.remove(request) {
                Some(r) => {
                    let _ = tx.send(r);
                }
                None => {
                    w.senders.insert(request.to_string(), tx);
                }
            }
        }
        rx
    }

    fn request(
        &self,
        task: &str,
        payload: Bytes,
        options: SubmitOptions,
    ) -> anyhow::Result<(String, String, PublishMessage)> {
        if !valid_task_name(task) {
            anyhow::bail!("task name `{task}` is not allowed: use 1 to 64 of A-Z a-z 0-9 - _");
        }
        let request = format!("{}-{}", self.id, self.next.fetch_add(1, Relaxed));
        let mut headers = HeaderMap::new();
        headers.insert(H_REQUEST, request.as_str());
        headers.insert(H_CLIENT, self.id.as_str());
        if options.priority != Priority::Normal {
            headers.insert(H_PRIORITY, options.priority.as_str());
        }
        if let Some(t) = options.not_before_ns {
            headers.insert(H_NOT_BEFORE, t.to_string().as_str());
        }
        let publish = PublishMessage::build()
            .headers(headers)
            .payload(payload)
            .message_id(&request);
        Ok((request, options.priority.subject(task), publish))
    }

    /// Cancel a request by its id (any client's; see [`crate::cancel`]):
    /// if it has not started, it never runs and its result is the error
    /// `cancelled`; a running handler can see it with
    /// [`cancelled`](crate::cancel::cancelled).
    pub async fn cancel(&self, request: &str) -> anyhow::Result<()> {
        crate::cancel::cancel(&self.js, request).await
    }

    /// Publish one request, retrying across a broker outage (up to
    /// `SUBMIT_PATIENCE`) until the broker stored it; the message id makes a
    /// copy that did arrive before a no-op.
    async fn publish_until_stored(
        &self,
        request: &str,
        subject: &str,
        publish: &PublishMessage,
    ) -> anyhow::Result<()> {
        protocol::retry(SUBMIT_PATIENCE, || async {
            self.js
                .send_publish(subject.to_string(), publish.clone())
                .await?
                .await?;
            anyhow::Ok(())
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot submit {request}: {e}"))
    }

    /// Submit one request; resolves once the broker stored it.
    pub async fn submit(&self, task: &str, payload: impl Into<Bytes>) -> anyhow::Result<Pending> {
        self.submit_with(task, payload, SubmitOptions::default())
            .await
    }

    /// Submit one request with a priority or a not-before time.
    pub async fn submit_with(
        &self,
        task: &str,
        payload: impl Into<Bytes>,
        options: SubmitOptions,
    ) -> anyhow::Result<Pending> {
        let (request, subject, publish) = self.request(task, payload.into(), options)?;
        let rx = self.register(&request);
        let submitted_ns = unix_ns();
        self.publish_until_stored(&request, &subject, &publish)
            .await?;
        Ok(Pending {
            request,
            submitted_ns,
            accepted_ns: unix_ns(),
            rx,
        })
    }

    /// Submit many requests, pipelined (up to 256 unacknowledged at once).
    pub async fn submit_batch<I, P>(&self, task: &str, payloads: I) -> anyhow::Result<Vec<Pending>>
    where
        I: IntoIterator<Item = P>,
        P: Into<Bytes>,
    {
        let payloads: Vec<Bytes> = payloads.into_iter().map(Into::into).collect();
        let mut out = Vec::with_capacity(payloads.len());
        for chunk in payloads.chunks(256) {
            let mut acks = Vec::with_capacity(chunk.len());
            for p in chunk {
                let (request, subject, publish) =
                    self.request(task, p.clone(), SubmitOptions::default())?;
                let rx = self.register(&request);
                let submitted_ns = unix_ns();
                let ack = self
                    .js
                    .send_publish(subject.clone(), publish.clone())
                    .await
                    .ok();
                acks.push((request, subject, publish, rx, submitted_ns, ack));
            }
            for (request, subject, publish, rx, submitted_ns, ack) in acks {
                let stored = match ack {
                    Some(f) => f.await.is_ok(),
                    None => false,
                };
                if !stored {
                    // Not stored in the pipelined pass: again, alone.
                    self.publish_until_stored(&request, &subject, &publish)
                        .await?;
                }
                out.push(Pending {
                    request,
                    submitted_ns,
                    accepted_ns: unix_ns(),
                    rx,
                });
            }
        }
        Ok(out)
    }

    /// Wait for every result (in submission order), up to `timeout` in all.
    pub async fn wait_all(
        &self,
        pending: Vec<Pending>,
        timeout: Duration,
    ) -> anyhow::Result<Vec<TaskResult>> {
        let n = pending.len();
        let all = futures_util::future::join_all(pending.into_iter().map(Pending::result));
        let results = tokio::time::timeout(timeout, all).await.map_err(|_| {
            let (got, _) = self.received();
            anyhow::anyhow!("not all {n} results arrived within {timeout:?} ({got} received)")
        })?;
        results.into_iter().collect()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if Arc::strong_count(&self.reader) == 1 {
            self.reader.abort();
        }
    }
}

/// Read this client's results into the waiting futures, for as long as the
/// client lives. The consumer is an ordered one, started again after the
/// last sequence seen whenever it fails or goes quiet while results are
/// awaited (a broker restart can leave it so).
async fn read_results(js: jetstream::Context, id: String, waiting: Arc<Mutex<Waiting>>) {
    let mut next_seq = 0u64; // 0: from the start
    let mut backoff = Duration::from_millis(100);
    loop {
        let messages = async {
            let stream = js.get_stream(RESULTS).await?;
            let deliver_policy = if next_seq == 0 {
                consumer::DeliverPolicy::All
            } else {
                consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: next_seq,
                }
            };
            let consumer = stream
                .create_consumer(consumer::pull::OrderedConfig {
                    filter_subject: format!("{RES_PREFIX}{id}.>"),
                    deliver_policy,
                    ..Default::default()
                })
                .await?;
            anyhow::Ok(consumer.messages().await?)
        }
        .await;
        let mut messages = match messages {
            Ok(m) => m,
            Err(e) => {
                eprintln!("client {id}: cannot read results ({e}); retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        loop {
            match tokio::time::timeout(QUIET, messages.next()).await {
                Ok(Some(Ok(m))) => {
                    backoff = Duration::from_millis(100);
                    if let Ok(info) = m.info() {
                        next_seq = info.stream_sequence + 1;
                    }
                    deliver(&waiting, parse_result(&m));
                }
                Ok(Some(Err(e))) => {
                    eprintln!("client {id}: result stream: {e}; reopening");
                    break;
                }
                Ok(None) => break,
                Err(_) => {
                    let awaited = waiting.lock().map_or(0, |w| w.senders.len());
                    if awaited > 0 {
                        break; // quiet while results are awaited: reopen
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How long the result reader may hear nothing while results are awaited
/// before it reopens its consumer.
const QUIET: Duration = Duration::from_secs(3);

fn deliver(waiting: &Mutex<Waiting>, r: TaskResult) {
    let Ok(mut w) = waiting.lock() else { return };
    if !w.seen.insert(r.request.clone()) {
        w.duplicates += 1;
        return;
    }
    w.received += 1;
    match w.senders.remove(&r.request) {
        Some(tx) => {
            let _ = tx.send(r);
        }
        None => {
            w.early.insert(r.request.clone(), r);
        }
    }
}

fn parse_result(m: &jetstream::Message) -> TaskResult {
    let get = |n: &str| {
        m.headers
            .as_ref()
            .and_then(|h| h.get(n))
            .map(|v| v.as_str().to_string())
    };
    let num = |n: &str| get(n).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    TaskResult {
        request: get(H_REQUEST).unwrap_or_default(),
        node: get(H_NODE).unwrap_or_default(),
        delivered: num(H_DELIVERED) as u32,
        output: match get(H_ERROR) {
            Some(e) => Err(e),
            None => Ok(m.payload.clone()),
        },
        submitted_ns: 0,
        accepted_ns: 0,
        started_ns: num(H_STARTED),
        finished_ns: num(H_FINISHED),
        received_ns: unix_ns(),
    }
}
