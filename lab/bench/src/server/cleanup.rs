//! Everything the server benchmark must undo — child processes to stop,
//! directories to remove — registered in one place, so that the normal end,
//! an error, a panic (the guards' `Drop`) and a signal to stop (the handler
//! for SIGINT, SIGTERM and SIGHUP) all run the same undo, each item exactly
//! once.
//!
//! The protocol: [`register`] adds an undo and returns its [`Undo`] handle;
//! dropping the handle (or [`Undo::run`]) takes the item out of the registry
//! and runs it; [`on_stop_signal`] installs a handler that takes every item out,
//! newest first, runs them, and exits with status 130. One mutex guards the
//! registry and is held while an item runs, so the handler cannot exit the
//! process half-way through an undo the main thread has started: it waits
//! for it, then finds the item gone.
//!
//! Children are started in their own process group (see [`detached`]), so a
//! terminal's Ctrl-C reaches only this process, which then stops them in
//! order (the database by its fast-shutdown signal, not a kill).

use std::process::Command;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

type Action = Box<dyn FnOnce() + Send>;

static REGISTRY: Mutex<Vec<(u64, Action)>> = Mutex::new(Vec::new());
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A registered undo: runs when dropped, unless the signal handler ran it first.
#[derive(Debug)]
#[must_use = "dropping the handle runs the undo at once"]
pub struct Undo {
    id: u64,
}

/// Register `action` to run once: when the returned handle drops, or on
/// Ctrl-C, SIGTERM or SIGHUP.
pub fn register(action: impl FnOnce() + Send + 'static) -> Undo {
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    lock().push((id, Box::new(action)));
    Undo { id }
}

impl Undo {
    /// Run the undo now (same as dropping the handle).
    pub fn run(self) {}
}

impl Drop for Undo {
    fn drop(&mut self) {
        let mut registry = lock();
        if let Some(at) = registry.iter().position(|(id, _)| *id == self.id) {
            let (_, action) = registry.remove(at);
            action();
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<(u64, Action)>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Install (once) the handler of SIGINT (Ctrl-C), SIGTERM (`kill`, a CI
/// timeout) and SIGHUP (a closed terminal) that runs every registered undo,
/// newest first, and exits with status 130.
pub fn on_stop_signal() -> Result<(), String> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = ctrlc::set_handler(|| {
            eprintln!("interrupted: stopping the database and removing its directory");
            let mut registry = lock();
            while let Some((_, action)) = registry.pop() {
                action();
            }
            std::process::exit(130);
        })
        .map_err(|e| format!("cannot install the Ctrl-C and SIGTERM handler: {e}"));
    });
    result
}

/// `cmd` in a process group of its own, so a terminal's Ctrl-C does not
/// reach it directly.
pub fn detached(mut cmd: Command) -> Command {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    cmd
}

/// `cmd` set to receive `signal` when the thread that spawns it ends: should
/// the benchmark die where no undo can run (a crash, SIGKILL), the kernel
/// still stops the child. Spawn it from a thread that lives as long as the
/// child should (the main one).
pub fn dies_with_spawner(mut cmd: Command, signal: i32) -> Command {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as i32;
    let signal = signal as libc::c_ulong;
    // SAFETY: the closure runs in the child between fork and exec and makes
    // only async-signal-safe calls (prctl, getppid); it runs after the
    // child's uid changed, which would otherwise clear the setting.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the prctl took effect.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the benchmark has exited"));
            }
            Ok(())
        });
    }
    cmd
}

/// Send `signal` to `pid`, wait up to `grace` for it to exit (reaping it if
/// it is our child), then kill it. True when it exited within the grace.
pub fn stop_process(pid: i32, signal: i32, grace: Duration) -> bool {
    // SAFETY: plain syscalls on a pid we started; no memory is shared.
    unsafe { libc::kill(pid, signal) };
    let deadline = Instant::now() + grace;
    loop {
        if !alive(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            while alive(pid) {
                std::thread::sleep(Duration::from_millis(10));
            }
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` still runs; reaps it when it is a finished child of ours.
fn alive(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: waitpid with WNOHANG writes only `status`.
    let reaped = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if reaped == pid {
        return false;
    }
    exists(pid)
}

/// Whether a process `pid` exists (also one this process may not signal).
pub fn exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let signalled = unsafe { libc::kill(pid, 0) } == 0;
    signalled || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn an_undo_runs_once_when_dropped() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let undo = register(move || {
            r.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        undo.run();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_child_set_to_die_with_its_spawner_does() {
        // The spawning thread ends without stopping its child, as a crashed
        // benchmark would: the kernel must stop it.
        let mut child = std::thread::spawn(|| {
            dies_with_spawner(Command::new("sleep"), libc::SIGKILL)
                .arg("30")
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap();
        let pid = child.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) {
            assert!(Instant::now() < deadline, "the child outlived its spawner");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(child.wait().is_err(), "alive reaps it");
    }

    #[test]
    fn stop_process_ends_a_child_that_ignores_the_signal() {
        let mut child = Command::new("sh")
            .args(["-c", "trap '' INT; exec sleep 30"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let pid = child.id() as i32;
        assert!(!stop_process(pid, libc::SIGINT, Duration::from_millis(200)));
        assert!(!alive(pid));
        assert!(child.wait().is_err(), "stop_process reaps it");
    }
}
