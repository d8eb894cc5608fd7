//! `tidepool-node --metrics-addr`: `/metrics` in the Prometheus text format.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

use common::*;
use tidepool_cluster::server::free_port;
use tidepool_cluster::tasks::sleep_payload;
use tidepool_cluster::NatsServer;

const LONG: Duration = Duration::from_secs(120);

/// `GET path` on 127.0.0.1:`port`: (status line, body).
fn get(port: u16, path: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// Parse the Prometheus text format strictly (version 0.0.4): every line is
/// `# HELP name text`, `# TYPE name kind`, or `name{label="v",...} value`;
/// names and label names are valid, values are floats. Samples by their
/// name with labels.
fn parse(text: &str) -> BTreeMap<String, f64> {
    let name_ok = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut samples = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name) = (parts.next().unwrap(), parts.next().unwrap_or(""));
            assert!(matches!(kind, "HELP" | "TYPE"), "{line}");
            assert!(name_ok(name), "{line}");
            if kind == "TYPE" {
                let t = parts.next().unwrap_or("");
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&t),
                    "{line}"
                );
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value in {line}")),
        };
        let name = series.split('{').next().unwrap();
        assert!(name_ok(name), "{line}");
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                let inner = labels
                    .strip_prefix('{')
                    .and_then(|l| l.strip_suffix('}'))
                    .unwrap_or_else(|| panic!("labels in {line}"));
                for pair in inner.split("\",").filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or_else(|| panic!("{line}"));
                    assert!(name_ok(k) && v.starts_with('"'), "{line}");
                }
            }
        }
        samples.insert(series.to_string(), value);
    }
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_as_prometheus_text_with_pool_and_per_task_counters() {
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(10), 5);
    let client = client(&server, &s).await;
    let port = free_port().unwrap();
    let addr = format!("127.0.0.1:{port}");
    let _m = start_node(dir.path(), &server.url(), "m", &["--metrics-addr", &addr]);
    tidepool_cluster::status::wait_for_nodes(client.nats(), 1, LONG)
        .await
        .unwrap();
    let pending = client
        .submit_batch(
            "sleep",
            (0..20).map(|_| sleep_payload(Duration::from_millis(2))),
        )
        .await
        .unwrap();
    client.wait_all(pending, LONG).await.unwrap();
    let cancelled = client.submit("echo", &b"x"[..]).await.unwrap();
    let _ = client.cancel(&cancelled.request).await;
    let _ = cancelled.result().await.unwrap();
    let (status, body) = tokio::task::spawn_blocking(move || get(port, "/metrics"))
        .await
        .unwrap();
    assert!(status.contains("200"), "{status}");
    let m = parse(&body);
    assert_eq!(
        m[r#"tidepool_node_acked_total{node="m",task="sleep"}"#], 20.0,
        "{body}"
    );
    assert_eq!(
        m[r#"tidepool_node_pulled_total{node="m",task="sleep"}"#],
        20.0
    );
    assert!(
        m.contains_key(r#"tidepool_threads_live{pool="m"}"#),
        "{body}"
    );
    assert!(
        m[r#"tidepool_tasks_completed_total{pool="m"}"#] >= 20.0,
        "{body}"
    );
    assert!(
        m.keys()
            .any(|k| k.starts_with("tidepool_task_service_seconds_bucket")),
        "no histogram: {body}"
    );
    // The echo may have been cancelled before or after it ran.
    let echo_pulled = m[r#"tidepool_node_pulled_total{node="m",task="echo"}"#];
    assert_eq!(echo_pulled, 1.0);
    let (status, _) = tokio::task::spawn_blocking(move || get(port, "/nope"))
        .await
        .unwrap();
    assert!(status.contains("404"), "{status}");
}

#[test]
fn a_bad_metrics_address_is_a_usage_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tidepool-node"))
        .args(["--metrics-addr", "localhost"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--metrics-addr") && err.contains("HOST:PORT"),
        "{err}"
    );
}
