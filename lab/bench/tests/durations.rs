//! Every duration flag of the benchmarks takes a unit: a bare number is a
//! usage error that names the flag and the units, and each flag's range is
//! checked.

use std::process::Command;

fn refused(args: &[&str], needles: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_tidepool-bench"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` missing from {err}");
    }
}

#[test]
fn a_bare_number_is_refused_naming_the_flag_and_the_units() {
    for (sub, flag) in [
        ("celery", "--sleep"),
        ("celery", "--spin"),
        ("celery", "--redeliver-after"),
        ("celery", "--timeout"),
        ("soak", "--duration"),
        ("soak", "--task"),
        ("soak", "--every"),
        ("dispatch", "--idle"),
    ] {
        refused(&[sub, flag, "10"], &[flag, "no unit", "10s", "ms"]);
    }
}

#[test]
fn durations_out_of_range_name_the_range() {
    refused(&["celery", "--sleep", "11s"], &["--sleep", "1us..=10s"]);
    refused(&["celery", "--redeliver-after", "500ms"], &["1s..=1h"]);
    refused(&["soak", "--task", "2s"], &["--task", "0s..=1s"]);
    refused(&["soak", "--every", "2h"], &["--every", "1s..=1h"]);
    refused(&["dispatch", "--idle", "2s"], &["--idle", "1us..=1s"]);
    refused(&["soak", "--duration", "8d"], &["--duration", "1s..=7days"]);
}

#[test]
fn a_rate_needs_its_unit_and_a_range() {
    refused(&["celery", "--rate", "150"], &["--rate", "no unit", "N/s"]);
    refused(
        &["celery", "--rate", "1000000/s"],
        &["--rate", "0.1/s..=100000/s"],
    );
}
