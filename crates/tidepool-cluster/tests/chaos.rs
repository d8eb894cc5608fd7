//! The chaos scenario with a small N: a node SIGKILLed mid-run and the broker
//! restarted once lose no request and record no result twice.

mod common;

use std::time::Duration;

use tidepool_cluster::chaos::{run, ChaosOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_and_a_broker_restart_lose_nothing() {
    // TIDEPOOL_KEEP_CHAOS=1 keeps the node logs, journals and broker store.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let _guard = match std::env::var_os("TIDEPOOL_KEEP_CHAOS").filter(|v| !v.is_empty()) {
        Some(_) => {
            eprintln!("keeping {}", tmp.keep().display());
            None
        }
        None => Some(tmp),
    };
    let mut opts = ChaosOptions::new(common::node_command());
    opts.requests = 1500;
    opts.task = Duration::from_millis(20);
    opts.max_threads = 32;
    opts.ack_wait = Duration::from_secs(10);
    opts.timeout = Duration::from_secs(150);
    opts.verbose = true;
    let r = run(&opts, &dir, std::future::pending()).await.unwrap();
    eprintln!("{}", serde_json::to_string_pretty(&r).unwrap());
    assert_eq!(r.submitted, 1500);
    assert_eq!(r.lost, 0, "{r:?}");
    assert_eq!(r.results, 1500, "{r:?}");
    assert_eq!(r.duplicate_results, 0, "{r:?}");
    assert_eq!(r.dead_lettered, 0, "{r:?}");
    assert!(
        r.killed_at_results > 0 && r.broker_restarted_at_results > 0,
        "{r:?}"
    );
    // Every request ran at least once; re-runs are bounded by the killed
    // node's in-flight requests.
    assert!(r.executions >= 1500, "{r:?}");
    assert!(r.unexplained_executions <= 0, "{r:?}");
    assert!(r.ok, "{r:?}");
}
