//! What an operator uses every day, end to end against a private nats-server
//! and real node processes: limits per task name, priorities, delayed and
//! cancelled requests, and all of it from a plain NATS client.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tidepool_cluster::chaos::read_journal;
use tidepool_cluster::limits::{self, Limit};
use tidepool_cluster::protocol::unix_ns;
use tidepool_cluster::tasks::sleep_payload;
use tidepool_cluster::{NatsServer, Priority, SubmitOptions, TaskResult};
use tidepool_test_support::wait_until;

const LONG: Duration = Duration::from_secs(120);

/// The most results whose [started, finished] stamps overlap at one instant.
fn most_overlapping(results: &[TaskResult]) -> usize {
    let mut edges: Vec<(u64, i32)> = results
        .iter()
        .flat_map(|r| [(r.started_ns, 1), (r.finished_ns, -1)])
        .collect();
    // At equal stamps a finish comes first: touching is not overlapping.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// Wait until every node reports `task`'s limit as `want`; how long it took.
async fn wait_for_limit(
    nats: &async_nats::Client,
    nodes: usize,
    task: &str,
    want: Option<Limit>,
) -> Duration {
    let t0 = Instant::now();
    loop {
        let all = tidepool_cluster::status::collect(nats, Duration::from_millis(600))
            .await
            .unwrap();
        if all.len() >= nodes && all.values().all(|s| s.limits.get(task).copied() == want) {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < LONG, "nodes never showed {want:?}: {all:?}");
    }
}

/// Wait until `name`'s journal has `n` starts.
fn wait_for_starts(dir: &std::path::Path, name: &str, n: usize) {
    assert!(
        wait_until(LONG, || read_journal(&journal(dir, name)).unwrap().len()
            >= n),
        "{name} never started {n}: {}",
        log(dir, name)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_limit_of_3_holds_across_two_nodes() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(10), 5);
    let client = client(&server, &s).await;
    let _a = start_node(dir.path(), &server.url(), "a", &["--policy", "fixed:4"]);
    let _b = start_node(dir.path(), &server.url(), "b", &["--policy", "fixed:4"]);
    tidepool_cluster::status::wait_for_nodes(client.nats(), 2, LONG)
        .await
        .unwrap();
    let limit = Limit {
        concurrency: Some(3),
        rate_per_s: None,
    };
    limits::set(client.jetstream(), "sleep", Some(limit))
        .await
        .unwrap();
    wait_for_limit(client.nats(), 2, "sleep", Some(limit)).await;
    let pending = client
        .submit_batch(
            "sleep",
            (0..15).map(|_| sleep_payload(Duration::from_millis(200))),
        )
        .await
        .unwrap();
    let results = client.wait_all(pending, LONG).await.unwrap();
    assert!(results.iter().all(|r| r.output.is_ok()), "{results:?}");
    let most = most_overlapping(&results);
    assert!(most <= 3, "{most} ran at once under a limit of 3");
    assert!(most >= 2, "the limit let only {most} run at once");
    let nodes: std::collections::BTreeSet<_> = results.iter().map(|r| &r.node).collect();
    assert_eq!(nodes.len(), 2, "both nodes ran some: {nodes:?}");
    // Cleared: shown by every node within about a second.
    limits::set(client.jetstream(), "sleep", None)
        .await
        .unwrap();
    wait_for_limit(client.nats(), 2, "sleep", None).await;
    assert!(limits::all(client.jetstream()).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_of_20_per_second_spreads_60_requests_over_3_seconds() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(10), 5);
    let client = client(&server, &s).await;
    let _a = start_node(dir.path(), &server.url(), "a", &[]);
    let _b = start_node(dir.path(), &server.url(), "b", &[]);
    tidepool_cluster::status::wait_for_nodes(client.nats(), 2, LONG)
        .await
        .unwrap();
    let limit = Limit {
        concurrency: None,
        rate_per_s: Some(limits::parse_rate("20/s").unwrap()),
    };
    limits::set(client.jetstream(), "echo", Some(limit))
        .await
        .unwrap();
    wait_for_limit(client.nats(), 2, "echo", Some(limit)).await;
    let pending = client
        .submit_batch("echo", (0..60).map(|i| format!("{i}").into_bytes()))
        .await
        .unwrap();
    let results = client.wait_all(pending, LONG).await.unwrap();
    let mut starts: Vec<u64> = results.iter().map(|r| r.started_ns).collect();
    starts.sort();
    let span = Duration::from_nanos(starts[59] - starts[0]);
    // 59 gaps of 50 ms: 2.95 s (a little clock jitter allowed).
    assert!(span >= Duration::from_millis(2800), "60 starts in {span:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_priority_requests_queued_after_low_ones_start_first() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(10), 5);
    let client = client(&server, &s).await;
    let _a = start_node(
        dir.path(),
        &server.url(),
        "a",
        &["--policy", "fixed:1", "--slack", "0"],
    );
    tidepool_cluster::status::wait_for_nodes(client.nats(), 1, LONG)
        .await
        .unwrap();
    // The one worker is busy while the others queue: lows first, then highs.
    let blocker = client
        .submit("sleep", sleep_payload(Duration::from_millis(800)))
        .await
        .unwrap();
    wait_for_starts(dir.path(), "a", 1);
    let with = |priority| SubmitOptions {
        priority,
        not_before_ns: None,
    };
    let mut lows = Vec::new();
    for _ in 0..4 {
        lows.push(
            client
                .submit_with("echo", &b"low"[..], with(Priority::Low))
                .await
                .unwrap(),
        );
    }
    let normal = client
        .submit_with("echo", &b"normal"[..], with(Priority::Normal))
        .await
        .unwrap();
    let mut highs = Vec::new();
    for _ in 0..4 {
        highs.push(
            client
                .submit_with("echo", &b"high"[..], with(Priority::High))
                .await
                .unwrap(),
        );
    }
    blocker.result().await.unwrap();
    let lows = client.wait_all(lows, LONG).await.unwrap();
    let highs = client.wait_all(highs, LONG).await.unwrap();
    let normal = normal.result().await.unwrap();
    let last_high = highs.iter().map(|r| r.started_ns).max().unwrap();
    let first_low = lows.iter().map(|r| r.started_ns).min().unwrap();
    assert!(
        last_high < normal.started_ns,
        "a normal one started before a high one"
    );
    assert!(
        normal.started_ns < first_low,
        "a low one started before the normal one"
    );
    // Among equals, first come first served.
    let lows_in_order = lows.windows(2).all(|w| w[0].started_ns < w[1].started_ns);
    assert!(lows_in_order, "{lows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_before_request_does_not_start_early() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(10), 5);
    let client = client(&server, &s).await;
    let _a = start_node(dir.path(), &server.url(), "a", &[]);
    tidepool_cluster::status::wait_for_nodes(client.nats(), 1, LONG)
        .await
        .unwrap();
    let mut pending = Vec::new();
    let mut at = Vec::new();
    // Held on the node (due within a second), and put back to the broker.
    for ahead in [Duration::from_millis(600), Duration::from_millis(2500)] {
        let t = unix_ns() + ahead.as_nanos() as u64;
        at.push(t);
        let options = SubmitOptions {
            priority: Priority::Normal,
            not_before_ns: Some(t),
        };
        pending.push(
            client
                .submit_with("echo", &b"x"[..], options)
                .await
                .unwrap(),
        );
    }
    let now = client.submit("echo", &b"now"[..]).await.unwrap();
    let now = now.result().await.unwrap();
    let results = client.wait_all(pending, LONG).await.unwrap();
    for (r, t) in results.iter().zip(&at) {
        assert!(r.output.is_ok(), "{r:?}");
        assert!(r.started_ns >= *t, "started {} ns early", t - r.started_ns);
    }
    assert!(now.started_ns < at[0], "an undelayed request waited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_request_never_runs_and_a_running_one_sees_it() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(10), 5);
    let client = client(&server, &s).await;
    let _a = start_node(
        dir.path(),
        &server.url(),
        "a",
        &["--policy", "fixed:1", "--slack", "0"],
    );
    tidepool_cluster::status::wait_for_nodes(client.nats(), 1, LONG)
        .await
        .unwrap();
    let long = client
        .submit("sleep", sleep_payload(Duration::from_secs(30)))
        .await
        .unwrap();
    wait_for_starts(dir.path(), "a", 1);
    let waiting = client.submit("echo", &b"never"[..]).await.unwrap();
    let by_plain_nats = client.submit("echo", &b"never"[..]).await.unwrap();
    client.cancel(&waiting.request).await.unwrap();
    // Any NATS client: a plain publish to the bucket's subject.
    client
        .nats()
        .publish(
            format!("$KV.TIDEPOOL_CANCEL.{}", by_plain_nats.request),
            "stop".into(),
        )
        .await
        .unwrap();
    client.nats().flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    client.cancel(&long.request).await.unwrap();
    let long = long.result().await.unwrap();
    assert_eq!(long.output, Err("cancelled".into()));
    assert!(t0.elapsed() < Duration::from_secs(10), "the handler ran on");
    let (ids, results) = (
        [waiting.request.clone(), by_plain_nats.request.clone()],
        client
            .wait_all(vec![waiting, by_plain_nats], LONG)
            .await
            .unwrap(),
    );
    for r in &results {
        assert_eq!(r.output, Err("cancelled".into()), "{r:?}");
        assert_eq!(r.started_ns, 0, "it ran: {r:?}");
    }
    let ran = read_journal(&journal(dir.path(), "a")).unwrap();
    assert!(ran.iter().all(|(r, _)| !ids.contains(r)), "{ran:?}");
    let a = tidepool_cluster::audit::audit(client.jetstream(), client.id())
        .await
        .unwrap();
    assert_eq!((a.distinct_results, a.duplicate_results), (3, 0));
    assert!(client
        .cancel("a b")
        .await
        .unwrap_err()
        .to_string()
        .contains("cannot be cancelled"));
}

/// Subjects, headers and buckets as `docs/cluster.md` documents them, used
/// with nothing of this crate but the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_feature_works_from_a_plain_nats_client() {
    use async_nats::jetstream::{self, message::PublishMessage};
    use async_nats::HeaderMap;

    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _a = start_node(dir.path(), &server.url(), "a", &["--policy", "fixed:2"]);
    let nats = async_nats::connect(server.url()).await.unwrap();
    tidepool_cluster::status::wait_for_nodes(&nats, 1, LONG)
        .await
        .unwrap();
    let js = jetstream::new(nats.clone());
    // A limit, as JSON in the limits bucket.
    js.publish("$KV.TIDEPOOL_LIMITS.echo", r#"{"concurrency":1}"#.into())
        .await
        .unwrap()
        .await
        .unwrap();
    let shown = Limit {
        concurrency: Some(1),
        rate_per_s: None,
    };
    wait_for_limit(&nats, 1, "echo", Some(shown)).await;
    let send = |id: &'static str, subject: &'static str, extra: Vec<(&'static str, String)>| {
        let js = js.clone();
        async move {
            let mut h = HeaderMap::new();
            h.insert("Tidepool-Request", id);
            h.insert("Tidepool-Client", "plain");
            for (k, v) in extra {
                h.insert(k, v.as_str());
            }
            let m = PublishMessage::build()
                .headers(h)
                .payload(id.into())
                .message_id(id);
            js.send_publish(subject, m).await.unwrap().await.unwrap();
        }
    };
    let later = unix_ns() + 1_500_000_000;
    send(
        "p-high",
        "tidepool.req.echo.high",
        vec![("Tidepool-Priority", "high".into())],
    )
    .await;
    send(
        "p-later",
        "tidepool.req.echo.low",
        vec![("Tidepool-Not-Before", later.to_string())],
    )
    .await;
    send(
        "p-wrong",
        "tidepool.req.echo",
        vec![("Tidepool-Priority", "high".into())],
    )
    .await;
    let results = js.get_stream("TIDEPOOL_RESULTS").await.unwrap();
    let mut got = std::collections::BTreeMap::new();
    let t0 = Instant::now();
    while got.len() < 3 && t0.elapsed() < LONG {
        for id in ["p-high", "p-later", "p-wrong"] {
            let subject = format!("tidepool.res.plain.{id}");
            if let Ok(m) = results.get_last_raw_message_by_subject(&subject).await {
                got.insert(id, m);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let header = |id: &str, name: &str| got[id].headers.get(name).map(|v| v.as_str().to_string());
    assert_eq!(&got["p-high"].payload[..], b"p-high");
    assert_eq!(header("p-high", "Tidepool-Error"), None);
    let started: u64 = header("p-later", "Tidepool-Started-Ns")
        .unwrap()
        .parse()
        .unwrap();
    assert!(started >= later, "started before its not-before time");
    let wrong = header("p-wrong", "Tidepool-Error").unwrap();
    assert!(
        wrong.contains("Tidepool-Priority") && wrong.contains("tidepool.req.<task>.high"),
        "{wrong}"
    );
}
