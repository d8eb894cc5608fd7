//! Child processes of the comparison (Redis, NATS, nodes, Celery workers,
//! the Celery client), each in a process group of its own and registered
//! with [`cleanup`]: the group is stopped when its guard drops, after a
//! panic or an error, and on Ctrl-C or SIGTERM. A Celery worker is a group
//! (the main process and its prefork children), so "kill the worker" and
//! "stop the worker" act on the whole group, as a machine or container
//! dying would.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::cleanup::{self, Undo};

/// A running process group, stopped (SIGTERM, SIGKILL after a grace) when dropped.
#[derive(Debug)]
pub struct Group {
    pid: i32,
    what: String,
    _undo: Undo,
}

impl Group {
    /// Start `cmd` as the leader of a new process group; stdout and stderr
    /// go to `log`. Prints `started WHAT pid=PID` on stderr (the tests use it
    /// to check that nothing is left behind).
    pub fn spawn(
        cmd: Command,
        what: &str,
        log: &std::path::Path,
        grace: Duration,
    ) -> Result<Group, String> {
        let mut cmd = cleanup::detached(cmd);
        let out = std::fs::File::create(log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child: Child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {what} ({:?}): {e}", cmd.get_program()))?;
        let pid = child.id() as i32;
        // The Child is not waited on here: `stop_group` reaps the leader.
        drop(child);
        eprintln!("started {what} pid={pid}");
        let undo = cleanup::register(move || stop_group(pid, grace));
        Ok(Group {
            pid,
            what: what.to_string(),
            _undo: undo,
        })
    }

    /// The leader's pid (= the group id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Whether the leader still runs (reaps it when it has exited).
    pub fn running(&self) -> bool {
        leader_alive(self.pid)
    }

    /// SIGKILL to the whole group, at once.
    pub fn kill(&self) {
        kill_group(self.pid, &self.what);
    }
}

/// SIGKILL to process group `pgid` (a [`Group`]'s pid), at once.
pub fn kill_group(pgid: i32, what: &str) {
    // SAFETY: kill(2) on a process group; a stale one is merely absent.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    eprintln!("killed {what} pid={pgid} (SIGKILL)");
}

/// SIGTERM to the group, wait up to `grace` for the leader and the group to
/// go, then SIGKILL; the leader is reaped.
fn stop_group(pgid: i32, grace: Duration) {
    // SAFETY: kill(2) on a process group this process created.
    unsafe { libc::kill(-pgid, libc::SIGCONT) };
    unsafe { libc::kill(-pgid, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && (leader_alive(pgid) || group_alive(pgid)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if leader_alive(pgid) || group_alive(pgid) {
        // SAFETY: as above.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && (leader_alive(pgid) || group_alive(pgid)) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether `pid` (our child) runs; reaps it when it has exited.
fn leader_alive(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid with WNOHANG writes only `status`.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if r == pid {
        return false;
    }
    if r < 0 {
        // Not our child (already reaped): does it still exist?
        // SAFETY: signal 0 only checks existence.
        return unsafe { libc::kill(pid, 0) } == 0;
    }
    true
}

/// Whether any process of group `pgid` still exists (not counting zombies
/// waiting for a reaper that is not us).
fn group_alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        // SAFETY: signal 0 only checks existence.
        return unsafe { libc::kill(-pgid, 0) } == 0;
    };
    dir.flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // Fields after the parenthesised name: state, ppid, pgrp.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            return false;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.len() > 2 && f[0] != "Z" && f[2] == pgid.to_string()
    })
}
