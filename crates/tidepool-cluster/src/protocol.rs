//! What travels through the broker: stream and subject names, headers, the
//! stream settings, and connecting with a retry loop.
//!
//! | stream | subjects | retention | holds |
//! |---|---|---|---|
//! | `TIDEPOOL_REQUESTS` | `tidepool.req.<task>` | work queue | requests until a node acks them |
//! | `TIDEPOOL_RESULTS` | `tidepool.res.<client>.<request>` | limits | one result per request (deduplicated by `Nats-Msg-Id`) |
//! | `TIDEPOOL_DEAD` | `tidepool.dead.<task>` | limits | requests that failed `max_deliver` times, with the error |
//!
//! A request's priority is the last token of its subject:
//! `tidepool.req.<task>` is `normal`, `tidepool.req.<task>.high` and
//! `tidepool.req.<task>.low` the others. Nodes share one durable pull
//! consumer per priority on the requests stream (`nodes-high`, `nodes`,
//! `nodes-low`): explicit acks, `ack_wait`, `max_deliver`. The stream
//! republishes each request's headers on `tidepool.bell.<task>[.<priority>]`
//! (core NATS), which wakes idle nodes. Nodes publish their status on core
//! NATS, `tidepool.status.<node>`, twice a second.
//!
//! | key-value bucket | key | value |
//! |---|---|---|
//! | `TIDEPOOL_LIMITS` | task name | JSON limit ([`crate::limits::Limit`]) |
//! | `TIDEPOOL_LEASES` | task name | JSON lease table of a limited task ([`crate::limits`]) |
//! | `TIDEPOOL_CANCEL` | request id | anything: the request is cancelled |

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};

/// The request stream.
pub const REQUESTS: &str = "TIDEPOOL_REQUESTS";
/// The result stream.
pub const RESULTS: &str = "TIDEPOOL_RESULTS";
/// The dead-letter stream.
pub const DEAD: &str = "TIDEPOOL_DEAD";
/// The nodes' shared durable consumer of `normal` requests.
pub const CONSUMER: &str = "nodes";
/// The limits bucket.
pub const LIMITS: &str = "TIDEPOOL_LIMITS";
/// The leases bucket (concurrency and rate state of limited tasks).
pub const LEASES: &str = "TIDEPOOL_LEASES";
/// The cancellation bucket.
pub const CANCEL: &str = "TIDEPOOL_CANCEL";
/// Doorbells: each request's headers, republished by the stream.
pub const BELL_PREFIX: &str = "tidepool.bell.";
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
/// Header: the request's priority, `high`, `normal` or `low` (requests; it
/// must agree with the subject, which is what nodes order by).
pub const H_PRIORITY: &str = "Tidepool-Priority";
/// Header: do not start before this instant (requests; Unix ns).
pub const H_NOT_BEFORE: &str = "Tidepool-Not-Before";
/// The error of a cancelled request's result.
pub const CANCELLED: &str = "cancelled";

/// A request's priority: among waiting requests, nodes start `High` first,
/// then `Normal`, then `Low`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Started before any other waiting request.
    High,
    /// The default.
    #[default]
    Normal,
    /// Started only when no high or normal request waits.
    Low,
}

impl Priority {
    /// All, highest first (the order nodes pull in).
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }

    /// The subject of a request for `task` with this priority.
    pub fn subject(self, task: &str) -> String {
        match self {
            Priority::Normal => format!("{REQ_PREFIX}{task}"),
            p => format!("{REQ_PREFIX}{task}.{}", p.as_str()),
        }
    }

    /// The nodes' consumer of this priority, and its filter subject.
    pub fn consumer(self) -> (&'static str, String) {
        match self {
            Priority::High => ("nodes-high", format!("{REQ_PREFIX}*.high")),
            Priority::Normal => (CONSUMER, format!("{REQ_PREFIX}*")),
            Priority::Low => ("nodes-low", format!("{REQ_PREFIX}*.low")),
        }
    }

    /// Task and priority of a request subject (`None`: not a request subject).
    pub fn of_subject(subject: &str) -> Option<(&str, Priority)> {
        let rest = subject.strip_prefix(REQ_PREFIX)?;
        Some(match rest.split_once('.') {
            None => (rest, Priority::Normal),
            Some((task, "high")) => (task, Priority::High),
            Some((task, "low")) => (task, Priority::Low),
            Some(_) => return None,
        })
    }
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "high" => Ok(Priority::High),
            "normal" => Ok(Priority::Normal),
            "low" => Ok(Priority::Low),
            other => Err(format!(
                "priority `{other}` is not one of high, normal, low"
            )),
        }
    }
}

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

/// The nodes' consumers, highest priority first.
pub type Consumers = [consumer::PullConsumer; 3];

/// Create the three streams, the nodes' consumers and the key-value buckets
/// if they are missing. Existing ones are used as they are (the first
/// participant's settings win).
pub async fn ensure_streams(
    js: &jetstream::Context,
    settings: &Settings,
) -> anyhow::Result<Consumers> {
    let requests = js
        .get_or_create_stream(stream::Config {
            name: REQUESTS.into(),
            subjects: vec![format!("{REQ_PREFIX}>")],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            duplicate_window: settings.duplicate_window,
            num_replicas: settings.replicas,
            republish: Some(stream::Republish {
                source: format!("{REQ_PREFIX}>"),
                destination: format!("{BELL_PREFIX}>"),
                headers_only: true,
            }),
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
    for (bucket, max_age) in [
        (LIMITS, Duration::ZERO),
        (LEASES, Duration::ZERO),
        (CANCEL, settings.duplicate_window),
    ] {
        // The bucket's stream as the key-value convention lays it out
        // (`create_key_value` first asks for the account's info, which this
        // client cannot read from a 2.9 server).
        js.get_or_create_stream(stream::Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            max_age,
            storage: stream::StorageType::File,
            num_replicas: settings.replicas,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: stream::DiscardPolicy::New,
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot create key-value bucket {bucket}: {e}"))?;
    }
    let mut consumers = Vec::with_capacity(3);
    for p in Priority::ALL {
        let (name, filter) = p.consumer();
        consumers.push(
            requests
                .get_or_create_consumer(
                    name,
                    consumer::pull::Config {
                        durable_name: Some(name.into()),
                        filter_subject: filter,
                        ack_policy: consumer::AckPolicy::Explicit,
                        ack_wait: settings.ack_wait,
                        max_deliver: settings.max_deliver as i64,
                        max_ack_pending: 100_000,
                        max_waiting: 4096,
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| anyhow::anyhow!("cannot create consumer {name}: {e}"))?,
        );
    }
    Ok(consumers
        .try_into()
        .unwrap_or_else(|_| unreachable!("one consumer per priority")))
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
    fn priorities_and_subjects() {
        for p in Priority::ALL {
            let subject = p.subject("sleep");
            assert_eq!(Priority::of_subject(&subject), Some(("sleep", p)));
            assert_eq!(p.as_str().parse::<Priority>(), Ok(p));
        }
        assert_eq!(Priority::of_subject("tidepool.req.a.b"), None);
        assert!("urgent"
            .parse::<Priority>()
            .unwrap_err()
            .contains("high, normal, low"));
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
