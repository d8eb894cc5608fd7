//! The database under the service: a PostgreSQL cluster from the Debian
//! package, made and started for one benchmark run, filled with pgbench's
//! standard schema, stopped and removed when the [`Database`] drops (or on
//! Ctrl-C or SIGTERM, through [`cleanup`]).
//!
//! PostgreSQL refuses to run as root. When this process is root, the
//! cluster's programs run as the system user [`OS_USER`] (created with
//! `useradd --system` when missing) and its directory is handed to that
//! user; otherwise they run as the current user. The cluster lives in a
//! fresh directory under the temp dir (data directory, Unix socket, log),
//! listens on `127.0.0.1` only, on a free port, with `trust`
//! authentication for the role [`ROLE`]. `fsync` stays on: writes wait on
//! the disk, as in production.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::cleanup::{self, Undo};
use super::procfs;

/// The system user the cluster runs as when the benchmark runs as root.
pub const OS_USER: &str = "tidepool-bench";
/// The database role the service connects as.
pub const ROLE: &str = "bench";
/// Prefix of the cluster's temporary directory.
pub const DIR_PREFIX: &str = "tidepool-server-";

/// How to make the cluster.
#[derive(Debug, Clone)]
pub struct DbOptions {
    /// pgbench scale: 100,000 accounts (about 15 MB) per unit.
    pub scale: u32,
    /// PostgreSQL's `shared_buffers` (e.g. `16MB`): smaller than the data,
    /// so lookups also read from the OS cache.
    pub shared_buffers: String,
    /// PostgreSQL's `max_connections`.
    pub max_connections: u32,
}

/// A running cluster; stopped and removed on drop.
#[derive(Debug)]
pub struct Database {
    dir: PathBuf,
    port: u16,
    pid: i32,
    accounts: i64,
    // Dropped in this order: stop the server, then remove its directory.
    _server: Undo,
    _dir: Undo,
}

impl Database {
    /// Make, start and fill a cluster. Errors name the step that failed.
    pub fn start(opts: &DbOptions) -> Result<Database, String> {
        let bin = pg_bin_dir()?;
        let owner = owner()?;
        let dir = make_dir(owner)?;
        let removal = {
            let dir = dir.clone();
            cleanup::register(move || {
                let _ = fs::remove_dir_all(&dir);
            })
        };
        let data = dir.join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", ROLE, "--auth=trust", "-E", "UTF8", "--no-sync"])
            .current_dir(&dir);
        run_as(initdb, owner, &dir.join("initdb.log"), "initdb")?;

        let port = free_port()?;
        let log = fs::File::create(dir.join("postgres.log"))
            .map_err(|e| format!("cannot create the database log: {e}"))?;
        // Fast shutdown should the benchmark die where no undo runs.
        let mut postgres = cleanup::dies_with_spawner(
            cleanup::detached(Command::new(bin.join("postgres"))),
            libc::SIGINT,
        );
        postgres
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(&dir)
            .args(["-p", &port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", &format!("shared_buffers={}", opts.shared_buffers)])
            .args(["-c", &format!("max_connections={}", opts.max_connections)])
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log);
        if let Some((uid, gid)) = owner {
            postgres.uid(uid).gid(gid);
        }
        let child = postgres
            .spawn()
            .map_err(|e| format!("cannot start postgres: {e}"))?;
        let pid = child.id() as i32;
        let server = cleanup::register(move || {
            // SIGINT is PostgreSQL's fast shutdown: backends end, no checkpoint wait.
            cleanup::stop_process(pid, libc::SIGINT, Duration::from_secs(20));
        });
        let db = Database {
            dir,
            port,
            pid,
            accounts: i64::from(opts.scale) * 100_000,
            _server: server,
            _dir: removal,
        };
        db.wait_ready(Duration::from_secs(60))?;
        db.fill(&bin, opts.scale)?;
        Ok(db)
    }

    /// The connection string of the service's clients.
    pub fn conninfo(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user={ROLE} dbname=postgres connect_timeout=10",
            self.port
        )
    }

    /// The TCP port the cluster listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The cluster's temporary directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Rows in `pgbench_accounts` (ids `1..=accounts`).
    pub fn accounts(&self) -> i64 {
        self.accounts
    }

    fn wait_ready(&self, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            match postgres::Client::connect(&self.conninfo(), postgres::NoTls) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!(
                        "postgres did not accept connections within {within:?}: {e}; log:\n{}",
                        self.log_tail()
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
            // SAFETY: signal 0 only checks that the process exists.
            if unsafe { libc::kill(self.pid, 0) } != 0 {
                return Err(format!(
                    "postgres exited at start; log:\n{}",
                    self.log_tail()
                ));
            }
        }
    }

    fn fill(&self, bin: &Path, scale: u32) -> Result<(), String> {
        let out = cleanup::detached(Command::new(bin.join("pgbench")))
            .args(["-i", "-q", "-s", &scale.to_string()])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", ROLE])
            .arg("postgres")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run pgbench: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "pgbench -i failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` holding `postgres`.
fn pg_bin_dir() -> Result<PathBuf, String> {
    let root = Path::new("/usr/lib/postgresql");
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir(root)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let version = e.file_name().to_str()?.parse::<u32>().ok()?;
                    let bin = e.path().join("bin");
                    bin.join("postgres").exists().then_some((version, bin))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "PostgreSQL not found under /usr/lib/postgresql: run scripts/setup.sh \
         (Debian package `postgresql`)"
            .to_string()
    })
}

/// The uid and gid to run the cluster as: [`OS_USER`]'s when we are root
/// (creating the user if needed), `None` (ourselves) otherwise.
fn owner() -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    if id(&["-u", OS_USER]).is_err() {
        let out = Command::new("useradd")
            .args(["--system", "--no-create-home", "--home-dir", "/nonexistent"])
            .args(["--shell", "/usr/sbin/nologin", OS_USER])
            .output()
            .map_err(|e| format!("cannot run useradd: {e}"))?;
        // Another run may have created it meanwhile: check again below.
        if !out.status.success() && id(&["-u", OS_USER]).is_err() {
            return Err(format!(
                "cannot create the system user {OS_USER}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    Ok(Some((id(&["-u", OS_USER])?, id(&["-g", OS_USER])?)))
}

fn id(args: &[&str]) -> Result<u32, String> {
    let out = Command::new("id")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run id: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|_| format!("no such user: {}", args[1]))
}

/// A fresh directory `DIR_PREFIX<pid>-<n>` in the temp dir, owned by `owner`.
fn make_dir(owner: Option<(u32, u32)>) -> Result<PathBuf, String> {
    remove_stale_dirs(&std::env::temp_dir());
    for n in 0..1000 {
        let dir = std::env::temp_dir().join(format!("{DIR_PREFIX}{}-{n}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => {
                fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| format!("cannot set the mode of {}: {e}", dir.display()))?;
                if let Some((uid, gid)) = owner {
                    std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                        .map_err(|e| format!("cannot hand {} to {OS_USER}: {e}", dir.display()))?;
                }
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
    }
    Err("cannot find a free temporary directory name".into())
}

/// Remove the directories in `tmp` that a benchmark which died where no
/// undo could run left behind: its pid gone, no process mentioning them
/// (its postmaster stops by itself, see `cleanup::dies_with_spawner`).
fn remove_stale_dirs(tmp: &Path) {
    let Ok(entries) = fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(DIR_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let path = e.path();
        if !cleanup::exists(pid)
            && procfs::processes_mentioning(&path.display().to_string()).is_empty()
        {
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// Run a short cluster command as `owner`, its output to `log`.
fn run_as(
    mut cmd: Command,
    owner: Option<(u32, u32)>,
    log: &Path,
    what: &str,
) -> Result<(), String> {
    if let Some((uid, gid)) = owner {
        cmd.uid(uid).gid(gid);
    }
    let out = cleanup::detached(cmd)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    let _ = fs::write(log, [out.stdout.as_slice(), &out.stderr].concat());
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_directories_go_and_live_ones_stay() {
        let tmp = tempfile::tempdir().unwrap();
        // No process has this pid (pid_max is at most 2^22).
        let stale = tmp.path().join(format!("{DIR_PREFIX}2147483646-0"));
        let ours = tmp
            .path()
            .join(format!("{DIR_PREFIX}{}-0", std::process::id()));
        let other = tmp.path().join("tidepool-other-2147483646-0");
        for dir in [&stale, &ours, &other] {
            fs::create_dir_all(dir.join("data")).unwrap();
        }
        remove_stale_dirs(tmp.path());
        assert!(!stale.exists(), "a dead benchmark's directory stayed");
        assert!(ours.exists() && other.exists());
    }
}
