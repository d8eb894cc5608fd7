//! End-to-end tests against a private nats-server and real node processes.

mod common;

use std::time::Duration;

use common::*;
use tidepool_cluster::audit::audit;
use tidepool_cluster::chaos::read_journal;
use tidepool_cluster::tasks::sleep_payload;
use tidepool_cluster::NatsServer;
use tidepool_test_support::wait_until;

const LONG: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_run_on_nodes_and_results_come_back() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(10), 3);
    let client = client(&server, &s).await;
    let _a = start_node(dir.path(), &server.url(), "a", &[]);
    let _b = start_node(
        dir.path(),
        &server.url(),
        "b",
        &["--policy", "frequency", "--queue", "hybrid"],
    );
    let echo = client.submit("echo", &b"hello"[..]).await.unwrap();
    let r = tokio::time::timeout(LONG, echo.result())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.output.as_deref(), Ok(&b"hello"[..]));
    assert!(r.started_ns > 0 && r.finished_ns >= r.started_ns);
    let pending = client
        .submit_batch(
            "sleep",
            (0..200).map(|_| sleep_payload(Duration::from_millis(5))),
        )
        .await
        .unwrap();
    let results = client.wait_all(pending, LONG).await.unwrap();
    assert_eq!(results.len(), 200);
    assert!(results.iter().all(|r| r.output.is_ok()));
    let a = audit_once_acked(&client).await;
    assert_eq!(a.distinct_results, 201);
    assert_eq!(a.duplicate_results, 0);
    assert_eq!(a.requests_queued, 0, "every request acked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_task_is_dead_lettered_and_does_not_block_the_others() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(10), 3);
    let client = client(&server, &s).await;
    let _a = start_node(dir.path(), &server.url(), "a", &["--max-threads", "4"]);
    let poison = client.submit("poison", &b"x"[..]).await.unwrap();
    let good = client
        .submit_batch(
            "sleep",
            (0..50).map(|_| sleep_payload(Duration::from_millis(2))),
        )
        .await
        .unwrap();
    let results = client.wait_all(good, LONG).await.unwrap();
    assert!(results.iter().all(|r| r.output.is_ok()));
    let r = tokio::time::timeout(LONG, poison.result())
        .await
        .unwrap()
        .unwrap();
    let err = r.output.unwrap_err();
    assert!(err.contains("dead-lettered after 3 deliveries"), "{err}");
    assert!(err.contains("poison task: always panics"), "{err}");
    assert_eq!(r.delivered, 3);
    let a = audit_once_acked(&client).await;
    assert_eq!(a.dead_lettered, 1);
    assert_eq!(a.distinct_results, 51);
    assert_eq!(a.requests_queued, 0);
    // The dead letter carries the payload and the error.
    let dead = client
        .jetstream()
        .get_stream("TIDEPOOL_DEAD")
        .await
        .unwrap();
    let m = dead
        .get_last_raw_message_by_subject("tidepool.dead.poison")
        .await
        .unwrap();
    assert_eq!(&m.payload[..], b"x");
    let e = m
        .headers
        .get("Tidepool-Error")
        .unwrap()
        .as_str()
        .to_string();
    assert!(e.contains("panicked"), "{e}");
    // An unknown task name is a failure too, dead-lettered the same way.
    let unknown = client.submit("no-such-task", &b""[..]).await.unwrap();
    let r = tokio::time::timeout(LONG, unknown.result())
        .await
        .unwrap()
        .unwrap();
    assert!(r
        .output
        .unwrap_err()
        .contains("no handler for task `no-such-task`"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_node_loses_its_requests_to_another_after_the_ack_wait() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(2), 5);
    let client = client(&server, &s).await;
    let stalled = start_node(
        dir.path(),
        &server.url(),
        "stalled",
        &["--policy", "fixed:4", "--slack", "0"],
    );
    let pending = client
        .submit_batch(
            "sleep",
            (0..4).map(|_| sleep_payload(Duration::from_millis(1500))),
        )
        .await
        .unwrap();
    // Once it started all four, freeze it (SIGSTOP): no result, no heartbeat.
    let j = journal(dir.path(), "stalled");
    assert!(wait_until(LONG, || std::fs::read_to_string(&j)
        .map_or(0, |t| t.lines().count())
        == 4));
    stalled.signal(libc::SIGSTOP);
    let _healthy = start_node(dir.path(), &server.url(), "healthy", &[]);
    let results = client.wait_all(pending, LONG).await.unwrap();
    assert!(
        results
            .iter()
            .all(|r| r.node == "healthy" && r.delivered >= 2),
        "{results:?}"
    );
    stalled.signal(libc::SIGCONT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_tasks_are_kept_alive_by_heartbeats_not_redelivered() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Tasks run 3.5 s, the ack wait is 1 s: only progress acks keep them.
    let s = settings(Duration::from_secs(1), 5);
    let client = client(&server, &s).await;
    let _a = start_node(dir.path(), &server.url(), "a", &[]);
    let _b = start_node(dir.path(), &server.url(), "b", &[]);
    let pending = client
        .submit_batch(
            "sleep",
            (0..3).map(|_| sleep_payload(Duration::from_millis(3500))),
        )
        .await
        .unwrap();
    let results = client.wait_all(pending, LONG).await.unwrap();
    assert!(results.iter().all(|r| r.delivered == 1), "{results:?}");
    let runs: usize = ["a", "b"]
        .iter()
        .map(|n| read_journal(&journal(dir.path(), n)).unwrap().len())
        .sum();
    assert_eq!(runs, 3, "a long task ran twice");
}

#[test]
fn bad_broker_urls_are_usage_errors_not_panics() {
    for (url, why) in [
        ("http://127.0.0.1:4222", "scheme"),
        ("nats://127.0.0.1:99999", "1..=65535"),
        ("nats://:4222", "no host"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidepool-node"))
            .args(["--nats", url])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert!(err.contains(why), "{url}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_node_waits_for_a_broker_that_is_down_and_connects_when_it_comes_up() {
    let dir = tempfile::tempdir().unwrap();
    let port = tidepool_cluster::server::free_port().unwrap();
    let url = format!("nats://127.0.0.1:{port}");
    let mut node = start_node(dir.path(), &url, "waiting", &[]);
    assert!(wait_until(LONG, || log(dir.path(), "waiting")
        .matches("retrying in")
        .count()
        >= 3));
    let text = log(dir.path(), "waiting");
    assert!(
        text.contains(&format!("cannot reach the broker at {url}")),
        "{text}"
    );
    assert!(
        node.wait_timeout(Duration::ZERO).is_none(),
        "the node gave up: {text}"
    );
    let server_dir = dir.path().join("broker");
    let _server = NatsServer::start_in(&server_dir, port).unwrap();
    assert!(wait_until(LONG, || log(dir.path(), "waiting").contains("connected to")));
    assert!(!log(dir.path(), "waiting").contains("panicked"));
}

/// SIGTERM with tasks that outlast `--drain-timeout`: the node releases them
/// (another node runs them at once, not after the ack wait) and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_releases_what_outlasts_the_drain_timeout() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A long ack wait: only the release can make the others run them soon.
    let s = settings(Duration::from_secs(600), 5);
    let client = client(&server, &s).await;
    let mut a = start_node(
        dir.path(),
        &server.url(),
        "a",
        &[
            "--policy",
            "fixed:2",
            "--slack",
            "0",
            "--drain-timeout",
            "300ms",
        ],
    );
    let pending = client
        .submit_batch(
            "sleep",
            (0..2).map(|_| sleep_payload(Duration::from_secs(4))),
        )
        .await
        .unwrap();
    let j = journal(dir.path(), "a");
    assert!(wait_until(LONG, || read_journal(&j).unwrap().len() == 2));
    a.signal(libc::SIGTERM);
    let status = a.wait_timeout(LONG).expect("a exits after SIGTERM");
    assert!(status.success(), "{status:?}: {}", log(dir.path(), "a"));
    assert!(
        log(dir.path(), "a").contains("released 2 unfinished requests"),
        "{}",
        log(dir.path(), "a")
    );
    let _b = start_node(dir.path(), &server.url(), "b", &[]);
    // Well within the 600 s ack wait: they were released, not timed out.
    let results = client.wait_all(pending, LONG).await.unwrap();
    assert!(
        results.iter().all(|r| r.node == "b" && r.delivered == 2),
        "{results:?}"
    );
}

/// A request that reaches a stopping node's last pull is released so that
/// another node runs it; it does not bounce back into that same pull until
/// it used up its deliveries (it once did: dead-lettered without running).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_delivered_to_a_stopping_node_go_to_another_not_to_the_dead_letters() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(30), 5);
    let client = client(&server, &s).await;
    // A large slack keeps the idle node's pull open for many requests.
    let mut a = start_node(dir.path(), &server.url(), "a", &["--slack", "50"]);
    tidepool_cluster::status::wait_for_nodes(client.nats(), 1, LONG)
        .await
        .unwrap();
    // Stop it, and submit while its last pull is still open (it releases
    // what arrives for 600 ms).
    a.signal(libc::SIGTERM);
    let pending = client
        .submit_batch("echo", (0..5).map(|i| format!("r{i}").into_bytes()))
        .await
        .unwrap();
    let status = a.wait_timeout(LONG).expect("a exits after SIGTERM");
    assert!(status.success(), "{}", log(dir.path(), "a"));
    let released = log(dir.path(), "a").contains("released");
    eprintln!("a released requests as it stopped: {released}");
    let _b = start_node(dir.path(), &server.url(), "b", &[]);
    let results = client.wait_all(pending, LONG).await.unwrap();
    // (a may have started some before it saw the signal: it finishes those.)
    for r in &results {
        assert!(r.output.is_ok(), "{r:?}: {}", log(dir.path(), "a"));
    }
    let audit = audit(client.jetstream(), client.id()).await.unwrap();
    assert_eq!(audit.dead_lettered, 0, "{}", log(dir.path(), "a"));
    let ran = read_journal(&journal(dir.path(), "a")).unwrap().len()
        + read_journal(&journal(dir.path(), "b")).unwrap().len();
    assert_eq!(ran, 5, "each ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_running_tasks_finish_and_record_then_exits() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(30), 5);
    let client = client(&server, &s).await;
    let mut node = start_node(
        dir.path(),
        &server.url(),
        "a",
        &["--policy", "fixed:3", "--slack", "0"],
    );
    let pending = client
        .submit_batch(
            "sleep",
            (0..3).map(|_| sleep_payload(Duration::from_millis(1500))),
        )
        .await
        .unwrap();
    let j = journal(dir.path(), "a");
    assert!(wait_until(LONG, || read_journal(&j).unwrap().len() == 3));
    node.signal(libc::SIGTERM);
    let status = node
        .wait_timeout(LONG)
        .expect("the node exits after SIGTERM");
    assert!(status.success(), "{status:?}: {}", log(dir.path(), "a"));
    // Their results were recorded before it exited; nothing ran twice, and
    // a request submitted after the stop waits for another node.
    let results = client
        .wait_all(pending, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(results.iter().all(|r| r.node == "a" && r.delivered == 1));
    let late = client.submit("echo", &b"late"[..]).await.unwrap();
    let _b = start_node(dir.path(), &server.url(), "b", &[]);
    let r = tokio::time::timeout(LONG, late.result())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.node, "b");
    assert_eq!(read_journal(&j).unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_pulls_only_what_its_pool_can_start() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(30), 5);
    let client = client(&server, &s).await;
    let _a = start_node(
        dir.path(),
        &server.url(),
        "a",
        &["--policy", "fixed:2", "--slack", "1"],
    );
    tidepool_cluster::status::wait_for_nodes(client.nats(), 1, LONG)
        .await
        .unwrap();
    let reports = tidepool_cluster::status::Recorder::start(client.nats())
        .await
        .unwrap();
    let pending = client
        .submit_batch(
            "sleep",
            (0..12).map(|_| sleep_payload(Duration::from_millis(250))),
        )
        .await
        .unwrap();
    let stream = client
        .jetstream()
        .get_stream("TIDEPOOL_REQUESTS")
        .await
        .unwrap();
    let mut consumer: async_nats::jetstream::consumer::PullConsumer =
        stream.get_consumer("nodes").await.unwrap();
    // Broker side: requests delivered and not yet acked. Besides the pool's
    // 2 + 1 slack this counts finished requests whose result is being
    // recorded, but it must stay far from the whole backlog of 12.
    let mut most_unacked = 0;
    let mut polls = 0;
    while client.received().0 < 12 && polls < 2000 {
        let info = consumer.info().await.unwrap();
        most_unacked = most_unacked.max(info.num_ack_pending);
        polls += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.wait_all(pending, LONG).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let reports = reports.stop();
    // Node side: requests handed to the pool and not finished.
    let most_running = reports.iter().map(|r| r.running).max().unwrap_or(0);
    assert!(most_unacked >= 1, "never saw a request in flight");
    assert!(
        most_unacked <= 6,
        "a fixed:2 node took {most_unacked} of 12 requests at once"
    );
    assert!(
        most_running <= 3,
        "a fixed:2 node with slack 1 ran or queued {most_running}"
    );
    assert!(reports.iter().any(|r| r.running >= 2), "{reports:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gives_up_on_a_broker_that_stays_down_with_a_clear_error() {
    let port = tidepool_cluster::server::free_port().unwrap();
    let url = format!("nats://127.0.0.1:{port}");
    let s = settings(Duration::from_secs(5), 3);
    let err = tidepool_cluster::Client::connect(&url, &s, Duration::from_secs(1))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("cannot reach the broker at {url}")),
        "{err}"
    );
    assert!(err.contains("gave up after"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_task_gives_its_request_back_after_max_task_time() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(1), 5);
    let client = client(&server, &s).await;
    let limit = ["--max-task-time", "1500ms"];
    let _a = start_node(dir.path(), &server.url(), "a", &limit);
    let _b = start_node(dir.path(), &server.url(), "b", &limit);
    // One task "hangs" for 4 s: after 1.5 s its heartbeats stop, so the
    // broker gives it to a node again while the first run still goes on.
    let p = client
        .submit("sleep", sleep_payload(Duration::from_secs(4)))
        .await
        .unwrap();
    let r = tokio::time::timeout(LONG, p.result())
        .await
        .unwrap()
        .unwrap();
    assert!(r.output.is_ok());
    let runs: Vec<u32> = ["a", "b"]
        .iter()
        .flat_map(|n| read_journal(&journal(dir.path(), n)).unwrap())
        .map(|(_, d)| d)
        .collect();
    assert!(runs.len() >= 2 && runs.iter().any(|&d| d >= 2), "{runs:?}");
    let a = audit(client.jetstream(), client.id()).await.unwrap();
    assert_eq!(a.duplicate_results, 0);
}

/// A restarted broker can deliver again, as a *first* delivery, a request
/// it had already handed out before it stopped (its consumer state is older
/// than what it delivered; the chaos test saw it). So after a reconnect a
/// node checks every first delivery of a request stored before the restart
/// against the results stream, as it checks redeliveries. Here the replay is
/// staged exactly: a request whose result is already recorded is stored
/// while the node is stopped (SIGSTOP, after its open pull expired), the
/// broker restarts, the node resumes and gets it as delivery 1. It must ack
/// it without running it (the node without the check ran it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_delivery_after_a_broker_restart_whose_result_is_recorded_does_not_run() {
    use async_nats::jetstream::message::PublishMessage as Publish;
    use async_nats::HeaderMap;
    use tidepool_cluster::protocol::{H_CLIENT, H_REQUEST, REQUESTS, REQ_PREFIX, RES_PREFIX};

    let mut server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(60), 5);
    let client = client(&server, &s).await;
    let a = start_node(dir.path(), &server.url(), "a", &[]);
    tidepool_cluster::status::wait_for_nodes(client.nats(), 1, LONG)
        .await
        .unwrap();
    // Stop the node, and wait until its open pull (500 ms) has expired at
    // the broker, so nothing is delivered to it before the restart.
    a.signal(libc::SIGSTOP);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let js = client.jetstream();
    let request = "replayed-1";
    let mut headers = HeaderMap::new();
    headers.insert(H_REQUEST, request);
    js.send_publish(
        format!("{RES_PREFIX}{}.{request}", client.id()),
        Publish::build()
            .headers(headers.clone())
            .payload("recorded by its first run".into())
            .message_id(request),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    headers.insert(H_CLIENT, client.id());
    js.send_publish(
        format!("{REQ_PREFIX}echo"),
        Publish::build()
            .headers(headers)
            .payload("run me again".into())
            .message_id(request),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    tokio::task::block_in_place(|| server.restart()).unwrap();
    a.signal(libc::SIGCONT);
    // The request leaves the work queue once the node acked it.
    let mut queued = u64::MAX;
    for _ in 0..1200 {
        if let Ok(mut stream) = js.get_stream(REQUESTS).await {
            if let Ok(info) = stream.info().await {
                queued = info.state.messages;
                if queued == 0 {
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log_a = log(dir.path(), "a");
    assert_eq!(queued, 0, "the request was not acked: {log_a}");
    let ran = read_journal(&journal(dir.path(), "a")).unwrap();
    assert!(ran.is_empty(), "it ran again: {ran:?}: {log_a}");
    assert!(
        log_a.contains("after a reconnect") && log_a.contains("acked without running"),
        "{log_a}"
    );
}
