//! Ctrl-C and SIGTERM on the cluster subcommands that start a broker and
//! node processes: every process they started stops, their temporary store
//! is removed, and they exit 130 (`cluster up`, whose normal stop is Ctrl-C,
//! exits 0 then). Linux only: the tests find the processes in `/proc`.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_tidepool");
/// Generous: the machine is shared, loaded and niced.
const LIMIT: Duration = Duration::from_secs(180);

/// Start `tidepool args` with its temporary files under `tmp`.
fn spawn(args: &[&str], tmp: &Path) -> Child {
    Command::new(BIN)
        .args(args)
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs")
}

/// The direct children of `pid` and their command names.
fn children(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // "PID (COMM) STATE PPID ..."; COMM may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 1..].split_whitespace().nth(1);
        if ppid.and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            out.push((child, comm));
        }
    }
    out
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Poll `cond` every 20 ms up to `LIMIT`.
fn wait_for(what: &str, child: &mut Child, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        if let Ok(Some(status)) = child.try_wait() {
            let o = finish(std::mem::replace(child, dummy()), what);
            panic!(
                "{what}: the command ended first ({status}): {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("{what}: not within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A finished placeholder process (so that a child can be moved out).
fn dummy() -> Child {
    let mut c = Command::new("true").spawn().unwrap();
    let _ = c.wait();
    c
}

/// Wait for the command to end (at most `LIMIT`).
fn finish(child: Child, what: &str) -> Output {
    common::finish_within(child, LIMIT, what, || {})
}

/// Wait for the command to end, noting every child it has meanwhile (so
/// that a process started after the signal is checked too).
fn finish_watching(child: Child, seen: &mut Vec<(u32, String)>, what: &str) -> Output {
    let pid = child.id();
    common::finish_within(child, LIMIT, what, || {
        for kid in children(pid) {
            if !seen.contains(&kid) {
                seen.push(kid);
            }
        }
    })
}

/// Every process in `pids` ends (they may take a moment to be reaped).
fn assert_all_gone(pids: &[(u32, String)], what: &str) {
    let start = Instant::now();
    while pids.iter().any(|(p, _)| alive(*p)) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: still running: {:?}",
            pids.iter().filter(|(p, _)| alive(*p)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_empty(dir: &Path, what: &str) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{what}: left behind in TMPDIR: {left:?}");
}

fn nodes_and_broker(kids: &[(u32, String)], nodes: usize) -> bool {
    let brokers = kids.iter().filter(|(_, c)| c == "nats-server").count();
    let others = kids.iter().filter(|(_, c)| c != "nats-server").count();
    brokers == 1 && others == nodes
}

#[test]
fn ctrl_c_on_chaos_stops_the_broker_and_nodes_and_removes_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    // Far more requests than can finish before the signal.
    let mut child = spawn(
        &["cluster", "chaos", "--requests", "200000", "--json"],
        tmp.path(),
    );
    let pid = child.id();
    let dir = tmp.path().join(format!("tidepool-chaos-{pid}"));
    // Ready: the broker and three nodes run, and every node has connected.
    let mut kids = Vec::new();
    wait_for("broker and nodes up", &mut child, || {
        kids = children(pid);
        nodes_and_broker(&kids, 3)
            && (0..3).all(|i| {
                std::fs::read_to_string(dir.join(format!("node-{i}.log")))
                    .is_ok_and(|log| log.contains("connected"))
            })
    });
    common::send_signal("-INT", pid);
    let o = finish_watching(child, &mut kids, "chaos after Ctrl-C");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON report");
    assert_eq!(report["interrupted"], true, "{report}");
    assert_eq!(report["ok"], false, "{report}");
    assert_all_gone(&kids, "chaos after Ctrl-C");
    assert_empty(tmp.path(), "chaos after Ctrl-C");
}

#[test]
fn sigterm_on_replay_local_stops_the_broker_and_nodes_and_removes_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    // About 1000 s of arrivals: only the signal ends it early.
    let workload = "poisson:rate=50,service=const:5ms,n=50000,seed=3";
    let mut child = spawn(
        &[
            "cluster", "replay", "--local", "2", "-w", workload, "--json",
        ],
        tmp.path(),
    );
    let pid = child.id();
    let mut kids = Vec::new();
    wait_for("broker and nodes up", &mut child, || {
        kids = children(pid);
        nodes_and_broker(&kids, 2)
    });
    common::send_signal("-TERM", pid);
    let o = finish_watching(child, &mut kids, "replay after SIGTERM");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert_all_gone(&kids, "replay after SIGTERM");
    assert_empty(tmp.path(), "replay after SIGTERM");
}

#[test]
fn up_stops_everything_on_ctrl_c_also_during_its_start() {
    // Ctrl-C once it is up (it printed the broker's address: its last
    // node's process exists from the fork on, before the start is over):
    // the nodes and the broker stop, exit 0.
    let tmp = tempfile::tempdir().unwrap();
    let mut child = spawn(&["cluster", "up", "--nodes", "2"], tmp.path());
    let pid = child.id();
    let stdout = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let pipe = child.stdout.take().unwrap();
        let stdout = stdout.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                stdout.lock().unwrap().push_str(&line);
            }
        })
    };
    let mut kids = Vec::new();
    wait_for("broker and nodes up", &mut child, || {
        kids = children(pid);
        nodes_and_broker(&kids, 2) && stdout.lock().unwrap().contains("broker: nats://")
    });
    common::send_signal("-INT", pid);
    let o = finish_watching(child, &mut kids, "up after Ctrl-C");
    reader.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert_all_gone(&kids, "up after Ctrl-C");
    assert_empty(tmp.path(), "up after Ctrl-C");

    // Ctrl-C as soon as the broker process exists (it is still starting):
    // what was started stops. Usually this lands during the start (exit
    // 130, "interrupted while starting"); on a busy machine the start may
    // have finished first, and then it is the normal stop (exit 0).
    let tmp = tempfile::tempdir().unwrap();
    let mut child = spawn(&["cluster", "up", "--nodes", "2"], tmp.path());
    let pid = child.id();
    let mut broker = Vec::new();
    wait_for("broker started", &mut child, || {
        broker = children(pid);
        broker.iter().any(|(_, c)| c == "nats-server")
    });
    common::send_signal("-INT", pid);
    let o = finish_watching(child, &mut broker, "up after an early Ctrl-C");
    let err = String::from_utf8_lossy(&o.stderr);
    match o.status.code() {
        Some(130) => assert!(err.contains("interrupted while starting"), "{err}"),
        Some(0) => assert!(err.contains("stopping"), "{err}"),
        other => panic!("exit {other:?}: {err}"),
    }
    assert_all_gone(&broker, "up after an early Ctrl-C");
    assert_empty(tmp.path(), "up after an early Ctrl-C");
}
