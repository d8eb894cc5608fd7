//! End-to-end tests of the `tidepool` binary on tiny workloads.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tidepool_workload::{read_trace_file, GenSpec};

/// 200 fast tasks: about 0.1 s of replay.
const TINY: &str = "poisson:rate=3000,service=exp:100us,n=200,free=50,seed=7";
const TINY2: &str = "periodic:rate=2000,service=const:50us,n=150,seed=8";

fn tidepool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tidepool"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn json_of(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "one JSON line: {stdout}");
    serde_json::from_str(&stdout).expect("stdout is JSON")
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("`{key}` is not a number in {v}"))
}

fn assert_svg(path: &Path) {
    let s = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(s.starts_with("<svg") && s.len() > 500, "{}", path.display());
}

#[test]
fn run_json_has_the_metrics() {
    let v = json_of(&tidepool(&[
        "run",
        "--workload",
        TINY,
        "--policy",
        "auto",
        "--json",
        "--quiet",
    ]));
    assert_eq!(v["policy"], "auto");
    assert_eq!(v["tasks"], 200);
    assert_eq!(v["completed"], 200);
    assert_eq!(v["cancelled"], false);
    assert!(num(&v, "throughput") > 100.0);
    for key in [
        "mean_wait_us",
        "p99_wait_us",
        "mean_response_us",
        "p99_response_us",
        "mean_turnaround_us",
        "p99_turnaround_us",
        "cpu_utilisation",
        "avg_threads",
    ] {
        assert!(num(&v, key) >= 0.0, "{key}");
    }
    assert!(num(&v, "p99_wait_us") >= v["wait"]["p50_us"].as_f64().unwrap());
    assert!(num(&v, "mean_turnaround_us") >= num(&v, "mean_wait_us"));
    assert!(v["threads_created"].as_u64().is_some());
    assert!(v["size_series"].as_array().is_some_and(|s| !s.is_empty()));
    assert!(v["lateness"]["p99_us"].as_f64().is_some());
    assert_eq!(v["trace"]["tasks"], 200);
    assert!(v.get("records").is_none(), "records stay out of the JSON");
}

#[test]
fn run_out_writes_csv_svg_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = tidepool(&[
        "run",
        "-w",
        TINY2,
        "-p",
        "xu-bode",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("throughput") && text.contains("turnaround"),
        "{text}"
    );
    let records = std::fs::read_to_string(out.join("records.csv")).unwrap();
    assert_eq!(records.lines().count(), 151);
    assert!(records.starts_with("request_id,app_id,"));
    let sizes = std::fs::read_to_string(out.join("size_series.csv")).unwrap();
    assert!(sizes.starts_with("t_ms,live,target\n") && sizes.lines().count() > 1);
    let decisions = std::fs::read_to_string(out.join("decisions.csv")).unwrap();
    assert!(
        decisions.lines().count() > 1,
        "xu-bode decides every 5 tasks"
    );
    assert_svg(&out.join("size.svg"));
    assert_svg(&out.join("wait-ccdf.svg"));
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(r["completed"], 150);
}

#[test]
fn sweep_json_has_the_analysis() {
    let v = json_of(&tidepool(&[
        "sweep", "-w", TINY, "--sizes", "1..2,4", "--json", "-q",
    ]));
    assert_eq!(v["sizes"], serde_json::json!([1, 2, 4]));
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for r in rows {
        assert!(num(r, "throughput") > 0.0);
        assert!(num(r, "relative_throughput") <= 1.0 + 1e-9);
        assert!(r["in_band"].is_boolean());
    }
    assert_eq!(rows[0]["rait"].as_f64().unwrap_or(1.0), 1.0);
    let sizes = [1, 2, 4];
    for key in ["stable_point", "oracle_size", "best_throughput_size"] {
        assert!(sizes.contains(&v[key].as_u64().unwrap()), "{key}");
    }
    let zone = v["safe_zone"].as_array().unwrap();
    assert!(zone[0].as_u64() <= zone[1].as_u64());
    assert!(v["degradation_point"].is_null() || v["degradation_point"].is_u64());
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    assert_eq!(v["runs"][0]["result"]["executor"], "fixed:1");
}

#[test]
fn compare_json_one_workload() {
    let v = json_of(&tidepool(&[
        "compare",
        "--workload",
        TINY,
        "--policies",
        "auto,hisdyn:max=20,p=0.05,tpr",
        "--sizes",
        "1,2",
        "--json",
        "--quiet",
    ]));
    assert_eq!(v["workload"], TINY);
    let oracle = &v["oracle"];
    assert!([1, 2].contains(&oracle["size"].as_u64().unwrap()));
    assert!(num(oracle, "throughput") > 0.0);
    assert!(num(oracle, "p99_wait_us") >= 0.0);
    let p = v["policies"].as_array().unwrap();
    let names: Vec<&str> = p.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["auto", "hisdyn:max=20,p=0.05", "tpr"]);
    for r in p {
        for key in [
            "throughput",
            "mean_wait_us",
            "p99_wait_us",
            "p99_submit_blocked_us",
            "avg_threads",
            "throughput_vs_oracle",
            "p99_wait_vs_oracle",
            "p99_turnaround_vs_oracle",
        ] {
            assert!(num(r, key) >= 0.0, "{key} in {r}");
        }
        assert!(r["threads_created"].as_u64().is_some());
        let ratio = num(r, "throughput_vs_oracle");
        assert!(ratio > 0.2 && ratio < 5.0, "{ratio}");
    }
    assert_eq!(p[2]["threads_created"], 200, "tpr makes a thread per task");
}

#[test]
fn compare_one_workload_text_shows_p99_turnaround_vs_oracle() {
    let o = tidepool(&["compare", "-w", TINY, "-p", "auto,tpr", "-s", "1,2", "-q"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // No summary with one workload, but the per-workload p99 turnaround table.
    assert!(!text.contains("== summary"), "{text}");
    let (_, table) = text
        .split_once("== p99 turnaround vs oracle, per workload")
        .unwrap_or_else(|| panic!("no p99 turnaround table in {text}"));
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[1].contains("auto") && lines[1].contains("tpr"),
        "{text}"
    );
    assert!(lines[3].starts_with("poisson:"), "{text}");
}

#[test]
fn compare_several_workloads_has_a_summary_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let v = json_of(&tidepool(&[
        "compare",
        "-w",
        &format!("{TINY},{TINY2}"),
        "-p",
        "auto",
        "-p",
        "fixed:2",
        "-s",
        "1,2",
        "--json",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]));
    let w = v["workloads"].as_array().unwrap();
    assert_eq!(w.len(), 2);
    assert_eq!(w[1]["workload"], TINY2);
    let s = v["summary"].as_array().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0]["policy"], "auto");
    assert_eq!(s[0]["workloads"], 2);
    for key in [
        "geomean_throughput_vs_oracle",
        "geomean_turnaround_vs_oracle",
        "geomean_p99_wait_vs_oracle",
        "geomean_p99_turnaround_vs_oracle",
    ] {
        assert!(num(&s[0], key) > 0.0, "{key} in {}", s[0]);
    }
    for r in w[0]["policies"].as_array().unwrap() {
        assert!(num(r, "p99_turnaround_vs_oracle") > 0.0, "{r}");
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Summary") && md.contains("size.svg"), "{md}");
    assert!(
        md.contains("p99 turnaround vs oracle")
            && md.contains("p99 turnaround relative to the oracle, per workload"),
        "{md}"
    );
    assert!(md.contains("## Bar") && md.contains("both met"), "{md}");
    // The report opens with the verdict and the summary figure.
    let verdict = md.find("**Verdict**").expect("a verdict");
    let figure = md.find("](summary.svg)").expect("the summary figure");
    assert!(
        verdict < figure && figure < md.find("## Summary").unwrap(),
        "{md}"
    );
    assert!(
        md.contains("*RAIT*") && md.contains("*Bar*"),
        "terms explained: {md}"
    );
    assert_svg(&out.join("summary.svg"));
    for entry in std::fs::read_dir(&out).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            for f in ["throughput.svg", "rait.svg", "size.svg", "wait-ccdf.svg"] {
                assert_svg(&p.join(f));
            }
        }
    }
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 3, "{csv}"); // oracle + 2 policies per workload
    assert!(
        csv.starts_with("workload,policy,throughput,")
            && csv
                .lines()
                .next()
                .unwrap()
                .ends_with(",p99_wait_vs_oracle,p99_turnaround_vs_oracle"),
        "{csv}"
    );
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",threads_created,avg_threads,geomean_p99_turnaround_vs_oracle"),
        "{csv}"
    );
}

fn spread_ok(s: &Value) {
    let (med, min, max) = (num(s, "median"), num(s, "min"), num(s, "max"));
    assert!(min <= med && med <= max && min > 0.0, "{s}");
}

#[test]
fn compare_repeats_json_has_every_repeat_and_the_medians() {
    let v = json_of(&tidepool(&[
        "compare",
        "-w",
        TINY,
        "-p",
        "auto,tpr",
        "-s",
        "1,2",
        "--repeats",
        "2",
        "--json",
        "-q",
    ]));
    assert_eq!(v["repeats_requested"], 2);
    assert_eq!(v["repeats_complete"], 2);
    assert_eq!(v["dropped_partial_repeat"], false);
    assert_eq!(v["cancelled"], false);
    // Each repeat is the object `--json` prints without --repeats.
    let reps = v["repeats"].as_array().unwrap();
    assert_eq!(reps.len(), 2);
    for r in reps {
        assert_eq!(r["workload"], TINY);
        assert!([1, 2].contains(&r["oracle"]["size"].as_u64().unwrap()));
        assert_eq!(r["policies"].as_array().unwrap().len(), 2);
        assert!(num(&r["policies"][0], "p99_wait_vs_oracle") > 0.0);
        assert!(num(&r["policies"][0], "p99_turnaround_vs_oracle") > 0.0);
    }
    let m = &v["median"];
    assert_eq!(m["repeats"], 2);
    assert!(m["summary"].as_array().unwrap().is_empty(), "one workload");
    let w = &m["workloads"][0];
    assert_eq!(w["workload"], TINY);
    assert_eq!(
        w["oracle"]["sizes"],
        serde_json::json!([reps[0]["oracle"]["size"], reps[1]["oracle"]["size"]])
    );
    let policies = w["policies"].as_array().unwrap();
    let names: Vec<&str> = policies
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["auto", "tpr"]);
    for (j, p) in policies.iter().enumerate() {
        assert_eq!(p["repeats"], 2);
        for key in [
            "throughput_vs_oracle",
            "turnaround_vs_oracle",
            "p99_wait_vs_oracle",
            "p99_turnaround_vs_oracle",
        ] {
            spread_ok(&p[key]);
            // Two repeats: the median is the mean of the per-repeat ratios.
            let mean =
                (num(&reps[0]["policies"][j], key) + num(&reps[1]["policies"][j], key)) / 2.0;
            assert!((num(&p[key], "median") - mean).abs() < 1e-9, "{key}: {p}");
        }
        let tput = (num(&reps[0]["policies"][j], "throughput")
            + num(&reps[1]["policies"][j], "throughput"))
            / 2.0;
        assert!((num(p, "throughput") - tput).abs() < 1e-6, "{p}");
    }
}

#[test]
fn compare_repeats_tables_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let o = tidepool(&[
        "compare",
        "-w",
        &format!("{TINY},{TINY2}"),
        "-p",
        "auto,fixed:2",
        "-s",
        "1,2",
        "--repeats",
        "2",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("median (min–max) over 2 repeats"), "{text}");
    assert!(text.contains("== summary over 2 repeats"), "{text}");
    assert!(text.contains("oracle (median)"), "{text}");
    assert!(
        text.contains("p99 turnaround vs oracle")
            && text.contains("== p99 turnaround vs oracle, per workload, median over repeats"),
        "{text}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for needle in [
        "**Repeats.**",
        "## Summary",
        "## Bar",
        "(medians over 2 repeats)",
        "### Policies: median over 2 repeats",
        "### Static sweep (last repeat)",
        "size.svg",
    ] {
        assert!(md.contains(needle), "`{needle}` not in {md}");
    }
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(j["repeats"].as_array().unwrap().len(), 2);
    assert_eq!(j["repeats"][0]["workloads"].as_array().unwrap().len(), 2);
    assert_eq!(j["median"]["summary"][0]["policy"], "auto");
    spread_ok(&j["median"]["summary"][0]["geomean_throughput_vs_oracle"]);
    spread_ok(&j["median"]["summary"][0]["geomean_p99_turnaround_vs_oracle"]);
    spread_ok(&j["median"]["workloads"][1]["policies"][0]["p99_turnaround_vs_oracle"]);
    let csv = std::fs::read_to_string(out.join("compare.csv")).unwrap();
    assert!(csv.starts_with("repeat,workload,policy,"), "{csv}");
    assert_eq!(csv.lines().count(), 1 + 2 * 2 * 3, "{csv}"); // repeats × workloads × (oracle + 2)
    let csv = std::fs::read_to_string(out.join("median.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 3, "{csv}");
    assert!(
        csv.lines().next().unwrap().ends_with(
            ",p99_wait_vs_oracle_max,p99_turnaround_vs_oracle,p99_turnaround_vs_oracle_min,p99_turnaround_vs_oracle_max"
        ),
        "{csv}"
    );
}

/// `reproduce bahadur` on a tiny trace: the JSON shape of the claims, and the
/// Markdown page with its command in the `--out` folder.
#[test]
fn reproduce_prints_claims_and_writes_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pages");
    let page = out.join("reproduction.md");
    let v = json_of(&tidepool(&[
        "reproduce",
        "bahadur",
        "--scale",
        "0.01",
        "--json",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]));
    let claims = v["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 3, "{v}");
    assert_eq!(v.as_object().unwrap().len(), 1, "only `claims`: {v}");
    for c in claims {
        assert_eq!(c.as_object().unwrap().len(), 6, "{c}");
        for key in ["paper", "claim", "paper_value", "ours", "why"] {
            assert!(!c[key].as_str().unwrap().is_empty(), "{key} in {c}");
        }
        let verdict = c["verdict"].as_str().unwrap();
        assert!(
            ["reproduced", "not reproduced", "not comparable"].contains(&verdict),
            "{c}"
        );
    }
    let md = std::fs::read_to_string(&page).unwrap();
    assert!(
        md.contains("Command: `tidepool reproduce bahadur --scale 0.01"),
        "{md}"
    );
    assert!(md.contains("| Bahadur et al. |"), "{md}");
    assert_fails(&["reproduce", "nope"], 2, &["unknown paper `nope`"]);
    let file = page.to_str().unwrap();
    assert_fails(
        &["reproduce", "bahadur", "-q", "--out", file],
        2,
        &["--out", "is a file", "names a folder"],
    );
}

/// Without `--out`, `reproduce` writes into `tidepool-reproduction/` under
/// the current directory, and nowhere else.
#[test]
fn reproduce_writes_into_the_current_directory_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tidepool"))
        .args(["reproduce", "bahadur", "--scale", "0.01", "-q"])
        .current_dir(dir.path())
        .output()
        .expect("the binary runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let written: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(written, ["tidepool-reproduction"], "{written:?}");
    let md =
        std::fs::read_to_string(dir.path().join("tidepool-reproduction/reproduction.md")).unwrap();
    assert!(md.contains("| Bahadur et al. |"), "{md}");
}

/// A closed-loop workload replays through `run`: every task completes.
#[test]
fn closed_loop_workload_runs() {
    let v = json_of(&tidepool(&[
        "run",
        "-w",
        "closed:clients=4,think=exp:1ms,n=100,service=exp:200us,free=50,seed=3",
        "--policy",
        "auto",
        "--json",
        "-q",
    ]));
    assert_eq!(v["tasks"], 100, "{v}");
    assert_eq!(v["completed"], 100, "{v}");
}

/// `gen` of a closed loop writes the clients into the file, and the file
/// replays closed-loop: one client with no think time runs its ten 20 ms
/// tasks one after another (≥ 200 ms), where an open-loop replay of the
/// same file would start all ten at once on the ten workers.
#[test]
fn gen_of_a_closed_loop_replays_closed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("closed.trace");
    let spec = "closed:clients=1,think=const:0ms,n=10,service=const:20ms,free=100,seed=1";
    let o = tidepool(&["gen", spec, "-o", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let back = read_trace_file(&file).unwrap();
    assert_eq!(back.clients, Some(1));
    assert_eq!(
        back.tasks,
        spec.parse::<GenSpec>().unwrap().generate().tasks
    );
    let v = json_of(&tidepool(&[
        "run",
        "--trace",
        file.to_str().unwrap(),
        "--policy",
        "fixed:10",
        "--json",
        "-q",
    ]));
    assert_eq!(v["completed"], 10, "{v}");
    let secs = v["duration_s"].as_f64().unwrap();
    assert!(
        secs >= 0.2,
        "replayed as an open loop: {secs} s for ten 20 ms tasks in a row"
    );
}

#[test]
fn gen_round_trips_through_the_trace_format() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.trace");
    let o = tidepool(&["gen", TINY, "-o", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("wrote 200 tasks"));
    let back = read_trace_file(&file).unwrap();
    let direct = TINY.parse::<GenSpec>().unwrap().generate();
    assert_eq!(back.tasks, direct.tasks);
    // and it replays from the file
    let v = json_of(&tidepool(&[
        "run",
        "--trace",
        file.to_str().unwrap(),
        "--policy",
        "fixed:2",
        "--json",
        "-q",
    ]));
    assert_eq!(v["completed"], 200);
    assert_eq!(v["policy"], "fixed:2");
    // no -o: the trace on stdout
    let o = tidepool(&["gen", "cpu", "--scale", "0.001"]);
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .count(),
        8
    );
}

fn assert_fails(args: &[&str], code: i32, needles: &[&str]) {
    let o = tidepool(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}: nothing on stdout");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` not in {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_gives_clear_errors() {
    assert_fails(
        &["run", "-w", "cpu", "--policy", "bogus"],
        2,
        &["bogus", "valid forms", "xu-bode"],
    );
    assert_fails(
        &["compare", "-w", "cpu", "--policies", "auto,watermark:9..3"],
        2,
        &["watermark:9..3", "valid forms"],
    );
    assert_fails(
        &["run", "-w", "nosuch", "--policy", "auto"],
        2,
        &["unknown workload `nosuch`", "cpu, io"],
    );
    assert_fails(&["run", "-w", "poisson:rate=fast"], 2, &["rate"]);
    assert_fails(
        &["run", "--trace", "/no/such/file.trace"],
        1,
        &["/no/such/file.trace"],
    );
    assert_fails(&["sweep", "-w", "cpu", "--sizes", "4..2"], 2, &["4..2"]);
    assert_fails(&["run"], 2, &["--trace", "--workload"]);
    assert_fails(&["frobnicate"], 2, &["frobnicate"]);
    assert_fails(
        &[
            "run",
            "-w",
            TINY,
            "--min-threads",
            "9",
            "--max-threads",
            "3",
        ],
        2,
        &["--min-threads"],
    );
    for bad in ["0", "21", "many"] {
        assert_fails(
            &["compare", "-w", TINY, "--repeats", bad],
            2,
            &["--repeats", bad],
        );
    }
    assert_fails(&["compare", "-w", TINY, "--repeats", "0"], 2, &["1..=20"]);
    assert_fails(&["demo", "--repeats", "21"], 2, &["--repeats", "1..=20"]);
}

#[test]
fn help_has_examples() {
    for sub in [
        "gen",
        "run",
        "sweep",
        "compare",
        "demo",
        "calibrate",
        "reproduce",
    ] {
        let o = tidepool(&[sub, "--help"]);
        assert!(o.status.success());
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("Examples:"), "{sub}");
        assert!(text.contains(&format!("tidepool {sub}")), "{sub}");
    }
    for sub in ["compare", "demo"] {
        let o = tidepool(&[sub, "--help"]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("--repeats"), "{sub}: {text}");
    }
    let demo = String::from_utf8_lossy(&tidepool(&["demo", "--help"]).stdout).to_string();
    assert!(demo.contains("tidepool demo --repeats 3"), "{demo}");
}

#[test]
fn cluster_commands_reject_bad_options_with_usage_errors() {
    for (args, why) in [
        (vec!["node", "--nats", "http://127.0.0.1:4222"], "scheme"),
        (vec!["node", "--policy", "tpr"], "not a pool policy"),
        (vec!["node", "--ack-wait", "10ms"], "1s..=1h"),
        (vec!["node", "--drain-timeout", "30"], "`30` has no unit"),
        (
            vec!["node", "--max-task-time", "3600"],
            "units: ns, us, ms, s",
        ),
        (vec!["node", "--max-task-time", "10ms"], "1s..=1day"),
        (vec!["node", "--drain-timeout", "2h"], "0s..=1h"),
        (vec!["cluster", "status", "--listen", "5"], "no unit"),
        (vec!["cluster", "chaos", "--task", "2m"], "0s..=1m"),
        (vec!["cluster", "chaos", "--ack-wait", "10"], "no unit"),
        (
            vec!["cluster", "replay", "-w", TINY, "--timeout", "soon"],
            "not a duration",
        ),
        (vec!["cluster", "chaos", "--nodes", "1"], "between 2 and 16"),
        (
            vec![
                "cluster", "replay", "--local", "1", "--policy", "nope", "-w", TINY,
            ],
            "invalid policy spec",
        ),
        (vec!["cluster", "status", "--nats", "nats://:1"], "no host"),
    ] {
        let out = tidepool(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

#[test]
fn cluster_limit_is_stored_in_the_broker_and_shown_by_status() {
    let server = tidepool_cluster::NatsServer::start().unwrap();
    let url = server.url();
    let set = tidepool(&[
        "cluster",
        "limit",
        "thumbnail",
        "--nats",
        &url,
        "--concurrency",
        "3",
        "--rate",
        "20/s",
    ]);
    let out = String::from_utf8_lossy(&set.stdout);
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    assert!(out.contains("thumbnail: concurrency 3, rate 20/s"), "{out}");
    let status = tidepool(&["cluster", "status", "--nats", &url, "--listen", "200ms"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("thumbnail: concurrency 3, rate 20/s"),
        "{text}"
    );
    let json = tidepool(&[
        "cluster", "status", "--nats", &url, "--listen", "200ms", "--json",
    ]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["limits"]["thumbnail"]["concurrency"], 3);
    let clear = tidepool(&["cluster", "limit", "thumbnail", "--nats", &url, "--clear"]);
    assert!(clear.status.success());
    let status = tidepool(&["cluster", "status", "--nats", &url, "--listen", "200ms"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("limits: none"), "{text}");
}

#[test]
fn cluster_replay_runs_a_workload_on_local_nodes() {
    let out = tidepool(&[
        "cluster",
        "replay",
        "--local",
        "2",
        "--json",
        "-w",
        "poisson:rate=400,service=const:5ms,free=100,n=150,seed=3",
    ]);
    let v = json_of(&out);
    assert_eq!(num(&v, "requests"), 150.0);
    assert_eq!(num(&v, "failed"), 0.0);
    assert_eq!(num(&v["metrics"], "completed"), 150.0);
    let per_node = v["per_node"].as_object().unwrap();
    assert_eq!(
        per_node.values().map(|n| n.as_u64().unwrap()).sum::<u64>(),
        150
    );
    assert!(num(&v, "broker_cpu_us_per_request") > 0.0);
}

/// `tidepool sim` of `workload` on one core and one `fixed:1` worker that
/// spawns and wakes for free, plus `extra` options; its JSON.
fn sim_one_worker_on_one_core(workload: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "sim",
        "-w",
        workload,
        "--cores",
        "1",
        "--sizes",
        "1",
        "--policies",
        "fixed:1",
        "--spawn-cost",
        "0s",
        "--wake-cost",
        "0s",
        "--json",
        "-q",
    ];
    args.extend_from_slice(extra);
    json_of(&tidepool(&args))
}

#[test]
fn sim_runs_a_closed_loop_as_a_closed_loop() {
    // One client that thinks 1 ms and waits for a 1 ms answer sends a
    // task every 2 ms: 500/s. Read as an open loop (1 ms gaps) it would be
    // 1,000/s. (The replay's own costs aside: the hand-off's CPU and the
    // driver's would stretch each answer by tens of µs.)
    let v = sim_one_worker_on_one_core(
        "closed:clients=1,think=const:1ms,n=400,service=const:1ms",
        &[
            "--sleep-cpu",
            "0s",
            "--handoff-cpu",
            "0s",
            "--driver-spin",
            "0s",
        ],
    );
    let throughput = v["policies"][0]["throughput"].as_f64().unwrap();
    assert!((throughput - 500.0).abs() < 5.0, "{throughput}: {v}");
}

#[test]
fn sim_ideal_sets_every_cost_to_zero_and_each_cost_option_still_counts() {
    // Tasks that compute and sleep, so that every cost shows: `--ideal`
    // is the eight cost options at zero, and not the calibrated machine.
    let workload = "poisson:rate=1500,n=300,service=exp:400us,free=50,seed=3";
    let zeros = [
        "--oversleep",
        "0s",
        "--preempt",
        "0s",
        "--slice",
        "0s",
        "--driver-spin",
        "0s",
        "--sleep-cpu",
        "0s",
        "--handoff-cpu",
        "0s",
    ];
    let ideal = sim_one_worker_on_one_core(workload, &["--ideal"]);
    let each = sim_one_worker_on_one_core(workload, &zeros);
    assert_eq!(ideal["policies"], each["policies"]);
    let calibrated = sim_one_worker_on_one_core(workload, &[]);
    assert_ne!(ideal["policies"], calibrated["policies"]);
    // One cost back on top of the ideal machine: the driver's spin shares
    // the one core with a 950 µs task's last 50 µs (no slice to wait for).
    let turnaround = |extra: &[&str]| {
        let v = sim_one_worker_on_one_core("periodic:rate=1000,n=200,service=const:950us", extra);
        v["policies"][0]["mean_turnaround_us"].as_f64().unwrap()
    };
    assert_eq!(turnaround(&["--ideal"]), 950.0);
    let spun = turnaround(&["--ideal", "--driver-spin", "100us"]);
    assert!(spun > 990.0, "{spun}");
    let bad = tidepool(&["sim", "--ideal", "--bench"]);
    assert!(!bad.status.success());
}

#[test]
fn sim_charges_the_replay_drivers_spin_unless_told_not_to() {
    // One core: without the slice's rule (`--slice 0s`) a 950 µs task shares
    // its last 50 µs with the driver's spin before the next arrival (the
    // replay's 100 µs by default); with it (the default) the woken driver
    // waits for the task's part and spins what is left, and the task is
    // not stretched.
    let run = |extra: &[&str]| {
        let mut args = vec!["--sleep-cpu", "0s", "--handoff-cpu", "0s"];
        args.extend_from_slice(extra);
        let v = sim_one_worker_on_one_core("periodic:rate=1000,n=200,service=const:950us", &args);
        v["policies"][0]["mean_turnaround_us"].as_f64().unwrap()
    };
    assert_eq!(run(&["--driver-spin", "0s", "--slice", "0s"]), 950.0);
    let spun = run(&["--slice", "0s"]);
    assert!(spun > 990.0, "{spun}");
    assert_eq!(run(&[]), 950.0);
    let bad = tidepool(&["sim", "-w", TINY, "--preempt", "2s"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("--preempt") && err.contains("0s..=1s"),
        "{err}"
    );
    // Every cost option wants a unit: a bare number names the units.
    for flag in [
        "--spawn-cost",
        "--wake-cost",
        "--oversleep",
        "--preempt",
        "--slice",
        "--driver-spin",
        "--sleep-cpu",
        "--handoff-cpu",
    ] {
        let bad = tidepool(&["sim", "-w", TINY, flag, "100"]);
        assert_eq!(bad.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(
            err.contains(flag) && err.contains("no unit") && err.contains("units: ns, us"),
            "{flag}: {err}"
        );
    }
}

#[test]
fn sim_load_multiplies_the_offered_load_and_checks_its_range() {
    let run = |load: &str| {
        json_of(&tidepool(&[
            "sim",
            "-w",
            TINY,
            "--cores",
            "4",
            "--sizes",
            "2",
            "--policies",
            "auto",
            "--load",
            load,
            "--json",
            "-q",
        ]))
    };
    let (one, three) = (run("1"), run("3"));
    let tasks = |v: &Value| v.to_string().matches("\"completed\":600").count();
    assert_eq!(tasks(&one), 0, "{one}");
    assert!(
        tasks(&three) > 0,
        "three copies of 200 tasks complete 600: {three}"
    );
    let bad = tidepool(&["sim", "-w", TINY, "--load", "0"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("--load 0 must be between 1 and 100000"),
        "{err}"
    );
}
