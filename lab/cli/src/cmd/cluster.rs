//! `tidepool cluster up|replay|status|limit|chaos`: a distributed pool on
//! NATS JetStream (see docs/cluster.md).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use tidepool::{policy::PolicySpec, QueueFlavor};
use tidepool_cluster::args::{block_on, until, BrokerArgs, NatsArgs};
use tidepool_cluster::chaos::{self, ChaosOptions};
use tidepool_cluster::duration;
use tidepool_cluster::process::{LocalCluster, NodeCommand};
use tidepool_cluster::{status, Client, NatsServer};

use crate::cluster_replay::{replay, ClusterRun};
use crate::error::{usage, Interrupted};
use crate::source;
use crate::table::{fmt_us, Table};
use crate::{cancel, print};

const EXAMPLES: &str = "\
Examples:
  tidepool cluster up --nodes 3                       # local broker + 3 node processes
  tidepool cluster replay --nats nats://127.0.0.1:4222 -w io
  tidepool cluster replay --local 3 -w 'poisson:rate=2000,service=exp:20ms,free=100,n=5000'
  tidepool cluster status --nats nats://127.0.0.1:4222
  tidepool cluster limit thumbnail --concurrency 3 --rate 20/s
  tidepool cluster chaos --json";

/// Options of `tidepool cluster`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct ClusterArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ClusterCommand,
}

/// The `cluster` subcommands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start a local broker and node processes; print how to submit and stop.
    #[command(
        after_help = "Examples:\n  tidepool cluster up --nodes 3\n  tidepool cluster up --nodes 2 --policy frequency --queue hybrid --port 4222"
    )]
    Up(UpArgs),
    /// Replay a workload across the cluster: response, wait, turnaround, pool sizes.
    #[command(
        after_help = "Examples:\n  tidepool cluster replay --nats nats://127.0.0.1:4222 -w io\n  tidepool cluster replay --local 3 -w 'poisson:rate=1000,service=exp:20ms,free=100,n=5000' --json"
    )]
    Replay(ReplayArgs),
    /// Per node: pool size, in flight, completed, failures.
    #[command(
        after_help = "Examples:\n  tidepool cluster status --nats nats://127.0.0.1:4222\n  tidepool cluster status --json"
    )]
    Status(StatusArgs),
    /// Set, change or clear a cluster-wide limit of one task name.
    #[command(
        after_help = "Examples:\n  tidepool cluster limit thumbnail --concurrency 3\n  tidepool cluster limit mail --rate 20/s\n  tidepool cluster limit mail --concurrency 5 --rate 300/m\n  tidepool cluster limit mail --clear\n\nEvery node applies a change to the next request it starts (within milliseconds);\n`tidepool cluster status` shows the limits."
    )]
    Limit(LimitArgs),
    /// Serve a live web page of the cluster: nodes, queues, throughput, limits.
    #[command(
        after_help = "Examples:\n  tidepool cluster dashboard --nats nats://127.0.0.1:4222 --addr 127.0.0.1:8080\n\nOpen http://127.0.0.1:8080/ in a browser; the page updates every second.\nStop with Ctrl-C."
    )]
    Dashboard(DashboardArgs),
    /// Kill a node and restart the broker mid-run; count lost and duplicate results.
    #[command(
        after_help = "Examples:\n  tidepool cluster chaos --json\n  tidepool cluster chaos --requests 2000 --nodes 3 --task 20ms"
    )]
    Chaos(ChaosArgs),
}

/// How local node processes run (`up`, `replay --local`).
#[derive(Debug, Clone, Args)]
pub struct LocalNodeArgs {
    /// Sizing policy of each node's pool (auto, frequency, fixed:N, ...).
    #[arg(long, value_name = "SPEC", default_value = "auto")]
    pub policy: String,
    /// Queue flavor of each node's pool (lock-free, mutex, spin, hybrid).
    #[arg(long, value_name = "FLAVOR", default_value = "lock-free")]
    pub queue: String,
    /// Upper bound of each node's pool.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_threads: usize,
}

impl LocalNodeArgs {
    fn check(&self) -> anyhow::Result<()> {
        let spec = PolicySpec::parse(&self.policy).map_err(|e| usage(e.to_string()))?;
        if spec == PolicySpec::ThreadPerRequest {
            return Err(usage(
                "--policy tpr is not a pool policy: a node needs a pool",
            ));
        }
        self.queue
            .parse::<QueueFlavor>()
            .map_err(|e| usage(e.to_string()))?;
        if !(1..=tidepool::MAX_THREADS).contains(&self.max_threads) {
            return Err(usage(format!(
                "--max-threads {} must be between 1 and {}",
                self.max_threads,
                tidepool::MAX_THREADS
            )));
        }
        Ok(())
    }
}

/// `cluster up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Node processes to start (1..=64).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub nodes: usize,
    /// Broker port (default: a free one).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Keep the broker's store (and node logs) here instead of a temporary directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub local: LocalNodeArgs,
}

/// `cluster replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub broker: BrokerArgs,
    /// Workload: suite name, generator spec or trace file.
    #[arg(long, short, value_name = "WORKLOAD")]
    pub workload: String,
    /// Replay speed: 2 halves every arrival gap.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub speed: f64,
    /// Start a private broker and this many local nodes for the run (ignores --nats).
    #[arg(long, value_name = "N")]
    pub local: Option<usize>,
    #[command(flatten)]
    pub nodes: LocalNodeArgs,
    /// Give up waiting for results this long after the last submission (1s..=1d).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration::result_timeout)]
    pub timeout: Duration,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
}

/// `cluster status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The broker.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// How long to listen for the nodes' reports (they report twice a
    /// second; 100ms..=1m).
    #[arg(long, value_name = "DURATION", default_value = "1500ms", value_parser = duration::listen)]
    pub listen: Duration,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `cluster dashboard`.
#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// The broker.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Where to serve the page (an IP address and a port).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8080", value_parser = tidepool_cluster::args::socket_addr)]
    pub addr: std::net::SocketAddr,
}

/// `cluster limit`.
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// The broker.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// The task name.
    #[arg(value_name = "TASK")]
    pub task: String,
    /// At most N of this task running at once, cluster-wide (1..=100000).
    #[arg(long, value_name = "N", conflicts_with = "clear")]
    pub concurrency: Option<u32>,
    /// At most R started per second, cluster-wide: N/s, N/m, N/h or N/d.
    #[arg(long, value_name = "R/s", value_parser = tidepool_cluster::limits::parse_rate, conflicts_with = "clear")]
    pub rate: Option<f64>,
    /// Remove the task's limit.
    #[arg(long)]
    pub clear: bool,
}

/// `cluster chaos`.
#[derive(Debug, Args)]
pub struct ChaosArgs {
    /// Requests to submit.
    #[arg(long, short = 'n', value_name = "N", default_value_t = 10_000)]
    pub requests: usize,
    /// Node processes (one is killed).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub nodes: usize,
    /// How long each request sleeps (0s..=1m).
    #[arg(long, value_name = "DURATION", default_value = "20ms", value_parser = duration::task_length)]
    pub task: Duration,
    /// Pool limit of each node.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_threads: usize,
    /// Ack wait: how soon the killed node's requests go to the others (1s..=1h).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::ack_wait)]
    pub ack_wait: Duration,
    /// Keep node logs, journals and the broker store here.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print the JSON report only.
    #[arg(long)]
    pub json: bool,
}

/// Run a `cluster` subcommand.
pub fn run(a: ClusterArgs) -> anyhow::Result<()> {
    match a.command {
        ClusterCommand::Up(a) => up(a),
        ClusterCommand::Replay(a) => replay_cmd(a),
        ClusterCommand::Status(a) => status_cmd(a),
        ClusterCommand::Limit(a) => limit_cmd(a),
        ClusterCommand::Dashboard(a) => dashboard_cmd(a),
        ClusterCommand::Chaos(a) => chaos_cmd(a),
    }
}

/// Nodes are this same program's `node` subcommand.
fn node_command() -> anyhow::Result<NodeCommand> {
    let exe = std::env::current_exe()?;
    Ok(NodeCommand {
        program: exe,
        prefix: vec!["node".into()],
    })
}

/// Resolves once Ctrl-C or SIGTERM raised the command's cancel flag.
fn interrupted() -> impl std::future::Future<Output = ()> {
    tidepool_cluster::args::raised(cancel::flag())
}

/// Start a private broker and `n` node processes (stopped when the guard is
/// dropped). A Ctrl-C during the start stops what was started and is an
/// [`Interrupted`] error.
fn start_local(
    n: usize,
    nodes: &LocalNodeArgs,
    dir: Option<&std::path::Path>,
    port: Option<u16>,
    log_nodes: bool,
) -> anyhow::Result<LocalCluster> {
    nodes.check()?;
    if !(1..=64).contains(&n) {
        return Err(usage(format!("--nodes {n} must be between 1 and 64")));
    }
    let broker = match (dir, port) {
        (None, None) => NatsServer::start()?,
        (dir, port) => {
            let dir = dir.map(PathBuf::from).unwrap_or_else(|| {
                std::env::temp_dir().join(format!("tidepool-cluster-{}", std::process::id()))
            });
            let port = match port {
                Some(p) => p,
                None => tidepool_cluster::server::free_port()?,
            };
            NatsServer::start_in(&dir, port)?
        }
    };
    let mut cluster = LocalCluster {
        nodes: Vec::new(),
        broker,
        grace: Duration::from_secs(30),
    };
    let cmd = node_command()?;
    for i in 0..n {
        if cancel::requested() {
            break;
        }
        let args = vec![
            "--nats".to_string(),
            cluster.broker.url(),
            "--name".into(),
            format!("node-{i}"),
            "--policy".into(),
            nodes.policy.clone(),
            "--queue".into(),
            nodes.queue.clone(),
            "--max-threads".into(),
            nodes.max_threads.to_string(),
        ];
        let log = dir.map(|d| d.join(format!("node-{i}.log")));
        let log = if log_nodes { log } else { None };
        cluster.nodes.push(cmd.spawn(args, log.as_deref())?);
    }
    if cancel::requested() {
        let started = cluster.nodes.len();
        drop(cluster);
        eprintln!("interrupted while starting: stopped {started} nodes and the broker");
        return Err(Interrupted.into());
    }
    Ok(cluster)
}

fn up(a: UpArgs) -> anyhow::Result<()> {
    let _ = cancel::flag(); // from here on Ctrl-C (or SIGTERM) stops what was started
    let cluster = start_local(a.nodes, &a.local, a.dir.as_deref(), a.port, true)?;
    let url = cluster.broker.url();
    print(&format!(
        "broker: {url} (pid {}, log {})\nnodes:  {} × tidepool node --policy {} --queue {}\n\n\
         submit: tidepool cluster replay --nats {url} -w io\n\
         status: tidepool cluster status --nats {url}\n\
         stop:   Ctrl-C (or SIGTERM) here: the nodes finish what they run, then the broker stops\n",
        cluster.broker.pid().unwrap_or(0),
        cluster.broker.log_path().display(),
        a.nodes,
        a.local.policy,
        a.local.queue,
    ));
    while !cancel::requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("stopping {} nodes and the broker", a.nodes);
    drop(cluster);
    Ok(())
}

fn replay_cmd(a: ReplayArgs) -> anyhow::Result<()> {
    let settings = a.broker.settings().map_err(usage)?;
    if !(a.speed.is_finite() && a.speed > 0.0) {
        return Err(usage(format!("--speed {} must be > 0", a.speed)));
    }
    let w = source::load(&a.workload, 1.0)?;
    let _ = cancel::flag(); // from here on Ctrl-C (or SIGTERM) stops what was started
    let started = std::time::Instant::now();
    let local = match a.local {
        Some(n) => Some(start_local(n, &a.nodes, None, None, false)?),
        None => None,
    };
    let url = local
        .as_ref()
        .map_or(a.broker.nats.url.clone(), |c| c.broker.url());
    let cpu0 = local.as_ref().and_then(|c| c.broker.cpu_time());
    let work = async {
        let client = Client::connect(&url, &settings, Duration::from_secs(30)).await?;
        if let Some(n) = a.local {
            // Let the local nodes connect before the clock starts.
            status::wait_for_nodes(client.nats(), n, Duration::from_secs(60)).await?;
        }
        replay(&client, &w.trace, a.speed, a.timeout).await
    };
    let run = block_on(until(work, interrupted()))?;
    let Some(run) = run else {
        let stopped = local
            .as_ref()
            .map(|c| format!("; stopped {} nodes and the broker", c.nodes.len()));
        drop(local);
        eprintln!(
            "cluster replay: interrupted after {:.1} s, before all results were in{}",
            started.elapsed().as_secs_f64(),
            stopped.unwrap_or_else(|| "; requests already submitted stay queued".into())
        );
        return Err(Interrupted.into());
    };
    let mut run = run?;
    if let (Some(c0), Some(c1)) = (cpu0, local.as_ref().and_then(|c| c.broker.cpu_time())) {
        run.broker_cpu_us_per_request =
            Some((c1 - c0).as_secs_f64() * 1e6 / run.requests.max(1) as f64);
    }
    drop(local);
    if a.json {
        print(&format!("{}\n", serde_json::to_string(&run)?));
    } else {
        print(&render(&run));
    }
    Ok(())
}

fn render(r: &ClusterRun) -> String {
    let m = &r.metrics;
    let mut t = Table::new(vec!["metric", "mean", "p50", "p99", "max"]);
    for (name, l) in [
        ("response (submit → stored)", &m.submit_blocked),
        ("wait (stored → started)", &m.wait),
        ("processing", &m.processing),
        ("turnaround (submit → finished)", &m.turnaround),
        ("submit → start (broker hop)", &r.submit_to_start),
        ("end to end (submit → result)", &r.end_to_end),
    ] {
        t.row(vec![
            name.to_string(),
            fmt_us(l.mean_us),
            fmt_us(l.p50_us),
            fmt_us(l.p99_us),
            fmt_us(l.max_us),
        ]);
    }
    let mut nodes = Table::new(vec![
        "node",
        "results",
        "pool min",
        "pool mean",
        "pool max",
        "pool last",
    ]);
    for (node, n) in &r.per_node {
        let sizes: Vec<f64> = r
            .pool_sizes
            .get(node)
            .map(|v| v.iter().map(|p| p[1]).collect())
            .unwrap_or_default();
        let (min, max) = sizes
            .iter()
            .fold((f64::INFINITY, 0f64), |(a, b), &s| (a.min(s), b.max(s)));
        let mean = sizes.iter().sum::<f64>() / sizes.len().max(1) as f64;
        let last = sizes.last().copied().unwrap_or(0.0);
        nodes.row(vec![
            node.clone(),
            n.to_string(),
            if sizes.is_empty() {
                "-".into()
            } else {
                format!("{min:.0}")
            },
            format!("{mean:.1}"),
            format!("{max:.0}"),
            format!("{last:.0}"),
        ]);
    }
    let cpu = r.broker_cpu_us_per_request.map_or(String::new(), |c| {
        format!("broker CPU: {c:.0} µs per request\n")
    });
    format!(
        "{}: {} requests, {} failed, {:.0} results/s over {:.2} s\n{cpu}\n{}\n{}",
        r.workload,
        r.requests,
        r.failed,
        m.throughput,
        m.duration_s,
        t.render(),
        nodes.render()
    )
}

fn status_cmd(a: StatusArgs) -> anyhow::Result<()> {
    let (nodes, limits) = block_on(async {
        let client = tidepool_cluster::protocol::connect(
            &a.nats.url,
            "tidepool-status",
            Some(Duration::from_secs(10)),
        )
        .await?;
        let js = tidepool_cluster::async_nats::jetstream::new(client.clone());
        // No bucket yet (nothing ever connected): no limits.
        let limits = tidepool_cluster::limits::all(&js).await.unwrap_or_default();
        anyhow::Ok((status::collect(&client, a.listen).await?, limits))
    })??;
    if a.json {
        let list: Vec<_> = nodes.values().collect();
        let out = serde_json::json!({ "nodes": list, "limits": limits });
        print(&format!("{out}\n"));
        return Ok(());
    }
    let mut text = String::new();
    if nodes.is_empty() {
        text += &format!("no node reported within {:?} on {}\n", a.listen, a.nats.url);
    }
    let mut t = Table::new(vec![
        "node",
        "policy",
        "pool",
        "target",
        "in flight",
        "completed",
        "failures",
        "redelivered",
        "dead",
        "cancelled",
        "delayed",
    ]);
    for s in nodes.values() {
        t.row(vec![
            s.node.clone(),
            s.policy.clone(),
            s.pool_size.to_string(),
            s.target_size.to_string(),
            s.in_flight.to_string(),
            s.completed.to_string(),
            s.failures.to_string(),
            s.redelivered.to_string(),
            s.dead_lettered.to_string(),
            s.cancelled.to_string(),
            s.delayed.to_string(),
        ]);
    }
    if !nodes.is_empty() {
        text += &t.render();
    }
    text += "\nlimits:";
    if limits.is_empty() {
        text += " none\n";
    } else {
        text += "\n";
        for (task, l) in &limits {
            text += &format!("  {task}: {}\n", l.describe());
        }
    }
    print(&text);
    Ok(())
}

fn dashboard_cmd(a: DashboardArgs) -> anyhow::Result<()> {
    let _ = cancel::flag(); // Ctrl-C (or SIGTERM) stops the server
    block_on(async {
        let listener = tidepool_cluster::http::bind(a.addr, "--addr").await?;
        eprintln!(
            "dashboard of {} at http://{}/ (Ctrl-C stops)",
            a.nats.url,
            listener.local_addr()?
        );
        tidepool_cluster::dashboard::serve(&a.nats.url, listener, interrupted()).await
    })??;
    Ok(())
}

fn limit_cmd(a: LimitArgs) -> anyhow::Result<()> {
    use tidepool_cluster::limits::{self, Limit};
    if !tidepool_cluster::protocol::valid_task_name(&a.task) {
        return Err(usage(format!(
            "TASK `{}` is not a task name: use 1 to 64 of A-Z a-z 0-9 - _",
            a.task
        )));
    }
    let limit = if a.clear {
        None
    } else {
        let l = Limit {
            concurrency: a.concurrency,
            rate_per_s: a.rate,
        };
        l.validate().map_err(usage)?;
        Some(l)
    };
    block_on(async {
        let client = Client::connect(
            &a.nats.url,
            &tidepool_cluster::Settings::default(),
            Duration::from_secs(10),
        )
        .await?;
        limits::set(client.jetstream(), &a.task, limit).await
    })??;
    match limit {
        Some(l) => print(&format!("{}: {}\n", a.task, l.describe())),
        None => print(&format!("{}: no limit\n", a.task)),
    }
    Ok(())
}

fn chaos_cmd(a: ChaosArgs) -> anyhow::Result<()> {
    let mut opts = ChaosOptions::new(node_command()?);
    opts.requests = a.requests;
    opts.nodes = a.nodes;
    opts.task = a.task;
    opts.max_threads = a.max_threads;
    opts.ack_wait = a.ack_wait;
    opts.verbose = !a.json;
    let _ = cancel::flag(); // from here on Ctrl-C (or SIGTERM) stops what was started
    let (dir, _temp) = match &a.dir {
        Some(d) => (d.clone(), None),
        None => {
            let d = chaos::temp_dir();
            (d.clone(), Some(RemoveOnDrop(d)))
        }
    };
    // The scenario stops its nodes and broker before it returns (also when
    // interrupted); `_temp` then removes their store and logs.
    let report = block_on(chaos::run(&opts, &dir, interrupted()))?.map_err(|e| {
        if e.to_string().contains("must be between") {
            usage(e.to_string())
        } else {
            e
        }
    })?;
    print(&format!("{}\n", serde_json::to_string(&report)?));
    if report.interrupted {
        return Err(Interrupted.into());
    }
    if !report.ok {
        anyhow::bail!("chaos: the goal was not met (lost, duplicate or unexplained executions)");
    }
    Ok(())
}

/// A temporary directory removed when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
