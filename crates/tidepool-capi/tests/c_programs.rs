//! The C programs in `c/`, compiled with `cc` against the libraries this test
//! run built (shared, static, and through the pkg-config file), run, and run
//! again under valgrind: no leaks, no invalid accesses.
//!
//! Needs `cc`, `valgrind` and `pkg-config` (scripts/setup.sh installs them):
//! a missing tool fails the test, it is never skipped.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest a program may run, even under valgrind on a loaded machine:
/// past it, it is taken for a deadlock.
const TIMEOUT: Duration = Duration::from_secs(300);

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where cargo put the cdylib and staticlib it built for this test run.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("target/<profile>/deps").to_path_buf();
    assert!(
        deps.join("libtidepool_capi.so").exists(),
        "no libtidepool_capi.so next to the test binary in {}",
        deps.display()
    );
    deps
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-c");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Run `cmd` to completion (or fail after `TIMEOUT`); returns stdout, stderr
/// and whether it succeeded.
fn run(mut cmd: Command, log: &str) -> (String, String, bool) {
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
fn run_ok(cmd: Command, log: &str) -> String {
    let what = format!("{cmd:?}");
    let (out, err, ok) = run(cmd, log);
    assert!(ok, "{what} failed\n--- stdout\n{out}\n--- stderr\n{err}");
    out
}

fn cc() -> Command {
    let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-g"]);
    cmd
}

/// Compile `source` (under `c/`) against the shared library.
fn compile_shared(source: &str, name: &str) -> PathBuf {
    let lib = lib_dir();
    let exe = out_dir().join(name);
    let mut cmd = cc();
    cmd.arg("-I")
        .arg(crate_dir().join("include"))
        .arg(crate_dir().join("c").join(source))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg("-ltidepool_capi")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-pthread");
    run_ok(cmd, &format!("cc-{name}"));
    exe
}

/// The C programs, compiled once for all the tests of this file.
struct Programs {
    test_capi: PathBuf,
    minimal: PathBuf,
    bench: PathBuf,
}

fn programs() -> &'static Programs {
    static BUILT: OnceLock<Programs> = OnceLock::new();
    BUILT.get_or_init(|| Programs {
        test_capi: compile_shared("tests/test_capi.c", "test_capi"),
        minimal: compile_shared("examples/minimal.c", "minimal"),
        bench: compile_shared("examples/bench.c", "bench"),
    })
}

fn trace(name: &str) -> PathBuf {
    crate_dir().join("c").join("traces").join(name)
}

/// `program args…`.
fn command(program: &Path, args: &[&OsStr]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd
}

/// `program args…` under valgrind's memcheck: any invalid access or leak
/// makes it exit 99.
fn valgrind(program: &Path, args: &[&OsStr]) -> Command {
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "-q",
        "--error-exitcode=99",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite,indirect,possible",
        "--show-leak-kinds=definite,indirect,possible",
    ])
    .arg(format!(
        "--suppressions={}",
        crate_dir().join("c").join("valgrind.supp").display()
    ))
    .arg(program)
    .args(args);
    cmd
}

#[test]
fn c_test_program_passes() {
    let out = run_ok(Command::new(&programs().test_capi), "test_capi");
    assert!(out.contains("checks passed"), "{out}");
}

#[test]
fn c_test_program_is_valgrind_clean() {
    let out = run_ok(valgrind(&programs().test_capi, &[]), "valgrind-test_capi");
    assert!(out.contains("checks passed"), "{out}");
}

#[test]
fn minimal_example_runs_clean() {
    let out = run_ok(Command::new(&programs().minimal), "minimal");
    assert!(
        out.contains("sum of 1..100 computed by the pool: 5050"),
        "{out}"
    );
    run_ok(valgrind(&programs().minimal, &[]), "valgrind-minimal");
}

#[test]
fn benchmark_example_replays_traces() {
    let bench = &programs().bench;
    let fig = trace("figure-5.3.trace");
    let out = run_ok(command(bench, &[fig.as_os_str()]), "bench-fig");
    assert!(out.contains("4 tasks"), "{out}");
    assert!(out.contains("completedJob 4"), "{out}");
    let poisson = trace("poisson-1000.trace");
    let args = [
        poisson.as_os_str(),
        "--policy".as_ref(),
        "auto".as_ref(),
        "--max".as_ref(),
        "16".as_ref(),
    ];
    let out = run_ok(command(bench, &args), "bench-poisson-auto");
    assert!(out.contains("completedJob 1000"), "{out}");
    for line in ["throughput", "average idle time"] {
        assert!(out.contains(line), "no `{line}` in\n{out}");
    }
    // Bad input: the file, line and field, exit status 2.
    let bad = out_dir().join("bad.trace");
    std::fs::write(&bad, "1 1 0 200\n2 1 -5 100\n").unwrap();
    let (_, err, ok) = run(command(bench, &[bad.as_os_str()]), "bench-bad");
    assert!(!ok);
    assert!(
        err.contains("bad.trace:2: field `start_delay_us`: `-5`"),
        "{err}"
    );
}

#[test]
fn benchmark_example_is_valgrind_clean() {
    let bench = &programs().bench;
    let fig = trace("figure-5.3.trace");
    run_ok(valgrind(bench, &[fig.as_os_str()]), "valgrind-bench-fig");
    let poisson = trace("poisson-1000.trace");
    let args = [poisson.as_os_str(), "--policy".as_ref(), "auto".as_ref()];
    let out = run_ok(valgrind(bench, &args), "valgrind-bench-poisson");
    assert!(out.contains("completedJob 1000"), "{out}");
}

#[test]
fn static_library_links() {
    let lib = lib_dir();
    let exe = out_dir().join("test_capi_static");
    let mut cmd = cc();
    cmd.arg("-I")
        .arg(crate_dir().join("include"))
        .arg(crate_dir().join("c/tests/test_capi.c"))
        .arg("-o")
        .arg(&exe)
        .arg(lib.join("libtidepool_capi.a"))
        // `rustc --print native-static-libs`, as in tidepool.pc's Libs.private.
        .args([
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ]);
    run_ok(cmd, "cc-static");
    let out = run_ok(Command::new(&exe), "test_capi_static");
    assert!(out.contains("checks passed"), "{out}");
}

#[test]
fn installs_and_links_through_pkg_config() {
    let prefix = out_dir().join("prefix");
    let _ = std::fs::remove_dir_all(&prefix);
    let script = crate_dir().join("../../scripts/install-capi.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .arg(&prefix)
        .env("TIDEPOOL_CAPI_LIB_DIR", lib_dir());
    run_ok(cmd, "install");

    let mut cmd = Command::new("pkg-config");
    cmd.args(["--cflags", "--libs", "tidepool"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"));
    let flags = run_ok(cmd, "pkg-config");
    assert!(flags.contains("-ltidepool_capi"), "{flags}");

    let exe = out_dir().join("minimal_pkg_config");
    let mut cmd = cc();
    cmd.arg(crate_dir().join("c/examples/minimal.c"))
        .arg("-o")
        .arg(&exe)
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()));
    run_ok(cmd, "cc-pkg-config");
    let out = run_ok(Command::new(&exe), "minimal_pkg_config");
    assert!(out.contains("5050"), "{out}");
}
