//! `tidepool-bench server`: tidepool's policies sizing the handler threads
//! of a real HTTP service over a real PostgreSQL, under real load, against
//! static sizes, thread-per-request and tokio's `spawn_blocking`.
//!
//! ```text
//! cargo run --release -p tidepool-bench -- server                # table
//! cargo run --release -p tidepool-bench -- server --json         # JSON
//! cargo run --release -p tidepool-bench -- server --out s.json  # table, and JSON to a file
//! cargo run --release -p tidepool-bench -- server --quick --json # CI smoke run
//! ```
//!
//! One run: make and fill a PostgreSQL cluster ([`db`]); then, for every
//! repeat, every group of phases and every contender (in an order rotated
//! per repeat), start the service ([`service`]) with the contender running
//! its handlers ([`contender`], [`handlers`]), check that every endpoint
//! answers 200, and drive it with `wrk` ([`load`]) for each phase of the
//! group back to back, measuring threads, connections and CPU ([`procfs`]);
//! stop the service. The groups: one steady mix per connection count, and
//! the mix change (lookups, then external waits, then writes) against one
//! running service. Finally the database is stopped and its directory
//! removed ([`cleanup`] also does this on Ctrl-C and SIGTERM), the removal is
//! checked, and the medians, spreads and oracle ratios are printed ([`report`]).

pub mod cleanup;
pub mod connections;
pub mod contender;
pub mod db;
pub mod handlers;
pub mod load;
pub mod procfs;
pub mod report;
pub mod service;
pub mod spans;
pub mod stalls;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::builder::TypedValueParser;
use clap::Args;
use serde::Serialize;

use crate::harness::{fmt_load, rotated};
use contender::Contender;
use db::{Database, DbOptions};
use handlers::{ConnectionPool, Endpoint, Handlers};
use load::Mix;
use report::{Phase, PoolView, Row, Run};
use service::Service;

/// `--warmup-secs` unless given (or `--quick`, which makes it 0).
const DEFAULT_WARMUP_SECS: u64 = 2;

/// Options of `server`.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// wrk connection counts of the steady phases (one phase each).
    #[arg(long, value_delimiter = ',', default_values_t = [8usize, 64, 256],
          value_parser = clap::value_parser!(u64).range(1..=10_000).map(|v| v as usize))]
    connections: Vec<usize>,
    /// Endpoint weights of the steady phases.
    #[arg(long, default_value = "lookup=70,range=10,write=10,external=10")]
    mix: Mix,
    /// wrk connections of the mix-change phases (lookups → external → writes); 0 skips them.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(0..=10_000).map(|v| v as usize))]
    change_connections: usize,
    /// Length of each phase, in seconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    phase_secs: u64,
    /// Seconds of load before each group's measured phases, not measured
    /// (the first phase's mix and connections): every contender starts its
    /// threads and database connections, and a self-sizing pool finds its
    /// size. 0 measures the cold start. [default: 2; 0 with `--quick`]
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    warmup_secs: Option<u64>,
    /// Database connections the handlers open before each contender's
    /// warm-up, as a connection pool with that many idle connections would
    /// (below `--max-connections`). 0: they are opened as requests need them.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    open_connections: u32,
    /// Where a request's database connection comes from: its handler
    /// thread's own (`per-thread`), or a pool that every thread borrows from
    /// for one query (`shared`), at most one connection per thread.
    #[arg(long, value_enum, default_value_t = ConnectionPool::PerThread)]
    connection_pool: ConnectionPool,
    /// Repeats; each runs every contender once per phase, in a rotated order.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100).map(|v| v as usize))]
    repeats: usize,
    /// Contenders: tidepool policy specs (`auto`, `watermark`, `hill-climb`,
    /// `fixed:K`, `tpr`, …) and `tokio`.
    #[arg(long, value_delimiter = ',', default_values_t = ["auto", "watermark", "hill-climb", "tpr", "tokio"].map(|s| s.parse::<Contender>().expect("valid")))]
    contenders: Vec<Contender>,
    /// Static pool sizes added as `fixed:K` contenders: the oracle's sweep.
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 4, 8, 16, 32, 64],
          value_parser = clap::value_parser!(u64).range(1..=4_096).map(|v| v as usize))]
    sizes: Vec<usize>,
    /// Fewest threads of the adaptive pools (they run with `min..=max`;
    /// `min` below `max`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4_096).map(|v| v as usize))]
    min_threads: usize,
    /// Most threads of the adaptive pools (they run with `min..=max`).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=4_096).map(|v| v as usize))]
    max_threads: usize,
    /// pgbench scale (100,000 accounts, about 15 MB, per unit).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    scale: u32,
    /// PostgreSQL's shared_buffers (keep it below the data's size).
    #[arg(long, default_value = "16MB")]
    shared_buffers: String,
    /// PostgreSQL's max_connections.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(10..=10_000))]
    max_connections: u32,
    /// wrk's per-request timeout, in seconds.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=600))]
    timeout_secs: u64,
    /// CI smoke run: scale 1, 8 connections, 1-second phases, one repeat,
    /// `auto,watermark,hill-climb,tpr,tokio` and sizes 2 and 8.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the JSON object to this file (created before the run).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

impl ServerArgs {
    /// The warm-up, in seconds.
    fn warmup(&self) -> u64 {
        self.warmup_secs.unwrap_or(DEFAULT_WARMUP_SECS)
    }

    fn quickened(mut self) -> Self {
        if self.quick {
            self.connections = vec![8];
            self.change_connections = 8;
            self.phase_secs = 1;
            self.warmup_secs = self.warmup_secs.or(Some(0));
            self.repeats = 1;
            self.sizes = vec![2, 8];
            self.max_threads = 32;
            self.scale = 1;
            self.shared_buffers = "8MB".into();
            self.max_connections = 100;
        }
        self
    }
}

/// One phase to run: its name, connections and mix.
#[derive(Debug, Clone)]
struct PhaseSpec {
    name: String,
    connections: usize,
    mix: Mix,
}

/// The JSON document.
#[derive(Debug, Serialize)]
struct Document {
    load_average_before: Option<[f64; 3]>,
    load_average_after: Option<[f64; 3]>,
    phase_secs: u64,
    warmup_secs: u64,
    open_connections: u32,
    connection_pool: ConnectionPool,
    repeats: usize,
    database: DbReport,
    phases: Vec<Phase>,
}

#[derive(Debug, Serialize)]
struct DbReport {
    scale: u32,
    shared_buffers: String,
    port: u16,
    dir: String,
    /// The directory is gone, no process mentions it, the port is free.
    removed: bool,
}

/// Run the server benchmark.
pub fn server(args: ServerArgs) -> Result<(), String> {
    let args = args.quickened();
    if args.connections.is_empty() && args.change_connections == 0 {
        return Err("--connections: give at least one, or a --change-connections above 0".into());
    }
    let mut contenders = args.contenders.clone();
    for &k in &args.sizes {
        let fixed = Contender::Tidepool(tidepool::policy::PolicySpec::Fixed(k));
        if !contenders.contains(&fixed) {
            contenders.push(fixed);
        }
    }
    if contenders.is_empty() {
        return Err("--contenders: give at least one".into());
    }
    if args.min_threads >= args.max_threads && contenders.iter().any(Contender::is_adaptive) {
        return Err(format!(
            "--min-threads {} must be below --max-threads {}: an adaptive pool needs room to move",
            args.min_threads, args.max_threads
        ));
    }
    if args.open_connections >= args.max_connections {
        return Err(format!(
            "--open-connections {} must be below --max-connections {}: the handlers need room \
             past the connections opened ahead",
            args.open_connections, args.max_connections
        ));
    }
    if !command_exists("wrk") {
        return Err("wrk not found: run scripts/setup.sh (Debian package `wrk`)".into());
    }
    let mut out = match &args.out {
        Some(path) => Some(
            std::fs::File::create(path)
                .map_err(|e| format!("--out: cannot create {}: {e}", path.display()))?,
        ),
        None => None,
    };
    cleanup::on_stop_signal()?;
    let load_before = tidepool::sys::load_average();

    let db = Database::start(&DbOptions {
        scale: args.scale,
        shared_buffers: args.shared_buffers.clone(),
        max_connections: args.max_connections,
    })?;
    eprintln!(
        "database ready: dir={} port={} pid={}",
        db.dir().display(),
        db.port(),
        db.pid()
    );
    let groups = groups(&args);
    let flat: Vec<&PhaseSpec> = groups.iter().flatten().collect();
    // runs[phase][contender] = one Run per repeat
    let mut runs = vec![vec![Vec::new(); contenders.len()]; flat.len()];
    for rep in 0..args.repeats {
        let mut first_phase = 0;
        for group in &groups {
            for ci in rotated(&(0..contenders.len()).collect::<Vec<_>>(), rep) {
                let c = &contenders[ci];
                eprintln!(
                    "repeat {}/{}: {c} on {}",
                    rep + 1,
                    args.repeats,
                    group[0].name
                );
                let measured = run_group(&args, &db, c, group)?;
                for (i, r) in measured.into_iter().enumerate() {
                    runs[first_phase + i][ci].push(r);
                }
            }
            first_phase += group.len();
        }
    }
    let (port, dir, pid) = (db.port(), db.dir().to_path_buf(), db.pid());
    drop(db);
    let removed = database_removed(port, &dir, pid);

    let phases: Vec<Phase> = flat
        .iter()
        .zip(&runs)
        .map(|(spec, per_contender)| {
            let rows = contenders
                .iter()
                .zip(per_contender)
                .map(|(c, r)| Row::of(&c.to_string(), r))
                .collect();
            Phase::new(
                spec.name.clone(),
                spec.connections,
                spec.mix.to_string(),
                rows,
                |name| name.starts_with("fixed:"),
            )
        })
        .collect();
    let doc = Document {
        load_average_before: load_before,
        load_average_after: tidepool::sys::load_average(),
        phase_secs: args.phase_secs,
        warmup_secs: args.warmup(),
        open_connections: args.open_connections,
        connection_pool: args.connection_pool,
        repeats: args.repeats,
        database: DbReport {
            scale: args.scale,
            shared_buffers: args.shared_buffers.clone(),
            port,
            dir: dir.display().to_string(),
            removed,
        },
        phases,
    };
    let json = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    if let Some(file) = &mut out {
        writeln!(file, "{json}").map_err(|e| format!("--out: {e}"))?;
    }
    if args.json {
        println!("{json}");
    } else {
        println!(
            "server benchmark: {} s phases after {} s of warm-up, {} repeats, load average \
             {} → {}; req/s and latencies are medians over repeats; thr+ and dbconn \
             count what the phase created; the paired ratio is to the oracle's run of \
             the same repeat",
            args.phase_secs,
            args.warmup(),
            args.repeats,
            fmt_load(doc.load_average_before),
            fmt_load(doc.load_average_after)
        );
        print!("{}", report::table(&doc.phases));
    }
    if !removed {
        return Err(format!(
            "the database was not removed cleanly (dir {}, port {port}, pid {pid})",
            dir.display()
        ));
    }
    Ok(())
}

/// The phase groups: one steady mix per connection count, then the mix change.
fn groups(args: &ServerArgs) -> Vec<Vec<PhaseSpec>> {
    let mut groups: Vec<Vec<PhaseSpec>> = args
        .connections
        .iter()
        .map(|&c| {
            vec![PhaseSpec {
                name: format!("mix-c{c}"),
                connections: c,
                mix: args.mix.clone(),
            }]
        })
        .collect();
    if args.change_connections > 0 {
        groups.push(
            [Endpoint::Lookup, Endpoint::External, Endpoint::Write]
                .into_iter()
                .map(|e| PhaseSpec {
                    name: format!("change-{}", e.name()),
                    connections: args.change_connections,
                    mix: Mix::only(e),
                })
                .collect(),
        );
    }
    groups
}

/// Start the service on `contender`, check its endpoints, warm it up with
/// the first phase's load, run `group`'s phases back to back, stop it.
fn run_group(
    args: &ServerArgs,
    db: &Database,
    contender: &Contender,
    group: &[PhaseSpec],
) -> Result<Vec<Run>, String> {
    // A shared connection pool is sized with the threads: no more connections
    // than handlers running at once (or opened ahead), within the database's.
    let threads = contender
        .max_threads(args.max_threads)
        .unwrap_or(usize::MAX);
    let max_connections = threads
        .max(args.open_connections as usize)
        .min(args.max_connections as usize);
    let handlers = Arc::new(Handlers::new(
        db.conninfo(),
        db.accounts(),
        args.connection_pool,
        max_connections,
        Duration::from_secs(args.timeout_secs),
    ));
    handlers
        .open_ahead(args.open_connections as usize)
        .map_err(|e| format!("--open-connections {}: {e}", args.open_connections))?;
    let service = Service::start(
        contender.dispatch(args.min_threads..=args.max_threads)?,
        handlers,
    )?;
    check_endpoints(service.addr()).map_err(|e| format!("{contender}: {e}"))?;
    if let (Some(first), true) = (group.first(), args.warmup() > 0) {
        load::run(
            service.addr(),
            &first.mix,
            db.accounts(),
            first.connections,
            Duration::from_secs(args.warmup()),
            Duration::from_secs(args.timeout_secs),
            db.dir(),
        )
        .map_err(|e| format!("{contender}: warm-up: {e}"))?;
    }
    let mut out = Vec::new();
    for phase in group {
        let before = (
            service.counts().threads_created,
            service.db_connections(),
            procfs::own_cpu(),
            procfs::tree_cpu(db.pid()),
        );
        let pool_before = service.pool().map(|p| p.stats());
        service.take_stalls();
        service.take_span_change();
        let peak = AtomicUsize::new(0);
        let done = AtomicBool::new(false);
        let load = std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    peak.fetch_max(service.counts().live_threads, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
            let load = load::run(
                service.addr(),
                &phase.mix,
                db.accounts(),
                phase.connections,
                Duration::from_secs(args.phase_secs),
                Duration::from_secs(args.timeout_secs),
                db.dir(),
            );
            done.store(true, Ordering::Relaxed);
            load
        })?;
        let stalls = service.take_stalls();
        let span_change_pct = service.take_span_change();
        out.push(Run {
            requests_per_sec: load.ok_per_sec(),
            p50_ms: load.p50_us / 1e3,
            p99_ms: load.p99_us / 1e3,
            p999_ms: load.p999_us / 1e3,
            errors: load.errors(),
            timeouts: load.timeout,
            threads_created: service.counts().threads_created - before.0,
            peak_threads: peak.load(Ordering::Relaxed),
            db_connections: service.db_connections() - before.1,
            service_cpu_s: (procfs::own_cpu().saturating_sub(before.2)).as_secs_f64(),
            db_cpu_s: (procfs::tree_cpu(db.pid()).saturating_sub(before.3)).as_secs_f64(),
            stalls: stalls.count,
            longest_stall_ms: stalls.longest_ms,
            span_change_pct,
            pool: service
                .pool()
                .zip(pool_before)
                .map(|(p, b)| pool_view(p, &b)),
        });
    }
    Ok(out)
}

/// What `pool` saw and decided since `before`.
fn pool_view(pool: &tidepool::Pool, before: &tidepool::PoolStats) -> PoolView {
    let now = pool.stats();
    let window = now.since(before);
    let busy = window.service.total().as_secs_f64();
    let share = |d: Option<Duration>| d.filter(|_| busy > 0.0).map(|d| d.as_secs_f64() / busy);
    let mut reasons: Vec<(String, usize)> = Vec::new();
    let moves: Vec<_> = pool
        .decisions()
        .into_iter()
        .filter(|d| d.at >= before.elapsed && d.new_target != d.old_target)
        .collect();
    let raises: Vec<_> = moves
        .iter()
        .filter(|d| d.new_target > d.old_target)
        .collect();
    for d in &raises {
        // The reason's words, without the numbers that differ every time.
        let key: String = d
            .reason
            .chars()
            .take_while(|c| !c.is_ascii_digit())
            .collect();
        let key = format!(
            "{:?}: {}",
            d.trigger,
            key.trim_end_matches([' ', '(', '=', ':'])
        );
        match reasons.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => reasons.push((key, 1)),
        }
    }
    reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
    PoolView {
        target_end: now.target_size,
        spawn_limit_end: now.spawn_limit,
        phi: share(window.worker_cpu_time),
        run_delay_share: share(window.worker_run_delay),
        raises: raises.len(),
        top_raise: reasons.first().map(|(k, n)| format!("{k} ({n})")),
        moves: moves
            .iter()
            .map(|d| {
                format!(
                    "{:.3} {:?} {}->{} {}",
                    d.at.as_secs_f64(),
                    d.trigger,
                    d.old_target,
                    d.new_target,
                    d.reason
                )
            })
            .collect(),
    }
}

/// One request to every endpoint; all must answer 200.
fn check_endpoints(addr: SocketAddr) -> Result<(), String> {
    for e in Endpoint::ALL {
        let status = get(addr, &format!("/{}?aid=1", e.name()))
            .map_err(|err| format!("GET /{}: {err}", e.name()))?;
        if !status.starts_with("HTTP/1.1 200") {
            return Err(format!("GET /{} answered `{status}`", e.name()));
        }
    }
    Ok(())
}

/// The response's first line and body of a `GET` on its own connection.
fn get(addr: SocketAddr, target: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    s.read_to_string(&mut response)?;
    let status = response.lines().next().unwrap_or_default().to_string();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().trim();
    Ok(format!("{status} {body}"))
}

/// No directory, no process mentioning it, the postmaster gone, the port free.
fn database_removed(port: u16, dir: &std::path::Path, pid: i32) -> bool {
    let gone = !dir.exists();
    let no_process = procfs::processes_mentioning(&dir.display().to_string()).is_empty()
        && !cleanup::exists(pid);
    let port_free = std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    gone && no_process && port_free
}

fn command_exists(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}
