//! What the tests that build and inspect the C libraries share: where cargo
//! put them, a scratch directory, and running a tool with a deadline.
#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest a program may run, even under valgrind on a loaded machine:
/// past it, it is taken for a deadlock.
const TIMEOUT: Duration = Duration::from_secs(300);

/// This crate's directory.
pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where cargo put the cdylib and staticlib it built for this test run.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("target/<profile>/deps").to_path_buf();
    assert!(
        deps.join("libtidepool_capi.so").exists(),
        "no libtidepool_capi.so next to the test binary in {}",
        deps.display()
    );
    deps
}

/// The shared library cargo built.
pub fn shared_lib() -> PathBuf {
    lib_dir().join("libtidepool_capi.so")
}

/// A scratch directory for compiled programs and their output.
pub fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-c");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run `cmd` to completion (or fail after `TIMEOUT`), its output logged under
/// `log` in the scratch directory; returns stdout, stderr and whether it
/// succeeded. A tool that cannot be started fails the test: it is never skipped.
pub fn run(mut cmd: Command, log: &str) -> (String, String, bool) {
    let (out, err) = (
        out_dir().join(format!("{log}.out")),
        out_dir().join(format!("{log}.err")),
    );
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!("cannot run {cmd:?}: {e} (scripts/setup.sh installs the tools)")
    });
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} ran for more than {TIMEOUT:?}: a deadlock?");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (read(&out), read(&err), status.success())
}

/// Run `cmd`; fail the test with its output unless it succeeds.
pub fn run_ok(cmd: Command, log: &str) -> String {
    let what = format!("{cmd:?}");
    let (out, err, ok) = run(cmd, log);
    assert!(ok, "{what} failed\n--- stdout\n{out}\n--- stderr\n{err}");
    out
}

/// The SONAME recorded in the shared library (`readelf -d`), if any; read
/// once per test binary.
pub fn soname() -> Option<String> {
    static SONAME: OnceLock<Option<String>> = OnceLock::new();
    SONAME
        .get_or_init(|| {
            let mut cmd = Command::new("readelf");
            cmd.arg("-d").arg(shared_lib());
            let dynamic = run_ok(cmd, "readelf");
            dynamic
                .lines()
                .find(|l| l.contains("(SONAME)"))
                .and_then(|l| l.split('[').nth(1))
                .and_then(|l| l.split(']').next())
                .map(str::to_string)
        })
        .clone()
}

/// The names of the `#[no_mangle]` functions in one source file.
pub fn exports_in(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut names = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "#[no_mangle]" {
            let sig = lines.next().unwrap_or_default();
            if let Some(name) = sig.split("fn ").nth(1).and_then(|s| s.split('(').next()) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// The names of every `#[no_mangle]` function in the sources.
pub fn source_exports() -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(crate_dir().join("src")).unwrap() {
        names.extend(exports_in(&entry.unwrap().path()));
    }
    names.sort();
    names
}
