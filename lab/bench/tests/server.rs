//! The server benchmark end to end: `--quick` serves every endpoint with
//! every contender and leaves no database behind, also when interrupted.
//! Needs PostgreSQL and wrk (scripts/setup.sh installs them).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tidepool-bench"))
}

/// (dir, port, pid) from the `database ready: dir=… port=… pid=…` line.
fn ready_line(line: &str) -> Option<(PathBuf, u16, i32)> {
    let rest = line.strip_prefix("database ready: ")?;
    let field = |k: &str| {
        rest.split(' ')
            .find_map(|kv| kv.strip_prefix(k))
            .map(str::to_string)
    };
    Some((
        PathBuf::from(field("dir=")?),
        field("port=")?.parse().ok()?,
        field("pid=")?.parse().ok()?,
    ))
}

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.parse::<u32>().is_err() {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{name}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            found.push(format!("{name}: {cmd}"));
        }
    }
    found
}

fn assert_removed(dir: &Path, port: u16, pid: i32) {
    assert!(!dir.exists(), "{} was left behind", dir.display());
    let left = processes_mentioning(&dir.display().to_string());
    assert!(left.is_empty(), "processes left: {left:?}");
    // SAFETY: signal 0 only checks that the process exists.
    assert!(
        unsafe { libc::kill(pid, 0) } != 0,
        "postmaster {pid} still runs"
    );
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "port {port} is still taken"
    );
}

#[test]
fn quick_run_serves_every_endpoint_with_every_contender_and_removes_the_database() {
    let out = bench()
        .args(["server", "--quick", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    let (dir, port, pid) = stderr
        .lines()
        .find_map(ready_line)
        .unwrap_or_else(|| panic!("no `database ready` line: {stderr}"));
    assert_removed(&dir, port, pid);

    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["database"]["removed"], true);
    assert_eq!(doc["database"]["dir"], dir.display().to_string());
    let phases = doc["phases"].as_array().unwrap();
    let names: Vec<&str> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["mix-c8", "change-lookup", "change-external", "change-write"]
    );
    for p in phases {
        assert_eq!(p["connections"], 8);
        let results = p["results"].as_array().unwrap();
        let impls: Vec<&str> = results
            .iter()
            .map(|r| r["impl"].as_str().unwrap())
            .collect();
        assert_eq!(
            impls,
            [
                "auto",
                "watermark:3..100",
                "hill-climb",
                "tpr",
                "tokio",
                "fixed:2",
                "fixed:8"
            ],
            "{}",
            p["name"]
        );
        for r in results {
            let what = format!("{} in {}", r["impl"], p["name"]);
            assert!(r["requests_per_sec"].as_f64().unwrap() > 0.0, "{what}");
            assert!(
                r["p99_ms"].as_f64().unwrap() >= r["p50_ms"].as_f64().unwrap(),
                "{what}"
            );
            assert_eq!(r["errors"], 0, "{what}");
            assert!(
                r["threads_created"].is_u64() && r["db_connections"].is_u64(),
                "{what}"
            );
            // A 1 s phase holds five 200 ms spans: their change is read.
            let change = r["span_change_pct"].as_f64();
            assert!(change.is_some_and(|c| c >= 0.0), "{what}: {change:?}");
            // One repeat: its p99 paired with the oracle's in the same repeat.
            let p99 = r["p99_ms"].as_f64().unwrap();
            assert_eq!(r["p99_ms_runs"][0].as_f64(), Some(p99), "{what}");
            let paired = r["p99_vs_oracle"]["median"].as_f64().unwrap();
            let oracle_p99 = p["oracle"]["p99_ms"].as_f64().unwrap();
            assert!((paired - p99 / oracle_p99).abs() < 1e-9, "{what}");
            assert_eq!(r["p99_verdict"], "too few repeats", "{what}");
        }
        let oracle = p["oracle"]["impl"].as_str().unwrap();
        assert!(["fixed:2", "fixed:8"].contains(&oracle), "{oracle}");
    }
    // A static pool opens at most one connection per worker; thread-per-request
    // starts a thread per request, each taking the connection an exited one handed back.
    let mix = &phases[0]["results"];
    let row = |name: &str| {
        mix.as_array()
            .unwrap()
            .iter()
            .find(|r| r["impl"] == name)
            .unwrap()
            .clone()
    };
    assert!(row("fixed:2")["db_connections"].as_u64().unwrap() <= 2);
    let tpr = row("tpr");
    let (threads, opened) = (
        tpr["threads_created"].as_u64().unwrap(),
        tpr["db_connections"].as_u64().unwrap(),
    );
    assert!(threads > 100 && opened * 10 < threads, "{tpr}");
    // Tidepool pools report what they saw in each repeat; the others have
    // no such view.
    let auto = &row("auto")["pools"][0];
    assert!(auto["target_end"].as_u64().unwrap() >= 1);
    assert!(auto["phi"].is_f64());
    assert_eq!(row("tokio")["pools"], serde_json::json!([]));
    assert_eq!(row("tpr")["pools"], serde_json::json!([]));
    // Each move is `seconds trigger old->new reason`, the sizes differing,
    // and the raises among them are the ones counted.
    for phase in phases {
        let results = phase["results"].as_array().unwrap();
        let auto = results.iter().find(|r| r["impl"] == "auto").unwrap();
        for view in auto["pools"].as_array().unwrap() {
            let mut raises = 0;
            for m in view["moves"].as_array().unwrap() {
                let m = m.as_str().unwrap();
                let fields: Vec<&str> = m.split(' ').collect();
                assert!(fields[0].parse::<f64>().is_ok(), "{m}");
                let (old, new) = fields[2].split_once("->").unwrap();
                let (old, new): (usize, usize) = (old.parse().unwrap(), new.parse().unwrap());
                assert_ne!(old, new, "{m}");
                raises += usize::from(new > old);
            }
            assert_eq!(view["raises"].as_u64(), Some(raises as u64), "{view}");
        }
    }
}

#[test]
fn ctrl_c_mid_run_stops_the_database_and_removes_its_directory() {
    stopped_mid_run_by(libc::SIGINT);
}

#[test]
fn sigterm_mid_run_stops_the_database_and_removes_its_directory() {
    // What `kill`, a service manager or a CI timeout sends.
    stopped_mid_run_by(libc::SIGTERM);
}

/// Start a quick run, send it `signal` once the second contender is under
/// load, and check it exits 130 with the database stopped and removed.
fn stopped_mid_run_by(signal: i32) {
    let mut child = bench()
        .args(["server", "--quick", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut db = None;
    // Wait until the load runs against the second contender: mid-run.
    let mut contenders_started = 0;
    while contenders_started < 2 {
        let line = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the benchmark did not get going");
        if let Some(found) = ready_line(&line) {
            db = Some(found);
        }
        if line.starts_with("repeat ") {
            contenders_started += 1;
        }
    }
    let (dir, port, pid) = db.expect("no `database ready` line");
    assert!(dir.exists());
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: we started this child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no exit after signal {signal}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    assert_removed(&dir, port, pid);
}

/// The JSON of a successful `server --quick --json` run with `args` added.
fn quick_json(args: &[&str]) -> serde_json::Value {
    let out = bench()
        .args(["server", "--quick", "--json"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_warm_up_opens_the_connections_before_the_measured_phase() {
    // `--quick` sets the sizes (2 and 8) and the phases; the warm-up is ours.
    let doc = quick_json(&["--warmup-secs", "1", "--contenders", "tpr"]);
    assert_eq!(doc["warmup_secs"], 1);
    let results = doc["phases"][0]["results"].as_array().unwrap();
    let fixed = results.iter().find(|r| r["impl"] == "fixed:2").unwrap();
    // Its two workers connected during the warm-up.
    assert_eq!(fixed["db_connections"], 0, "{fixed}");
}

#[test]
fn connections_opened_ahead_serve_the_first_requests() {
    // No warm-up: without connections opened ahead, fixed:8's workers
    // would open theirs during the measured phase.
    let doc = quick_json(&["--contenders", "tpr", "--open-connections", "8"]);
    assert_eq!(doc["open_connections"], 8);
    let results = doc["phases"][0]["results"].as_array().unwrap();
    for size in ["fixed:2", "fixed:8"] {
        let fixed = results.iter().find(|r| r["impl"] == size).unwrap();
        assert_eq!(fixed["db_connections"], 0, "{fixed}");
    }
}

/// `server` with `args` fails with `message` before it starts the database.
fn assert_refused_before_the_database_starts(args: &[&str], message: &str) {
    let out = bench().arg("server").args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
    assert!(!stderr.contains("database ready"), "{stderr}");
}

#[test]
fn connections_opened_ahead_past_the_limit_are_refused_before_the_database_starts() {
    assert_refused_before_the_database_starts(
        &["--quick", "--open-connections", "100"],
        "--open-connections 100 must be below --max-connections 100",
    );
}

#[test]
fn thread_bounds_without_room_are_refused_before_the_database_starts() {
    assert_refused_before_the_database_starts(
        &[
            "--contenders",
            "auto",
            "--min-threads",
            "8",
            "--max-threads",
            "8",
        ],
        "--min-threads 8 must be below --max-threads 8",
    );
}

#[test]
fn a_shared_connection_pool_serves_every_endpoint_within_one_connection_per_thread() {
    let doc = quick_json(&["--contenders", "tpr,tokio", "--connection-pool", "shared"]);
    assert_eq!(doc["connection_pool"], "shared");
    let phases = doc["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 4, "the mix and the three of the change");
    for p in phases {
        for r in p["results"].as_array().unwrap() {
            let what = format!("{} in {}", r["impl"], p["name"]);
            assert_eq!(r["errors"], 0, "{what}");
            assert!(r["requests_per_sec"].as_f64().unwrap() > 0.0, "{what}");
            if r["impl"] == "fixed:2" {
                assert!(r["db_connections"].as_u64().unwrap() <= 2, "{what}");
            }
        }
    }
}

#[test]
fn an_unknown_connection_pool_is_refused_with_the_choices() {
    let out = bench()
        .args(["server", "--quick", "--connection-pool", "lazy"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("per-thread") && stderr.contains("shared"),
        "{stderr}"
    );
}
