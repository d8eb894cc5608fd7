//! The tidepool side: a private `nats-server`, two node processes (this
//! binary's hidden `celery-node` subcommand: a stock node plus two handlers
//! that journal around the built-in `sleep` and `spin`), and the cluster's
//! `Client` in this process, submitting with `submit_batch`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use clap::Args;
use tidepool_cluster::args::NodeArgs;
use tidepool_cluster::tasks::Outcome;
use tidepool_cluster::{Client, NatsServer, Node, Settings};

use super::journal::{self, Killer};
use super::procs::Group;
use super::report::Sample;
use super::{Kind, Spec, WORKERS};
use crate::server::cleanup;

/// `tidepool-bench celery-node`: a node for the comparison.
#[derive(Debug, Args)]
pub struct NodeCmd {
    /// Journal of the task bodies (`S id` / `F id` lines).
    #[arg(long, value_name = "FILE")]
    record: PathBuf,
    /// The node's own options.
    #[command(flatten)]
    node: NodeArgs,
}

/// The task name of `kind` on a node.
fn task_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Sleep => "bench_sleep",
        Kind::Spin => "bench_spin",
    }
}

/// Run a node whose `bench_sleep` / `bench_spin` take `ID MICROS`, journal
/// `S ID`, run the built-in `sleep` / `spin` on `MICROS`, journal `F ID`.
pub fn node_main(cmd: NodeCmd) -> Result<(), String> {
    let run = || -> anyhow::Result<()> {
        let config = cmd.node.config().map_err(|e| anyhow::anyhow!(e))?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cmd.record)?;
        let file = std::sync::Arc::new(file);
        let mut node = Node::new(config);
        for (name, builtin) in [("bench_sleep", "sleep"), ("bench_spin", "spin")] {
            let inner = tidepool_cluster::tasks::builtins()
                .into_iter()
                .find(|(n, _)| *n == builtin)
                .map(|(_, h)| h)
                .ok_or_else(|| anyhow::anyhow!("no built-in `{builtin}` task"))?;
            let file = file.clone();
            node.register(name, move |payload: &[u8]| -> Outcome {
                let text = std::str::from_utf8(payload).map_err(|_| "payload is not UTF-8")?;
                let (id, micros) = text
                    .split_once(' ')
                    .ok_or_else(|| format!("payload `{text}` is not `ID MICROS`"))?;
                record(&file, "S", id);
                inner(micros.as_bytes())?;
                record(&file, "F", id);
                Ok(id.as_bytes().to_vec())
            })?;
        }
        tidepool_cluster::args::run_node(node)?;
        Ok(())
    };
    run().map_err(|e| format!("{e:#}"))
}

/// Submit one request every `1/rate` s by the clock (each submit on a task
/// of its own, so that a slow broker acknowledgement does not delay the
/// next).
async fn paced(
    client: &Client,
    task: &'static str,
    payloads: Vec<Vec<u8>>,
    rate: f64,
) -> anyhow::Result<Vec<tidepool_cluster::Pending>> {
    let start = tokio::time::Instant::now();
    let mut handles = Vec::with_capacity(payloads.len());
    for (i, p) in payloads.into_iter().enumerate() {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
        let c = client.clone();
        handles.push(tokio::spawn(async move { c.submit(task, p).await }));
    }
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await??);
    }
    Ok(out)
}

/// One `write(2)` of a whole line (atomic with `O_APPEND`).
fn record(file: &std::fs::File, kind: &str, id: &str) {
    use std::io::Write;
    let _ = (&*file).write_all(format!("{kind} {id}\n").as_bytes());
}

/// One run: the samples in request order, and the finished count at the kill.
pub fn run(spec: &Spec) -> Result<(Vec<Sample>, Option<u64>), String> {
    let port = tidepool_cluster::server::free_port().map_err(|e| e.to_string())?;
    let server = NatsServer::start_in(&spec.dir.join("nats"), port).map_err(|e| e.to_string())?;
    eprintln!("started nats-server pid={}", server.pid().unwrap_or(0));
    let url = server.url();
    // Dropped last (after the nodes), also on Ctrl-C.
    let _broker = cleanup::register(move || drop(server));
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let journals: Vec<PathBuf> = (0..WORKERS).map(|i| journal::path(&spec.dir, i)).collect();
    let mut nodes = Vec::new();
    for (i, j) in journals.iter().enumerate() {
        let mut cmd = Command::new(&exe);
        cmd.arg("celery-node")
            .arg("--record")
            .arg(j)
            .args(["--nats", &url, "--name", &format!("node-{i}")])
            .args(["--max-threads", &spec.concurrency.to_string()])
            .args([
                "--ack-wait",
                &tidepool_cluster::duration::show(spec.redeliver),
            ])
            .args(["--drain-timeout", "5s"]);
        let log = spec.dir.join(format!("node-{i}.log"));
        nodes.push(Group::spawn(
            cmd,
            &format!("node-{i}"),
            &log,
            Duration::from_secs(10),
        )?);
    }
    let victim = nodes[0].pid();
    let settings = Settings {
        ack_wait: spec.redeliver,
        ..Settings::default()
    };
    let n = spec.requests;
    let payloads: Vec<Vec<u8>> = (0..n)
        .map(|id| format!("{id} {}", spec.length.as_micros()).into_bytes())
        .collect();
    let task = task_name(spec.kind);
    let (timeout, kill, rate) = (spec.timeout, spec.kill, spec.rate);
    let journals2 = journals.clone();
    let out = tidepool_cluster::args::block_on(async move {
        let client = Client::connect(&url, &settings, Duration::from_secs(30)).await?;
        tidepool_cluster::status::wait_for_nodes(client.nats(), WORKERS, Duration::from_secs(60))
            .await?;
        let killer = kill.then(|| {
            Killer::arm(journals2, n as u64 / 3, move || {
                super::procs::kill_group(victim, "node-0")
            })
        });
        let pending = match rate {
            None => client.submit_batch(task, payloads).await?,
            Some(r) => paced(&client, task, payloads, r).await?,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let mut samples = Vec::with_capacity(n);
        for p in pending {
            let r = tokio::time::timeout_at(deadline, p.result()).await;
            samples.push(match r {
                Ok(Ok(r)) => Sample {
                    submitted_ns: r.submitted_ns,
                    received_ns: r.received_ns,
                    ok: r.output.is_ok(),
                },
                _ => Sample {
                    submitted_ns: 0,
                    received_ns: 0,
                    ok: false,
                },
            });
        }
        anyhow::Ok((samples, killer.and_then(Killer::disarm)))
    })
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("{e:#}"))?;
    drop(nodes);
    Ok(out)
}
