//! What travels through the broker: stream and subject names, headers, the
//! stream settings, and connecting with a retry loop.
//!
//! | stream | subjects | retention | holds |
//! |---|---|---|---|
//! | `TIDEPOOL_REQUESTS` | `tidepool.req.<task>` | work queue | requests until a node acks them |
//! | `TIDEPOOL_RESULTS` | `tidepool.res.<client>.<request>` | limits | one result per request (deduplicated by `Nats-Msg-Id`) |
//! | `TIDEPOOL_DEAD` | `tidepool.dead.<task>` | limits | requests that failed `max_deliver` times, with the error |
//!
//! Nodes share one durable pull consumer, `nodes`, on the requests stream:
//! explicit acks, `ack_wait`, `max_deliver`. Nodes publish their status on
//! core NATS, `tidepool.status.<node>`, twice a second.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};

/// The request stream.
pub const REQUESTS: &str = "TIDEPOOL_REQUESTS";
/// The result stream.
pub const RESULTS: &str = "TIDEPOOL_RESULTS";
/// The dead-letter stream.
pub const DEAD: &str = "TIDEPOOL_DEAD";
/// The nodes' shared durable consumer.
pub const CONSUMER: &str = "nodes";
/// Requests: `tidepool.req.<task>`.
pub const REQ_PREFIX: &str = "tidepool.req.";
/// Results: `tidepool.res.<client>.<request>`.
pub const RES_PREFIX: &str = "tidepool.res.";
/// Dead letters: `tidepool.dead.<task>`.
pub const DEAD_PREFIX: &str = "tidepool.dead.";
/// Node status: `tidepool.status.<node>` (core NATS, not stored).
pub const STATUS_PREFIX: &str = "tidepool.status.";

/// Header: the request id (on requests, results and dead letters).
pub const H_REQUEST: &str = "Tidepool-Request";
/// Header: the submitting client's id (results go to `tidepool.res.<client>.>`).
pub const H_CLIENT: &str = "Tidepool-Client";
/// Header: the node that produced a result.
pub const H_NODE: &str = "Tidepool-Node";
/// Header: the delivery attempt that produced a result (1 = first).
pub const H_DELIVERED: &str = "Tidepool-Delivered";
/// Header: the error of a failed task (results and dead letters).
pub const H_ERROR: &str = "Tidepool-Error";
/// Header: when the task started on the node (Unix ns, the node's clock).
pub const H_STARTED: &str = "Tidepool-Started-Ns";
/// Header: when it finished (Unix ns, the node's clock).
pub const H_FINISHED: &str = "Tidepool-Finished-Ns";
/// Header: the task name (dead letters).
pub const H_TASK: &str = "Tidepool-Task";

/// The knobs every participant must agree on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// How long a delivered request may go without an ack or a progress
    /// heartbeat before the broker gives it to another node.
    pub ack_wait: Duration,
    /// Deliveries of one request before it is dead-lettered.
    pub max_deliver: u32,
    /// How long the broker remembers message ids for deduplication; must be
    /// longer than any run (a result recorded later than this after a first
    /// one of the same request would be stored twice).
    pub duplicate_window: Duration,
    /// Copies of each stream in a NATS cluster (1 on a single server; 3 on a
    /// three-server cluster survives the loss of any one server).
    pub replicas: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            ack_wait: Duration::from_secs(30),
            max_deliver: 5,
            duplicate_window: Duration::from_secs(2 * 3600),
            replicas: 1,
        }
    }
}

impl Settings {
    /// Check the ranges: `ack_wait` 1 s..1 h, `max_deliver` 1..1000,
    /// `duplicate_window` at least `ack_wait × max_deliver`.
    pub fn validate(&self) -> Result<(), String> {
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&self.ack_wait) {
            return Err(format!(
                "ack wait {:?} is out of range: allowed 1s..=3600s",
                self.ack_wait
            ));
        }
        if !(1..=1000).contains(&self.max_deliver) {
            return Err(format!(
                "max deliver {} is out of range: allowed 1..=1000",
                self.max_deliver
            ));
        }
        if !(1..=5).contains(&self.replicas) {
            return Err(format!(
                "replicas {} is out of range: allowed 1..=5 (NATS's limit)",
                self.replicas
            ));
        }
        if self.duplicate_window < self.ack_wait * self.max_deliver {
            return Err(format!(
                "duplicate window {:?} is shorter than ack wait × max deliver ({:?})",
                self.duplicate_window,
                self.ack_wait * self.max_deliver
            ));
        }
        Ok(())
    }
}

/// Is `name` usable as a task name (one subject token)?
pub fn valid_task_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Create the three streams and the nodes' consumer if they are missing.
/// Existing ones are used as they are (the first participant's settings win).
pub async fn ensure_streams(
    js: &jetstream::Context,
    settings: &Settings,
) -> anyhow::Result<consumer::PullConsumer> {
    let requests = js
        .get_or_create_stream(stream::Config {
            name: REQUESTS.into(),
            subjects: vec![format!("{REQ_PREFIX}>")],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            duplicate_window: settings.duplicate_window,
            num_replicas: settings.replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot create stream {REQUESTS}: {e}"))?;
    for (name, prefix) in [(RESULTS, RES_PREFIX), (DEAD, DEAD_PREFIX)] {
        js.get_or_create_stream(stream::Config {
            name: name.into(),
            subjects: vec![format!("{prefix}>")],
            retention: stream::RetentionPolicy::Limits,
            storage: stream::StorageType::File,
            duplicate_window: settings.duplicate_window,
            num_replicas: settings.replicas,
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot create stream {name}: {e}"))?;
    }
    requests
        .get_or_create_consumer(
            CONSUMER,
            consumer::pull::Config {
                durable_name: Some(CONSUMER.into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: settings.ack_wait,
                max_deliver: settings.max_deliver as i64,
                max_ack_pending: 100_000,
                max_waiting: 4096,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("cannot create consumer {CONSUMER}: {e}"))
}

/// Check a broker URL before connecting: `nats://HOST:PORT` (or `HOST:PORT`,
/// `tls://`, `ws://`), comma-separated for a cluster.
pub fn check_url(url: &str) -> Result<(), String> {
    if url.trim().is_empty() {
        return Err("the broker URL is empty: give nats://HOST:PORT".into());
    }
    for part in url.split(',') {
        let part = part.trim();
        let rest = match part.split_once("://") {
            Some((scheme, rest)) => {
                if !matches!(scheme, "nats" | "tls" | "ws" | "wss") {
                    return Err(format!(
                        "broker URL `{part}`: scheme `{scheme}` is not one of nats, tls, ws, wss"
                    ));
                }
                rest
            }
            None => part,
        };
        let hostport = rest.rsplit('@').next().unwrap_or(rest);
        let port = hostport.rsplit_once(':').map(|(_, p)| p);
        if let Some(p) = port {
            if p.parse::<u16>().map_or(true, |p| p == 0) {
                return Err(format!(
                    "broker URL `{part}`: port `{p}` is not a number in 1..=65535"
                ));
            }
        }
        let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
        if host.is_empty() {
            return Err(format!(
                "broker URL `{part}` has no host: give nats://HOST:PORT"
            ));
        }
    }
    Ok(())
}

/// Connect to the broker, retrying with exponential backoff (100 ms doubling
/// to 5 s) while it cannot be reached, saying why on stderr each time. A
/// malformed URL is an error at once. `give_up_after`: `None` retries forever.
pub async fn connect(
    url: &str,
    who: &str,
    give_up_after: Option<Duration>,
) -> anyhow::Result<async_nats::Client> {
    check_url(url).map_err(|e| anyhow::anyhow!(e))?;
    let started = std::time::Instant::now();
    let mut backoff = Duration::from_millis(100);
    loop {
        let options = async_nats::ConnectOptions::new()
            .name(who)
            .connection_timeout(Duration::from_secs(5))
            // After the first connection the client reconnects by itself,
            // forever, with its own backoff.
            .max_reconnects(None)
            // Come back soon after a broker restart (the default backs off to 4 s).
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((attempts as u64 * 100).min(1000))
            });
        match options.connect(url).await {
            Ok(client) => return Ok(client),
            Err(e) => {
                if give_up_after.is_some_and(|limit| started.elapsed() >= limit) {
                    anyhow::bail!(
                        "cannot reach the broker at {url}: {e} (gave up after {:.0?})",
                        started.elapsed()
                    );
                }
                eprintln!("{who}: cannot reach the broker at {url}: {e}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Run `op` until it succeeds, with backoff (50 ms doubling to 2 s): for
/// publishes and acks across a broker restart. Gives up after `limit`.
pub async fn retry<T, E, F, Fut>(limit: Duration, mut op: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let started = std::time::Instant::now();
    let mut backoff = Duration::from_millis(50);
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if started.elapsed() >= limit => return Err(e),
            Err(_) => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// Nanoseconds since the Unix epoch (the node's and client's wall clock).
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert!(check_url("nats://127.0.0.1:4222").is_ok());
        assert!(check_url("127.0.0.1:4222").is_ok());
        assert!(check_url("nats://a:1,nats://b:2").is_ok());
        assert!(check_url("nats://user:pw@host:4222").is_ok());
        assert!(check_url("").unwrap_err().contains("empty"));
        assert!(check_url("http://x:1").unwrap_err().contains("scheme"));
        assert!(check_url("nats://x:99999")
            .unwrap_err()
            .contains("1..=65535"));
        assert!(check_url("nats://x:abc").unwrap_err().contains("port"));
        assert!(check_url("nats://:4222").unwrap_err().contains("no host"));
    }

    #[test]
    fn settings_ranges() {
        assert!(Settings::default().validate().is_ok());
        let bad = Settings {
            ack_wait: Duration::from_millis(10),
            ..Settings::default()
        };
        assert!(bad.validate().unwrap_err().contains("1s..=3600s"));
        let bad = Settings {
            max_deliver: 0,
            ..Settings::default()
        };
        assert!(bad.validate().unwrap_err().contains("1..=1000"));
        let bad = Settings {
            duplicate_window: Duration::from_secs(1),
            ..Settings::default()
        };
        assert!(bad.validate().unwrap_err().contains("duplicate window"));
        let bad = Settings {
            replicas: 7,
            ..Settings::default()
        };
        assert!(bad.validate().unwrap_err().contains("1..=5"));
    }

    #[test]
    fn task_names() {
        assert!(valid_task_name("sleep"));
        assert!(valid_task_name("trace-replay_2"));
        assert!(!valid_task_name(""));
        assert!(!valid_task_name("a.b"));
        assert!(!valid_task_name("a b"));
        assert!(!valid_task_name("*"));
    }
}
