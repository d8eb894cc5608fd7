//! `tidepool pipeline`: the report, the output folder, and bad input.

use std::process::Command;

fn tidepool(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tidepool"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn json_report_names_every_stage_and_the_limiting_one() {
    let out = tidepool(&[
        "pipeline",
        "--items",
        "60",
        "--replicas",
        "2",
        "--io",
        "50us",
        "--compute",
        "50us",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read", "transform", "checksum", "write"]);
    assert!(v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["items"] == 60));
    assert_eq!(v["pipelines"][0]["rounds"], 60);
    let table = tidepool(&[
        "pipeline",
        "--items",
        "30",
        "--io",
        "10us",
        "--compute",
        "10us",
    ]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("limiting stage"));
}

#[test]
fn out_writes_the_report_and_charts() {
    let dir = std::env::temp_dir().join(format!("tidepool-pipeline-cmd-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    let out = tidepool(&[
        "pipeline",
        "--items",
        "40",
        "--io",
        "20us",
        "--compute",
        "20us",
        "--out",
        d,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in ["report.json", "stages.csv", "depth.svg", "threads.svg"] {
        let len = std::fs::metadata(dir.join(f)).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{f} missing or empty");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_options_are_usage_errors_that_name_the_option() {
    for (args, needle) in [
        (vec!["pipeline", "--items", "0"], "--items"),
        (vec!["pipeline", "--replicas", "many"], "--replicas"),
        (vec!["pipeline", "--io-priority", "nice:40"], "-20..=19"),
        (
            vec!["pipeline", "--compute-priority", "dynamic-up"],
            "fixed priority only",
        ),
        (vec!["pipeline", "--buffers", "0"], "--buffers"),
        // Durations need a unit and stay within 0s..=1s.
        (vec!["pipeline", "--io", "300"], "no unit"),
        (vec!["pipeline", "--compute", "600"], "no unit"),
        (vec!["pipeline", "--transform-io", "2000"], "no unit"),
        (vec!["pipeline", "--compute", "2s"], "0s..=1s"),
    ] {
        let out = tidepool(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// An output folder that cannot be written is an error, found before the
/// run: no report is printed, and no time is spent on a run whose files
/// could not be written. A regular file in the way is refused too.
#[test]
fn an_output_folder_that_cannot_be_written_is_an_error() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let in_the_way = file.path().to_str().unwrap();
    for dir in ["/proc/no-such-dir", in_the_way] {
        let out = tidepool(&[
            "pipeline",
            "--items",
            "5",
            "--io",
            "1us",
            "--compute",
            "1us",
            "--out",
            dir,
        ]);
        assert!(!out.status.success(), "{dir}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(dir), "{dir}");
        assert!(out.stdout.is_empty(), "{dir}: the pipeline ran");
    }
}
