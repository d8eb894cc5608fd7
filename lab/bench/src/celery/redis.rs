//! A private `redis-server` (Debian's package) for one Celery run: a free
//! loopback port, a directory of its own, no persistence (nothing restarts
//! it), stopped when the guard drops.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::procs::Group;

/// A running Redis.
#[derive(Debug)]
pub struct Redis {
    port: u16,
    _proc: Group,
}

impl Redis {
    /// Start one in `dir` (which must exist).
    pub fn start(dir: &Path) -> Result<Redis, String> {
        let bin = find()?;
        let port =
            tidepool_cluster::server::free_port().map_err(|e| format!("no free port: {e}"))?;
        let mut cmd = Command::new(bin);
        cmd.args(["--bind", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
                "--dir",
            ])
            .arg(dir);
        let proc = Group::spawn(
            cmd,
            "redis-server",
            &dir.join("redis.log"),
            Duration::from_secs(10),
        )?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if !proc.running() || Instant::now() > deadline {
                let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
                return Err(format!("redis-server did not listen on {addr}: {log}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Redis { port, _proc: proc })
    }

    /// The broker and result-backend URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

fn find() -> Result<std::path::PathBuf, String> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(["/usr/bin", "/usr/sbin"].map(Into::into))
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "redis-server not found: install it with `apt-get install redis-server` \
             (scripts/setup.sh does)"
                .to_string()
        })
}
