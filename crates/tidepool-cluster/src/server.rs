//! A private `nats-server` for tests, demos and `tidepool cluster up`: JetStream
//! on, a free loopback port, a store directory of its own. Dropping the guard
//! stops the server (also when a test panics), so no server outlives its owner.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's `nats-server` package puts the binary (`/usr/sbin` is not on
/// every user's `PATH`).
const KNOWN_PATHS: &[&str] = &["/usr/sbin/nats-server", "/usr/local/bin/nats-server"];

/// How long a starting server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Find the `nats-server` binary: `$TIDEPOOL_NATS_SERVER`, then `PATH`, then
/// the Debian location.
pub fn find_binary() -> io::Result<PathBuf> {
    if let Some(p) = std::env::var_os("TIDEPOOL_NATS_SERVER") {
        return Ok(PathBuf::from(p));
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .map(|d| d.join("nats-server"))
        .chain(KNOWN_PATHS.iter().map(PathBuf::from))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "nats-server not found on PATH or in /usr/sbin: install it with \
                 `apt-get install nats-server` (scripts/setup.sh does) or set TIDEPOOL_NATS_SERVER",
            )
        })
}

/// A port the kernel says is free now (it may be taken again before use; the
/// server then fails to start and [`NatsServer::start`] says so).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running `nats-server` with JetStream, stopped when dropped.
#[derive(Debug)]
pub struct NatsServer {
    binary: PathBuf,
    port: u16,
    dir: PathBuf,
    owns_dir: bool,
    child: Option<Child>,
}

impl NatsServer {
    /// Start a server on a free loopback port with a fresh temporary store
    /// directory (removed when the guard is dropped).
    pub fn start() -> io::Result<NatsServer> {
        let dir =
            std::env::temp_dir().join(format!("tidepool-nats-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&dir)?;
        let mut server = NatsServer::start_in(&dir, free_port()?)?;
        server.owns_dir = true;
        Ok(server)
    }

    /// Start a server on `port` that keeps its JetStream store in `dir`
    /// (kept afterwards: a restart with the same `dir` recovers the streams).
    pub fn start_in(dir: &Path, port: u16) -> io::Result<NatsServer> {
        let mut server = NatsServer {
            binary: find_binary()?,
            port,
            dir: dir.to_path_buf(),
            owns_dir: false,
            child: None,
        };
        server.spawn()?;
        Ok(server)
    }

    fn spawn(&mut self) -> io::Result<()> {
        let store = self.dir.join("jetstream");
        std::fs::create_dir_all(&store)?;
        let config = self.dir.join("nats.conf");
        // TIDEPOOL_NATS_TRACE=1: the server logs every protocol message (to
        // debug a delivery; slow and verbose).
        let trace = std::env::var_os("TIDEPOOL_NATS_TRACE")
            .filter(|v| !v.is_empty() && v != "0")
            .map_or("", |_| {
                "trace: true\nlogtime: true\nmax_traced_msg_len: 80\n"
            });
        std::fs::write(
            &config,
            format!(
                "server_name: tidepool_{port}\nlisten: 127.0.0.1:{port}\n{trace}\
                 jetstream {{\n  store_dir: {store:?}\n  max_memory_store: 256MB\n  max_file_store: 2GB\n}}\n",
                port = self.port,
                store = store.display().to_string(),
            ),
        )?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())?;
        let child = Command::new(&self.binary)
            .arg("-c")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot run {}: {e}", self.binary.display()),
                )
            })?;
        self.child = Some(child);
        self.wait_ready()
    }

    /// Poll until the port accepts connections, the process exits, or time runs out.
    fn wait_ready(&mut self) -> io::Result<()> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(io::Error::other(format!(
                    "nats-server exited at start ({status}); its log: {}",
                    self.log_tail()
                )));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.stop();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("nats-server did not listen on {addr} within {START_TIMEOUT:?}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The client URL, `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// CPU time the server process has used (Linux `/proc`; `None` elsewhere
    /// or when it is not running).
    pub fn cpu_time(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()?)).ok()?;
        // Fields after the parenthesised command name; utime and stime are
        // the 14th and 15th fields of the line.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Some(Duration::from_nanos(ticks * 1_000_000_000 / hz))
    }

    /// Where the server writes its log.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("nats-server.log")
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    /// Stop gracefully (SIGTERM; SIGKILL after 10 s). Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            crate::process::terminate(&mut child, Duration::from_secs(10));
        }
    }

    /// Stop and start again on the same port with the same store: streams,
    /// consumers and their acknowledgement state survive.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop();
        // The port can stay busy for a moment after the old process exits.
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.spawn() {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A process-wide counter, so that servers started by one process get
/// distinct directories.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
