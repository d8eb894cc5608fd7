//! Child processes (brokers, nodes) that are stopped when their guard is
//! dropped, and the signals the chaos scenario and the tests send them.

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Send `signal` to process `pid` (ignores a process that is already gone).
pub fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a pid we started and a valid signal number.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// SIGTERM, then wait up to `grace` for the exit; SIGKILL after that.
pub fn terminate(child: &mut Child, grace: Duration) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    signal(child.id(), libc::SIGCONT); // a stopped process cannot handle SIGTERM
    signal(child.id(), libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// How to start a node process: a program and the arguments before the node's
/// own options (`tidepool-node`, or `tidepool node`).
#[derive(Debug, Clone)]
pub struct NodeCommand {
    /// The program.
    pub program: PathBuf,
    /// Arguments that come first (e.g. the `node` subcommand).
    pub prefix: Vec<OsString>,
}

impl NodeCommand {
    /// A node command with no leading arguments.
    pub fn new(program: impl Into<PathBuf>) -> NodeCommand {
        NodeCommand {
            program: program.into(),
            prefix: Vec::new(),
        }
    }

    /// Start a node with `args` after the prefix; its stderr goes to `log`
    /// (or is inherited when `None`).
    pub fn spawn<I, S>(&self, args: I, log: Option<&std::path::Path>) -> io::Result<NodeProcess>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix)
            .args(args.into_iter().map(Into::into))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if let Some(path) = log {
            cmd.stderr(std::fs::File::create(path)?);
        }
        let child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot run {}: {e}", self.program.display()),
            )
        })?;
        Ok(NodeProcess { child: Some(child) })
    }
}

/// A running node process; dropping it stops it (SIGTERM, then SIGKILL).
#[derive(Debug)]
pub struct NodeProcess {
    child: Option<Child>,
}

impl NodeProcess {
    /// Its process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Send a signal (SIGKILL, SIGSTOP, SIGCONT, SIGTERM...).
    pub fn signal(&self, sig: libc::c_int) {
        if let Some(pid) = self.pid() {
            signal(pid, sig);
        }
    }

    /// Kill it at once (SIGKILL) and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Wait up to `timeout` for it to exit by itself; its exit status if it did.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.child.as_mut()?.try_wait().ok().flatten();
            if let Some(status) = status {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Graceful stop: SIGTERM, SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child, grace);
        }
    }
}

/// Stop many nodes at once: SIGTERM to all, then wait for each up to
/// `grace` in all, SIGKILL to those still running then. (One by one, three
/// nodes could take three graces.)
pub fn stop_all(nodes: &mut [NodeProcess], grace: Duration) {
    for n in nodes.iter() {
        n.signal(libc::SIGCONT); // a stopped process cannot handle SIGTERM
        n.signal(libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    for n in nodes.iter_mut() {
        n.wait_timeout(deadline.saturating_duration_since(Instant::now()));
        n.kill();
    }
}

/// A private broker and node processes, stopped when dropped: the nodes
/// first (SIGTERM; they finish or release what they hold while the broker
/// is still up), then the broker. The guard of `cluster up`,
/// `cluster replay --local` and the chaos scenario, so that an error, a
/// panic or Ctrl-C in their owner leaves no process behind.
#[derive(Debug)]
pub struct LocalCluster {
    /// The nodes (`node-0`, `node-1`, ...).
    pub nodes: Vec<NodeProcess>,
    /// The broker.
    pub broker: crate::NatsServer,
    /// How long the nodes may take to stop when dropped.
    pub grace: Duration,
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        stop_all(&mut self.nodes, self.grace);
        self.broker.stop();
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}
