//! The Python side's virtualenv: `<target dir>/celery-venv`, made on first
//! use (`python3 -m venv`, then `pip install -r requirements.txt`, which
//! needs the network once) and reused while its stamp, a copy of the
//! requirements it was made from, matches. `scripts/setup.sh` makes the
//! same one, so that tests find it ready.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory of the Python files (`bench_app.py`, `driver.py`).
pub fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("celery")
}

/// Where the virtualenv lives: `$CARGO_TARGET_DIR/celery-venv`, or the
/// workspace's `target/celery-venv`.
pub fn venv_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.canonicalize().unwrap_or(target).join("celery-venv")
}

/// The virtualenv, made or brought up to date when its stamp differs.
pub fn ensure() -> Result<PathBuf, String> {
    let dir = venv_dir();
    let requirements = python_dir().join("requirements.txt");
    let wanted = std::fs::read_to_string(&requirements)
        .map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let stamp = dir.join("tidepool-requirements.txt");
    if dir.join("bin/python").is_file()
        && std::fs::read_to_string(&stamp).ok().as_ref() == Some(&wanted)
    {
        return Ok(dir);
    }
    eprintln!(
        "making the Celery virtualenv in {} (pip needs the network once)",
        dir.display()
    );
    if !dir.join("bin/python").is_file() {
        run(
            Command::new("python3").arg("-m").arg("venv").arg(&dir),
            "python3 -m venv (install python3 and python3-venv; scripts/setup.sh does)",
        )?;
    }
    run(
        Command::new(dir.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(&requirements),
        "pip install (needs the network on first use; or run scripts/setup.sh)",
    )?;
    std::fs::write(&stamp, wanted).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(dir)
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(6).collect();
        return Err(format!(
            "{what}: {}: {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    Ok(())
}
