//! The Celery side: a private `redis-server` (broker and result backend),
//! two Celery workers (prefork, `--concurrency N` each, settings in
//! `lab/bench/celery/bench_app.py`), and the Python client `driver.py`,
//! which writes one line per request.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::journal::{self, Killer};
use super::procs::Group;
use super::redis::Redis;
use super::report::Sample;
use super::venv::python_dir;
use super::{Kind, Spec, WORKERS};

fn task_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Sleep => "sleep_ms",
        Kind::Spin => "spin_ms",
    }
}

/// A Python program of the venv with the comparison's environment.
fn python(venv: &Path, program: &str, broker: &str, spec: &Spec) -> Command {
    let mut cmd = Command::new(venv.join("bin").join(program));
    cmd.current_dir(python_dir())
        .env("BENCH_BROKER", broker)
        .env(
            "BENCH_REDELIVER_S",
            spec.redeliver.as_secs_f64().to_string(),
        )
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONPATH", python_dir());
    cmd
}

/// One run: the samples in request order, and the finished count at the kill.
pub fn run(spec: &Spec, venv: &Path) -> Result<(Vec<Sample>, Option<u64>), String> {
    let redis_dir = spec.dir.join("redis");
    std::fs::create_dir_all(&redis_dir).map_err(|e| e.to_string())?;
    let redis = Redis::start(&redis_dir)?;
    let url = redis.url();
    let journals: Vec<PathBuf> = (0..WORKERS).map(|i| journal::path(&spec.dir, i)).collect();
    let mut workers = Vec::new();
    for (i, j) in journals.iter().enumerate() {
        let ready = spec.dir.join(format!("celery-{i}.ready"));
        let mut cmd = python(venv, "celery", &url, spec);
        cmd.env("BENCH_RECORD", j)
            .env("BENCH_READY", &ready)
            .args([
                "-A",
                "bench_app",
                "worker",
                "--pool",
                "prefork",
                "--concurrency",
            ])
            .arg(spec.concurrency.to_string())
            .args(["--prefetch-multiplier", "1"])
            .args([
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ])
            .args([
                "-n",
                &format!("w{i}@tidepool-bench"),
                "--loglevel",
                "WARNING",
            ])
            .arg("--logfile")
            .arg(spec.dir.join(format!("celery-{i}.log")));
        let out = spec.dir.join(format!("celery-{i}.out"));
        let w = Group::spawn(cmd, &format!("celery-{i}"), &out, Duration::from_secs(10))?;
        workers.push((w, ready, spec.dir.join(format!("celery-{i}.log"))));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    for (w, ready, log) in &workers {
        while !ready.exists() {
            if !w.running() || Instant::now() > deadline {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(3).collect();
                return Err(format!(
                    "a Celery worker did not get ready: {}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let victim = workers[0].0.pid();
    let killer = spec.kill.then(|| {
        Killer::arm(journals.clone(), spec.requests as u64 / 3, move || {
            super::procs::kill_group(victim, "celery-0")
        })
    });
    let out = spec.dir.join("celery-results.txt");
    let mut cmd = python(venv, "python", &url, spec);
    cmd.arg("driver.py")
        .args(["--broker", &url, "--task", task_name(spec.kind)])
        .arg("--ms")
        .arg((spec.length.as_secs_f64() * 1e3).to_string())
        .args(["--requests", &spec.requests.to_string()])
        .arg("--timeout-s")
        .arg(spec.timeout.as_secs_f64().to_string())
        .arg("--out")
        .arg(&out);
    if let Some(r) = spec.rate {
        cmd.arg("--rate").arg(r.to_string());
    }
    let driver_log = spec.dir.join("celery-driver.log");
    let driver = Group::spawn(cmd, "celery-client", &driver_log, Duration::from_secs(5))?;
    // Submitting, then waiting up to the timeout, then writing the file.
    let limit = Instant::now() + spec.timeout + Duration::from_secs(600);
    while driver.running() {
        if Instant::now() > limit {
            return Err("the Celery client did not finish".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let killed_at = killer.and_then(Killer::disarm);
    let text = std::fs::read_to_string(&out).map_err(|e| {
        let log = std::fs::read_to_string(&driver_log).unwrap_or_default();
        format!("the Celery client wrote no results ({e}): {log}")
    })?;
    let samples = parse(&text, spec.requests)?;
    drop(workers);
    drop(redis);
    Ok((samples, killed_at))
}

/// `rid submitted_ns received_ns status` per line, in request order.
fn parse(text: &str, requests: usize) -> Result<Vec<Sample>, String> {
    let samples: Vec<Sample> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(Sample {
                submitted_ns: f.get(1)?.parse().ok()?,
                received_ns: f.get(2)?.parse().ok()?,
                ok: *f.get(3)? == "SUCCESS",
            })
        })
        .collect();
    if samples.len() != requests {
        return Err(format!(
            "the Celery client wrote {} results for {requests} requests",
            samples.len()
        ));
    }
    Ok(samples)
}
