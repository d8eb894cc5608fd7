//! The Celery comparison end to end: `--quick` runs both systems on both
//! task kinds, kills a worker of each, prints every field, and leaves no
//! process or directory of its own behind. Needs redis-server, nats-server
//! and the Celery virtualenv (scripts/setup.sh makes all three; the
//! benchmark makes the virtualenv itself when the network is there).

use std::path::PathBuf;
use std::process::Command;

/// Whether `pid` exists and is not a zombie.
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            Some(!rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Live processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Ok(pid) = name.parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{name}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) && running(pid) {
            found.push(format!("{name}: {cmd}"));
        }
    }
    found
}

#[test]
fn quick_run_prints_every_field_and_leaves_nothing_behind() {
    let out = Command::new(env!("CARGO_BIN_EXE_tidepool-bench"))
        .args(["celery", "--quick", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);

    // Nothing of its own is left: every process it started, its directory.
    let dir = stderr
        .lines()
        .find_map(|l| l.strip_prefix("celery bench: dir="))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no `celery bench: dir=` line: {stderr}"));
    assert!(!dir.exists(), "{} was left behind", dir.display());
    let left = processes_mentioning(&dir.display().to_string());
    assert!(left.is_empty(), "processes left: {left:?}");
    let started: Vec<(String, i32)> = stderr
        .lines()
        .filter_map(|l| {
            let (what, pid) = l.strip_prefix("started ")?.split_once(" pid=")?;
            Some((what.to_string(), pid.parse().ok()?))
        })
        .collect();
    for what in [
        "redis-server",
        "nats-server",
        "celery-0",
        "celery-1",
        "node-0",
        "celery-client",
    ] {
        assert!(
            started.iter().any(|(w, _)| w == what),
            "{what} never started: {stderr}"
        );
    }
    for (what, pid) in &started {
        assert!(!running(*pid), "{what} (pid {pid}) still runs");
    }
    assert_eq!(stderr.matches("killed node-0 pid=").count(), 2, "{stderr}");
    assert_eq!(
        stderr.matches("killed celery-0 pid=").count(),
        2,
        "{stderr}"
    );

    // The table's fields, for both systems on both kinds.
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["requests"], 200);
    assert_eq!(doc["workers"], 2);
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 8, "2 systems × 2 kinds × (run, kill run)");
    for r in runs {
        let what = format!("{} {} kill={}", r["system"], r["kind"], r["kill"]);
        assert_eq!(r["requests"], 200, "{what}");
        assert!(r["throughput"].as_f64().unwrap() > 0.0, "{what}");
        assert!(
            r["p99_ms"].as_f64().unwrap() >= r["p50_ms"].as_f64().unwrap(),
            "{what}"
        );
        assert!(r["submit_rate"].as_f64().unwrap() > 0.0, "{what}");
        for field in ["lost", "ran_twice", "restarted", "failed", "never_finished"] {
            assert!(r[field].is_u64(), "{what}: {field}");
        }
        if r["kill"] == true {
            assert!(r["killed_at"].as_u64().unwrap() >= 200 / 3, "{what}");
        } else {
            // Without a kill every request ran once and got its result.
            assert_eq!(r["results"], 200, "{what}");
            assert_eq!(r["ran_twice"], 0, "{what}");
            assert_eq!(r["never_finished"], 0, "{what}");
        }
    }
    let rows = doc["rows"].as_array().unwrap();
    let keys: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r["kind"].to_string(), r["system"].to_string()))
        .collect();
    assert_eq!(keys.len(), 4, "{keys:?}");
    for k in doc["ratios"].as_array().unwrap() {
        assert_eq!(k["throughput"].as_array().unwrap().len(), 1);
        assert_eq!(k["p99"].as_array().unwrap().len(), 1);
    }
}
