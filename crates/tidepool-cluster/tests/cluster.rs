//! End-to-end tests against a private nats-server and real node processes.

mod common;

use std::time::Duration;

use common::*;
use tidepool_cluster::audit::audit;
use tidepool_cluster::tasks::sleep_payload;
use tidepool_cluster::NatsServer;

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
    let a = audit(client.jetstream(), client.id()).await.unwrap();
    assert_eq!(a.distinct_results, 201);
    assert_eq!(a.duplicate_results, 0);
    assert_eq!(a.requests_queued, 0, "every request acked");
}
