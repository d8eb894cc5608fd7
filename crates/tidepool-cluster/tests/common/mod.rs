//! Shared by the integration tests: a private broker, node processes from
//! the crate's own `tidepool-node` binary, a client.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tidepool_cluster::process::{NodeCommand, NodeProcess};
use tidepool_cluster::{Client, NatsServer, Settings};

/// The crate's `tidepool-node`, or `$TIDEPOOL_NODE_BIN` (a copy, so that a
/// long test loop is not disturbed by a rebuild).
pub fn node_command() -> NodeCommand {
    NodeCommand::new(
        std::env::var_os("TIDEPOOL_NODE_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_tidepool-node").into()),
    )
}

/// Settings with a short ack wait so that redeliveries come soon.
pub fn settings(ack_wait: Duration, max_deliver: u32) -> Settings {
    Settings {
        ack_wait,
        max_deliver,
        ..Settings::default()
    }
}

/// Start a node on `url` named `name`, logging to `dir/name.log`.
pub fn start_node(dir: &Path, url: &str, name: &str, extra: &[&str]) -> NodeProcess {
    let mut args: Vec<String> = vec![
        "--nats".into(),
        url.into(),
        "--name".into(),
        name.into(),
        "--journal".into(),
        journal(dir, name).display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    node_command()
        .spawn(args, Some(&dir.join(format!("{name}.log"))))
        .expect("start node")
}

pub fn journal(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.journal"))
}

pub fn log(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
}

pub async fn client(server: &NatsServer, s: &Settings) -> Client {
    Client::connect(&server.url(), s, Duration::from_secs(30))
        .await
        .expect("client connects")
}

/// The audit once every request has been acked. A node acks a request only
/// after the broker confirmed its result, so a client can see every result a
/// moment before the last acks reach the broker (on a loaded machine, a few
/// seconds): wait for the request stream to drain rather than read it once.
pub async fn audit_once_acked(client: &Client) -> tidepool_cluster::audit::Audit {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let a = tidepool_cluster::audit::audit(client.jetstream(), client.id())
            .await
            .unwrap();
        if a.requests_queued == 0 || Instant::now() >= deadline {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
