//! The dashboard in a real browser: Debian's Chromium, headless, loads the
//! page against a running cluster; the nodes are listed and the numbers move.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::*;
use tidepool_cluster::tasks::sleep_payload;
use tidepool_cluster::{dashboard, http, NatsServer};

const LONG: Duration = Duration::from_secs(120);

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// The page's DOM after its script ran for a few (virtual) seconds.
fn dump_dom(browser: &PathBuf, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=4000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The numbers in the cells of class `completed`, summed.
fn completed(dom: &str) -> u64 {
    dom.split("class=\"completed\">")
        .skip(1)
        .filter_map(|rest| rest.split('<').next()?.trim().parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_headless_chromium_lists_the_nodes_and_its_numbers_move() {
    let Some(browser) = chromium() else {
        eprintln!("SKIPPED: chromium is not installed (scripts/setup.sh installs it: apt-get install chromium)");
        return;
    };
    let server = NatsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(Duration::from_secs(10), 5);
    let client = client(&server, &s).await;
    let _a = start_node(dir.path(), &server.url(), "node-a", &[]);
    let _b = start_node(dir.path(), &server.url(), "node-b", &[]);
    tidepool_cluster::status::wait_for_nodes(client.nats(), 2, LONG)
        .await
        .unwrap();
    let listener = http::bind("127.0.0.1:0".parse().unwrap(), "--addr")
        .await
        .unwrap();
    let page = format!("http://{}/", listener.local_addr().unwrap());
    let url = server.url();
    tokio::spawn(async move { dashboard::serve(&url, listener, std::future::pending()).await });
    // Work that keeps going while the browser looks twice.
    let load = {
        let client = client.clone();
        tokio::spawn(async move {
            loop {
                let p = client
                    .submit_batch(
                        "sleep",
                        (0..50).map(|_| sleep_payload(Duration::from_millis(5))),
                    )
                    .await
                    .unwrap();
                client.wait_all(p, LONG).await.unwrap();
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b = browser.clone();
    let p = page.clone();
    let first = tokio::task::spawn_blocking(move || dump_dom(&b, &p))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second = tokio::task::spawn_blocking(move || dump_dom(&browser, &page))
        .await
        .unwrap();
    load.abort();
    for dom in [&first, &second] {
        assert!(
            dom.contains("data-node=\"node-a\"") && dom.contains("data-node=\"node-b\""),
            "{dom}"
        );
        // The broker's numbers arrived too: every queue tile shows a number.
        for p in ["high", "normal", "low"] {
            let tile = format!("id=\"q-{p}\">");
            let after = dom.split(&tile).nth(1).unwrap_or("");
            assert!(
                after.starts_with(|c: char| c.is_ascii_digit()),
                "queue {p}: {dom}"
            );
        }
    }
    let (c1, c2) = (completed(&first), completed(&second));
    assert!(c1 > 0 && c2 > c1, "completed did not move: {c1} then {c2}");
}
