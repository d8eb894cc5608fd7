//! The `tidepool` binary against hostile input: each case once
//! panicked (exit 101), hung, ran away with memory or lost data. Every case
//! must now end with a clear message and exit code 1 or 2, within a time
//! limit and (where no pool runs) a 2 GB address-space limit; and the exit
//! codes of docs/cli.md (0, 1, 2, 130) hold for every subcommand.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_tidepool");
/// 50 fast tasks: a few tens of milliseconds of replay.
const TINY: &str = "poisson:rate=3000,service=exp:100us,n=50,seed=7";
/// About 1000 s of replay: only Ctrl-C or an early error ends it quickly.
const ENDLESS: &str = "poisson:rate=100,service=exp:100us,n=100000,seed=7";
/// Generous: the machine is shared and loaded.
const LIMIT: Duration = Duration::from_secs(90);

/// Wait for `child` at most `LIMIT`; a child still running then is a hang.
fn finish(child: Child, what: &str) -> Output {
    common::finish_within(child, LIMIT, what, || {})
}

fn spawn(args: &[&str], stdout: Stdio, mem_limit: bool) -> Child {
    let mut cmd = if mem_limit {
        // ulimit -v: a runaway allocation aborts instead of eating the machine.
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("ulimit -v 2000000 && exec \"$0\" \"$@\"")
            .arg(BIN);
        c
    } else {
        Command::new(BIN)
    };
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs")
}

/// Run with the memory limit; check the exit code and the message.
fn fails(args: &[&str], code: i32, needles: &[&str]) -> String {
    let o = finish(spawn(args, Stdio::piped(), true), &format!("{args:?}"));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    assert!(err.len() < 2_000, "{args:?}: a {} byte message", err.len());
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in {err}");
    }
    err
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::File::create(&p)
        .and_then(|mut f| f.write_all(bytes))
        .unwrap();
    p.to_string_lossy().into_owned()
}

const SWF_REST: &str = "-1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1";

#[test]
fn hostile_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run_1e300 = write(
        d,
        "run.swf",
        format!("1 0 -1 1e300 {SWF_REST}\n").as_bytes(),
    );
    fails(
        &["gen", &run_1e300],
        1,
        &["run.swf:1: field `run_time`", "0 to 1e10"],
    );
    let sub_1e300 = write(
        d,
        "sub.swf",
        format!("1 1e300 -1 5 {SWF_REST}\n").as_bytes(),
    );
    fails(
        &["run", "--trace", &sub_1e300],
        1,
        &["sub.swf:1: field `submit_time`"],
    );
    let dup = write(
        d,
        "dup.swf",
        format!("1 0 -1 5 {SWF_REST}\n1 3 -1 5 {SWF_REST}\n").as_bytes(),
    );
    fails(
        &["gen", &dup],
        1,
        &["dup.swf:2: field `job_number`", "already used on line 1"],
    );
    let span = write(
        d,
        "span.csv",
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n0001-01-01 00:00:00,1,1\n9999-12-31 00:00:00,1,1\n",
    );
    // 10,000 years at the default 60x compression fits: no overflow, a trace
    let o = finish(spawn(&["gen", &span], Stdio::piped(), true), "span");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let feb = write(
        d,
        "feb.csv",
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-31 00:00:00,1,1\n",
    );
    fails(
        &["gen", &feb],
        1,
        &["feb.csv:2: field `TIMESTAMP`", "2023-02 has 28 days"],
    );
    let bom = write(
        d,
        "bom.csv",
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n\"\xef\xbb\xbf2023-02-01 00:00:00\",1,1\n",
    );
    fails(&["gen", &bom], 1, &["\\u{feff}2023-02-01"]);
    let byte = write(
        d,
        "byte.csv",
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-01 00:00:00,1\xff,1\n",
    );
    let e = fails(&["gen", &byte], 1, &["byte.csv:2:", "not valid UTF-8"]);
    assert!(!e.contains("Utf8Error") && !e.contains("{ "), "{e}");
    let utf = write(d, "utf.trace", b"1 1 0 1\n2 1 0 \xff\n");
    fails(
        &["run", "--trace", &utf],
        1,
        &["utf.trace:2:", "not valid UTF-8"],
    );
    let mut big = b"1 1 0 ".to_vec();
    big.extend(std::iter::repeat_n(b'9', 10_000_000));
    let tok = write(d, "tok.trace", &big);
    fails(
        &["gen", &tok],
        1,
        &["tok.trace:1:", "longer than 65536 bytes"],
    );
    fails(
        &["run", "--trace", "/dev/zero"],
        1,
        &["/dev/zero:1:", "longer than 65536 bytes"],
    );
    // a directory: the OS error once
    let e = fails(
        &["run", "--trace", &d.to_string_lossy()],
        1,
        &["Is a directory"],
    );
    assert_eq!(e.matches("Is a directory").count(), 1, "{e}");
    // a trace longer than --max-tasks, and the limit raised
    let three = write(d, "three.trace", b"1 1 0 1\n2 1 0 1\n3 1 0 1\n");
    fails(
        &["gen", &three, "--max-tasks", "2"],
        1,
        &["three.trace:3:", "more than 2 tasks", "--max-tasks"],
    );
    let o = finish(
        spawn(&["gen", &three, "--max-tasks", "3"], Stdio::piped(), true),
        "3",
    );
    assert!(o.status.success());
}

#[test]
fn hostile_specs_and_options_are_usage_errors() {
    for (args, needles) in [
        (
            vec!["gen", "poisson:rate=1e-300"],
            vec!["`rate`", "1e-300", "1e-3..=1e9"],
        ),
        (
            vec!["gen", "lognormal:rate=100,cv=1e300"],
            vec!["`cv`", "0..=100"],
        ),
        (
            vec!["gen", "steps:rate=1,steps=1000000000"],
            vec!["`steps`", "1..=10000"],
        ),
        (
            vec!["gen", "poisson:rate=1,n=10000000000"],
            vec!["`n`", "1000000 tasks", "--max-tasks"],
        ),
        (
            vec!["gen", "poisson:rate=1,service=exp:-1ms"],
            vec!["`-1ms` is negative"],
        ),
        (
            vec!["gen", "cpu", "--scale", "1e300"],
            vec!["--scale 1e300", "1e-6..=1e6"],
        ),
        (
            vec!["gen", "cpu", "--scale", "1e6"],
            vec!["--scale", "more than 1000000 tasks"],
        ),
        (
            vec!["run", "-w", "cpu", "--scale", "nan"],
            vec!["--scale NaN"],
        ),
        (
            vec!["run", "-w", TINY, "--policy", "fixed:99999999"],
            vec!["fixed:99999999", "32768"],
        ),
        (
            vec!["run", "-w", TINY, "--drain-timeout", "1e300"],
            vec!["--drain-timeout", "not a duration", "units"],
        ),
        (
            vec!["run", "-w", TINY, "--drain-timeout", "15"],
            vec!["--drain-timeout", "no unit", "15s"],
        ),
        (
            vec!["run", "-w", TINY, "--drain-timeout", "9999d"],
            vec!["--drain-timeout", "1ms..=7days"],
        ),
        (
            vec!["run", "-w", TINY, "--speed", "1e-300"],
            vec!["--speed 1e-300", "1e-6..=1e6"],
        ),
        (
            vec!["run", "-w", TINY, "--speed", "inf"],
            vec!["--speed inf"],
        ),
        (
            vec![
                "sweep",
                "-w",
                TINY,
                "--sizes",
                "2..4096:x9223372036854775808",
            ],
            vec!["x2 to x4096"],
        ),
        (vec!["gen", TINY, "--max-tasks", "0"], vec!["--max-tasks"]),
        (
            vec!["gen", TINY, "--max-tasks", "100000001"],
            vec!["--max-tasks"],
        ),
    ] {
        fails(&args, 2, &needles);
    }
}

/// Exit codes of docs/cli.md, for every subcommand: 0 success, 1 runtime
/// error (unreadable input, unwritable output), 2 usage error.
#[test]
fn exit_codes_hold_for_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_string_lossy();
    let trace = dir.path().join("t.trace");
    let trace = trace.to_string_lossy();
    let ok = |args: &[&str]| {
        let o = finish(spawn(args, Stdio::piped(), false), &format!("{args:?}"));
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    // 0
    ok(&["gen", TINY, "-o", &trace]);
    ok(&["run", "--trace", &trace, "-q", "--policy", "fixed:2"]);
    ok(&["sweep", "-w", TINY, "-q", "--sizes", "1,2"]);
    ok(&[
        "compare",
        "-w",
        TINY,
        "-q",
        "--sizes",
        "1",
        "--policies",
        "fixed:1",
    ]);
    ok(&[
        "demo",
        "-q",
        "--scale",
        "0.001",
        "--policies",
        "fixed:1",
        "--out",
        &out,
    ]);
    ok(&["calibrate", "--json"]);
    // 2: usage
    for sub in ["gen", "run", "sweep", "compare", "demo", "calibrate"] {
        fails(&[sub, "--no-such-option"], 2, &["--no-such-option"]);
    }
    fails(&["gen", "bogus:rate=1"], 2, &["unknown workload kind"]);
    fails(&["run", "-w", TINY, "-p", "nope"], 2, &["valid forms"]);
    fails(&["sweep", "-w", TINY, "--sizes", "0"], 2, &["1..=4096"]);
    fails(
        &["compare", "-w", TINY, "--tolerance", "2"],
        2,
        &["--tolerance"],
    );
    fails(&["demo", "--scale", "5"], 2, &["--scale"]);
    // 1: unreadable input, unwritable output (checked before any replay)
    fails(&["gen", "/no/such.trace"], 1, &["/no/such.trace"]);
    fails(
        &["gen", TINY, "-o", "/dev/null/x.trace"],
        1,
        &["/dev/null/x.trace"],
    );
    fails(
        &["run", "--trace", "/no/such.trace"],
        1,
        &["/no/such.trace"],
    );
    fails(&["sweep", "-w", "/no/such.trace"], 1, &["/no/such.trace"]);
    fails(&["compare", "-w", "/no/such.trace"], 1, &["/no/such.trace"]);
    for sub in ["run", "sweep", "compare"] {
        // ENDLESS would take 1000 s: the error must come first
        let e = fails(
            &[sub, "-w", ENDLESS, "--out", "/dev/null/x"],
            1,
            &["cannot create output folder `/dev/null/x`"],
        );
        assert!(!e.contains("completed"), "{e}");
    }
    fails(&["demo", "--out", "/dev/null/x"], 1, &["/dev/null/x"]);
}

/// Output that cannot be written is an error: `> /dev/full` exits 1.
#[test]
fn stdout_to_dev_full_is_an_error() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipping: no /dev/full");
        return;
    }
    for args in [
        vec!["gen", TINY],
        vec!["run", "-w", TINY, "-q"],
        vec!["run", "-w", TINY, "-q", "--json"],
        vec!["sweep", "-w", TINY, "-q", "--sizes", "1"],
        vec![
            "compare",
            "-w",
            TINY,
            "-q",
            "--sizes",
            "1",
            "--policies",
            "fixed:1",
        ],
        vec!["calibrate"],
        vec!["pipeline", "--items", "10"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = finish(spawn(&args, Stdio::from(full), false), &format!("{args:?}"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
    // a closed pipe (`| head`) is not an error
    let mut child = spawn(&["gen", "cpu"], Stdio::piped(), false);
    drop(child.stdout.take());
    let o = finish(child, "closed pipe");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// True once `pid` has a SIGINT handler (the Ctrl-C handler is installed).
fn catches_sigint(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (2 - 1)) != 0)
}

/// Ctrl-C: the run stops, what was measured is written, exit 130 — for every
/// subcommand that replays. `gen` installs no handler: SIGINT ends it.
#[test]
#[cfg(target_os = "linux")]
fn ctrl_c_exits_130_for_every_replaying_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let out = out.to_string_lossy();
    let repro = dir.path().join("reproduction");
    let repro = repro.to_string_lossy();
    for args in [
        vec!["run", "-w", ENDLESS, "-q", "--json"],
        vec!["sweep", "-w", ENDLESS, "-q", "--sizes", "1,2"],
        vec!["compare", "-w", ENDLESS, "-q", "--sizes", "1"],
        vec!["demo", "-q", "--scale", "2", "--out", &out],
        vec!["calibrate"],
        vec!["pipeline", "--items", "99999999999999"],
        vec![
            "sim",
            "-w",
            "poisson:rate=1000,service=exp:1ms,n=1000000,seed=7",
            "-q",
        ],
        vec!["reproduce", "xu", "-q", "--out", &repro],
    ] {
        let child = spawn(&args, Stdio::piped(), false);
        let pid = child.id();
        let start = Instant::now();
        while !catches_sigint(pid) {
            assert!(start.elapsed() < LIMIT, "{args:?}: no Ctrl-C handler");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200));
        common::send_signal("-INT", pid);
        let o = finish(child, &format!("{args:?}"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(130), "{args:?}: {err}");
        assert!(err.contains("interrupted"), "{args:?}: {err}");
    }
    assert!(
        Path::new(&*out).join("report.md").exists(),
        "demo wrote its report"
    );
}
