//! The C programs in `c/`, compiled with `cc` against the libraries this test
//! run built (shared, static, and through the pkg-config file), run, and run
//! again under valgrind: no leaks, no invalid accesses.
//!
//! Needs `cc`, `valgrind` and `pkg-config` (scripts/setup.sh installs them):
//! a missing tool fails the test, it is never skipped.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{crate_dir, lib_dir, out_dir, run, run_ok, shared_lib, soname};

/// A directory laid out as an installed library: the shared library under
/// its SONAME, and `libtidepool.so` (what `-ltidepool` finds) pointing to it.
/// The programs linked here record the SONAME, which the loader then looks
/// for, so this is the directory they need at run time too.
fn link_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = out_dir().join("lib");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let soname = soname().expect("the shared library has no SONAME");
        std::os::unix::fs::symlink(shared_lib(), dir.join(&soname)).unwrap();
        std::os::unix::fs::symlink(&soname, dir.join("libtidepool.so")).unwrap();
        dir
    })
}

fn cc() -> Command {
    let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cmd.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-g"]);
    cmd
}

/// Which library a program links.
#[derive(Clone, Copy)]
enum Link {
    /// `-ltidepool`, found (and loaded) under its SONAME in `link_dir`.
    Shared,
    /// The archive, then the system libraries `rustc --print
    /// native-static-libs` lists (as in tidepool.pc's Libs.private).
    Static,
}

/// Compile `sources` (under `c/`) into the program `name`.
fn compile(sources: &[&str], name: &str, link: Link) -> PathBuf {
    let exe = out_dir().join(name);
    let mut cmd = cc();
    cmd.arg("-I").arg(crate_dir().join("include"));
    for source in sources {
        cmd.arg(crate_dir().join("c").join(source));
    }
    cmd.arg("-o").arg(&exe);
    match link {
        Link::Shared => {
            let lib = link_dir();
            cmd.arg("-L")
                .arg(lib)
                .arg("-ltidepool")
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                .arg("-pthread");
        }
        Link::Static => {
            cmd.arg(lib_dir().join("libtidepool_capi.a"));
            for lib in ["gcc_s", "util", "rt", "pthread", "m", "dl", "c"] {
                cmd.arg(format!("-l{lib}"));
            }
        }
    }
    run_ok(cmd, &format!("cc-{name}"));
    exe
}

/// A program in the thesis's names, and another library that defines the
/// same names as globals.
const THESIS_NAMES: &[&str] = &["tests/thesis_names.c", "tests/other_library.c"];

/// The C programs, compiled once for all the tests of this file.
struct Programs {
    test_capi: PathBuf,
    thesis_names: PathBuf,
    minimal: PathBuf,
    bench: PathBuf,
}

fn programs() -> &'static Programs {
    static BUILT: OnceLock<Programs> = OnceLock::new();
    BUILT.get_or_init(|| Programs {
        test_capi: compile(&["tests/test_capi.c"], "test_capi", Link::Shared),
        thesis_names: compile(THESIS_NAMES, "thesis_names", Link::Shared),
        minimal: compile(&["examples/minimal.c"], "minimal", Link::Shared),
        bench: compile(&["examples/bench.c"], "bench", Link::Shared),
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
    let exe = compile(&["tests/test_capi.c"], "test_capi_static", Link::Static);
    let out = run_ok(Command::new(&exe), "test_capi_static");
    assert!(out.contains("checks passed"), "{out}");
}

#[test]
fn a_program_in_the_thesis_names_runs_clean_under_valgrind() {
    let exe = &programs().thesis_names;
    let out = run_ok(Command::new(exe), "thesis_names");
    assert!(out.contains("sum 500500, all checks passed"), "{out}");
    let out = run_ok(valgrind(exe, &[]), "valgrind-thesis_names");
    assert!(out.contains("all checks passed"), "{out}");
}

/// A static link puts every global of the archive and of the other object
/// in one namespace: it fails with "multiple definition of `dispatch'" if
/// the library defines a generic name.
#[test]
fn the_thesis_names_do_not_collide_with_another_library_in_a_static_link() {
    let exe = compile(THESIS_NAMES, "thesis_names_static", Link::Static);
    let out = run_ok(Command::new(&exe), "thesis_names_static");
    assert!(out.contains("all checks passed"), "{out}");
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
    assert!(
        flags.split_whitespace().any(|f| f == "-ltidepool"),
        "{flags}"
    );
    let mut cmd = Command::new("pkg-config");
    cmd.args(["--modversion", "tidepool"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"));
    assert_eq!(
        run_ok(cmd, "pkg-config-version").trim(),
        env!("CARGO_PKG_VERSION")
    );

    // The installed layout: the file, its SONAME and the link-time name.
    let lib = prefix.join("lib");
    let soname = soname().unwrap();
    let file = format!("libtidepool.so.{}", env!("CARGO_PKG_VERSION"));
    assert!(lib.join(&file).is_file());
    assert_eq!(
        std::fs::read_link(lib.join(&soname)).unwrap(),
        Path::new(&file)
    );
    assert_eq!(
        std::fs::read_link(lib.join("libtidepool.so")).unwrap(),
        Path::new(&soname)
    );
    assert!(lib.join("libtidepool.a").is_file());

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
    // The program asks the loader for the SONAME, not for the file.
    let mut cmd = Command::new("readelf");
    cmd.arg("-d").arg(&exe);
    let dynamic = run_ok(cmd, "readelf-minimal");
    assert!(
        dynamic.contains(&format!("Shared library: [{soname}]")),
        "{dynamic}"
    );
}
