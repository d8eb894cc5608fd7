//! Hostile input: every parser and spec grammar of the crate, fed the cases
//! of the hostile-input review (each once a panic, a hang or a runaway allocation), the
//! committed corpus in `tests/corpus/`, and property-based fuzzing
//! (proptest; failures are saved in `tests/hostile.proptest-regressions`
//! and replayed first on every run).
//!
//! The rule checked everywhere: a parser returns `Ok` or an error naming
//! where the problem is; it never panics, and its error message stays short
//! whatever the input.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use tidepool_workload::format::{parse_trace_str, parse_trace_with, write_trace};
use tidepool_workload::import::azure::{
    parse_azure_str, parse_azure_with, parse_timestamp, AzureOptions,
};
use tidepool_workload::import::swf::{parse_swf_str, parse_swf_with, SwfOptions};
use tidepool_workload::suite::suite_trace;
use tidepool_workload::{Dist, GenSpec, Limits};

/// Small limits so fuzzed specs and files generate quickly.
const SMALL: Limits = Limits {
    max_tasks: 2_000,
    max_line_bytes: 4_096,
};

/// Every parser on the same bytes: none may panic, errors stay short.
fn all_parsers(bytes: &[u8], limits: &Limits) {
    let check = |what: &str, r: Result<usize, String>| {
        if let Err(e) = r {
            assert!(
                e.len() < 600,
                "{what}: error too long ({} bytes): {e:.200}",
                e.len()
            );
            assert!(!e.contains("Error {"), "{what}: debug struct in {e}");
        }
    };
    check(
        "trace",
        parse_trace_with(bytes, "f", limits)
            .map(|t| t.len())
            .map_err(|e| e.to_string()),
    );
    check(
        "swf",
        parse_swf_with(bytes, "f", &SwfOptions::default(), limits)
            .map(|i| i.trace.len())
            .map_err(|e| e.to_string()),
    );
    check(
        "azure",
        parse_azure_with(bytes, "f", &AzureOptions::default(), limits)
            .map(|i| i.trace.len())
            .map_err(|e| e.to_string()),
    );
}

fn swf_line(fields: &[&str]) -> String {
    let mut f: Vec<String> = fields.iter().map(|s| s.to_string()).collect();
    f.resize(18, "-1".into());
    f.join(" ") + "\n"
}

fn swf_err(text: &str) -> String {
    parse_swf_str(text, "t.swf", &SwfOptions::default())
        .unwrap_err()
        .to_string()
}

const AZ: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n";

fn az_err(text: &str) -> String {
    parse_azure_str(text, "t.csv", &AzureOptions::default())
        .unwrap_err()
        .to_string()
}

fn spec_err(s: &str) -> String {
    s.parse::<GenSpec>().unwrap_err().to_string()
}

// ---- the hostile cases, one test each --------------------------------

#[test]
fn swf_times_of_1e300_are_range_errors() {
    assert_eq!(
        swf_err(&swf_line(&["1", "0", "-1", "1e300"])),
        "t.swf:1: field `run_time`: `1e300` is out of range (seconds, 0 to 1e10, or -1 for unknown)"
    );
    assert!(swf_err(&swf_line(&["1", "1e300", "-1", "5"]))
        .starts_with("t.swf:1: field `submit_time`: `1e300` is out of range"));
    // a tiny compression cannot push arrivals past what a Duration holds
    let opts = SwfOptions {
        compress: 1e-300,
        ..SwfOptions::default()
    };
    let two = swf_line(&["1", "0", "-1", "5"]) + &swf_line(&["2", "1e10", "-1", "5"]);
    let e = parse_swf_str(&two, "t.swf", &opts).unwrap_err().to_string();
    assert!(e.contains("`compress`") && e.contains("1e-300"), "{e}");
    let opts = SwfOptions {
        compress: 1e-6,
        ..SwfOptions::default()
    };
    let e = parse_swf_str(&two, "t.swf", &opts).unwrap_err().to_string();
    assert!(e.contains("584 years"), "{e}");
}

#[test]
fn swf_job_numbers_are_whole_and_unique() {
    // `gen` used to write these, and `run` then rejected the trace
    let dup = swf_line(&["5", "0", "-1", "5"]) + &swf_line(&["5", "3", "-1", "5"]);
    assert_eq!(
        swf_err(&dup),
        "t.swf:2: field `job_number`: job number 5 already used on line 1"
    );
    assert!(swf_err(&swf_line(&["1e300", "0", "-1", "5"])).contains("not a whole number"));
    assert!(swf_err(&swf_line(&["1.5", "0", "-1", "5"])).contains("not a whole number"));
    // skipped (unknown) jobs do not take their number
    let text = swf_line(&["5", "-1", "-1", "5"]) + &swf_line(&["5", "3", "-1", "5"]);
    let imp = parse_swf_str(&text, "t.swf", &SwfOptions::default()).unwrap();
    assert_eq!((imp.trace.len(), imp.skipped_unknown), (1, 1));
    // whatever the importer accepts, the trace format reads back
    let mut out = Vec::new();
    write_trace(&imp.trace, &mut out).unwrap();
    parse_trace_str(std::str::from_utf8(&out).unwrap(), "back").unwrap();
}

#[test]
fn azure_timestamps_spanning_centuries_do_not_overflow() {
    // once an i64 overflow: more than 292 years of nanoseconds
    let text = format!("{AZ}0001-01-01 00:00:00,1,1\n9999-12-31 23:59:59,1,1\n");
    let imp = parse_azure_str(&text, "t.csv", &AzureOptions::default()).unwrap();
    let years = imp.trace.span().as_secs_f64() * 60.0 / (365.25 * 86_400.0);
    assert!((years - 9999.0).abs() < 1.0, "{years}");
    // compressed less, the span no longer fits: an error, not a wrap
    let opts = AzureOptions {
        compress: 1.0,
        ..AzureOptions::default()
    };
    let e = parse_azure_str(&text, "t.csv", &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("t.csv:3: field `TIMESTAMP`:") && e.contains("584 years"),
        "{e}"
    );
}

#[test]
fn azure_invalid_dates_bytes_and_boms() {
    assert_eq!(
        az_err(&format!("{AZ}2023-02-31 00:00:00,1,1\n")),
        "t.csv:2: field `TIMESTAMP`: `2023-02-31 00:00:00` has day 31, but 2023-02 has 28 days"
    );
    // a bad byte: the line, no Rust debug struct
    let mut bytes = format!("{AZ}2023-02-01 00:00:00,1").into_bytes();
    bytes.extend_from_slice(b"\xff,1\n");
    let e = parse_azure_with(
        &bytes[..],
        "t.csv",
        &AzureOptions::default(),
        &Limits::default(),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "t.csv:2: the line is not valid UTF-8 (byte 22 of the line)"
    );
    // a BOM inside a quoted value is shown, not invisible
    let e = az_err(&format!("{AZ}\"\u{feff}2023-02-01 00:00:00\",1,1\n"));
    assert!(e.contains("`\\u{feff}2023-02-01 00:00:00`"), "{e}");
    // a BOM at the start of the file is dropped
    let text = format!("\u{feff}{AZ}2023-02-01 00:00:00,1,1\n");
    assert_eq!(
        parse_azure_str(&text, "t.csv", &AzureOptions::default())
            .unwrap()
            .records,
        1
    );
    assert!(az_err("").contains("missing header"));
}

#[test]
fn azure_token_counts_saturate() {
    let text = format!("{AZ}2023-02-01 00:00:00,18446744073709551615,18446744073709551615\n");
    let opts = AzureOptions {
        base: Duration::MAX,
        max_service: Duration::MAX,
        ..AzureOptions::default()
    };
    let imp = parse_azure_str(&text, "t.csv", &opts).unwrap();
    assert_eq!(imp.trace.tasks[0].exec(), Duration::MAX);
    assert!(
        az_err(&format!("{AZ}2023-02-01 00:00:00,1,18446744073709551616\n"))
            .contains("not a token count")
    );
}

#[test]
fn an_endless_line_is_an_error_not_8_gb() {
    // /dev/zero: NUL bytes and no newline, ever
    let zeros = std::io::repeat(0).take(1 << 40);
    let e = parse_trace_with(zeros, "/dev/zero", &Limits::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "/dev/zero:1: the line is longer than 65536 bytes, the limit (is this a trace file?)"
    );
    let zeros = std::io::repeat(0).take(1 << 40);
    assert!(parse_swf_with(zeros, "z", &SwfOptions::default(), &Limits::default()).is_err());
    let zeros = std::io::repeat(b'9').take(1 << 40);
    assert!(parse_azure_with(zeros, "z", &AzureOptions::default(), &Limits::default()).is_err());
}

#[test]
fn traces_have_at_most_max_tasks() {
    let lines: String = (1..=3).map(|i| format!("{i} 1 0 1\n")).collect();
    let two = Limits {
        max_tasks: 2,
        ..Limits::default()
    };
    let e = parse_trace_with(lines.as_bytes(), "t", &two)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "t:3: the trace has more than 2 tasks, the limit (raise it with --max-tasks)"
    );
    let swf: String = (1..=3)
        .map(|i| swf_line(&[&i.to_string(), "0", "-1", "1"]))
        .collect();
    assert!(parse_swf_with(swf.as_bytes(), "s", &SwfOptions::default(), &two).is_err());
    let az = format!("{AZ}{}", "2023-02-01 00:00:00,1,1\n".repeat(3));
    assert!(parse_azure_with(az.as_bytes(), "a", &AzureOptions::default(), &two).is_err());
}

#[test]
fn thesis_format_messages_stay_short_and_visible() {
    // a 10 MB token is cut in the message (the line cap stops bigger ones)
    let big = format!("1 1 0 {}\n", "9".repeat(60_000));
    let e = parse_trace_str(&big, "t").unwrap_err().to_string();
    assert!(e.len() < 200 && e.contains("(60000 bytes)"), "{e}");
    let huge = format!("1 1 0 {}\n", "9".repeat(10_000_000));
    let e = parse_trace_str(&huge, "t").unwrap_err().to_string();
    assert!(
        e.len() < 200 && e.contains("longer than 65536 bytes"),
        "{e}"
    );
    // invalid UTF-8 names the line
    let e = parse_trace_with(&b"1 1 0 1\n2 1 0 \xff\n"[..], "t", &Limits::default())
        .unwrap_err()
        .to_string();
    assert_eq!(e, "t:2: the line is not valid UTF-8 (byte 7 of the line)");
    // a leading BOM is dropped; one elsewhere is shown
    assert_eq!(parse_trace_str("\u{feff}1 1 0 1\n", "t").unwrap().len(), 1);
    let e = parse_trace_str("1 1 0 1\n\u{feff}2 1 0 1\n", "t")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`\\u{feff}2`"), "{e}");
    // times: too large, arrival beyond u64 nanoseconds
    let e = parse_trace_str("1 1 0 18446744073709552\n", "t")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is too large (at most 18446744073709551.615 µs"),
        "{e}"
    );
    let e = parse_trace_str("1 1 18446744073709551 1\n2 1 18446744073709551 1\n", "t")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("t:2: field `start_delay_us`: puts the arrival"),
        "{e}"
    );
}

#[test]
fn generator_specs_reject_what_would_panic_hang_or_allocate() {
    for (spec, needle) in [
        (
            "poisson:rate=1e-300",
            "bad value for `rate`: 1e-300 is outside 1e-3..=1e9",
        ),
        ("poisson:rate=1e300", "outside 1e-3..=1e9"),
        (
            "lognormal:rate=100,cv=1e300",
            "bad value for `cv`: 1e300 is outside 0..=100",
        ),
        ("normal:rate=100,cv=-1", "`cv`"),
        (
            "steps:rate=1,steps=1000000000",
            "bad value for `steps`: 1000000000 is outside 1..=10000",
        ),
        (
            "steps:rate=2000,steps=10000,step_time=1000s",
            "more than 1000000 tasks",
        ),
        ("steps:rate=10,step=-50,steps=10", "rate of the last step"),
        ("steps:rate=10,step=1e300", "rate of the last step"),
        (
            "poisson:rate=1,n=10000000000",
            "`n` = 10000000000 is more than 1000000 tasks",
        ),
        ("poisson:rate=1,n=0", "at least 1"),
        ("onoff:rate=0.001,on=1ns,n=1000", "more than 1e8"),
        ("onoff:rate=10,off_rate=1e-300", "`off_rate`"),
        ("poisson:rate=1,service=exp:-1ms", "`-1ms` is negative"),
        ("poisson:rate=1,service=normal:1ms:-1ms", "is negative"),
        ("poisson:rate=1,service=99999999999s", "out of range"),
        ("poisson:rate=1,free=1e300", "1e300 is outside 0..=100"),
    ] {
        let e = spec_err(spec);
        assert!(e.contains(needle), "{spec}: `{needle}` not in: {e}");
        assert!(e.len() < 400, "{spec}: {e}");
    }
    // a long token is cut
    let e = spec_err(&format!("poisson:rate={}", "9".repeat(100_000)));
    assert!(e.len() < 300, "{e}");
    // the limit can be raised
    let big = Limits {
        max_tasks: 20_000_000,
        ..Limits::default()
    };
    assert!(GenSpec::parse_with("poisson:rate=1000,n=10000000", &big).is_ok());
    // and then the span is the bound: 1e7 tasks at 1e-3/s is 1e10 s
    let e = GenSpec::parse_with("poisson:rate=0.001,n=20000000", &big)
        .unwrap_err()
        .to_string();
    assert!(e.contains("longer than 2^64 - 1 ns"), "{e}");
}

#[test]
fn suite_scales_are_bounded() {
    for scale in [1e300, f64::NAN, f64::INFINITY, 0.0, -1.0, 1e-300] {
        let e = suite_trace("io", scale).unwrap_err().to_string();
        assert!(e.contains("`scale`"), "{scale}: {e}");
    }
    // large enough to pass the range check, too many tasks for the limit
    let e = suite_trace("cpu", 1e6).unwrap_err().to_string();
    assert!(e.contains("more than 1000000 tasks"), "{e}");
    let e = suite_trace("steps", 1e6).unwrap_err().to_string();
    assert!(e.contains("`scale`"), "{e}");
    assert_eq!(suite_trace("cpu", 1e-6).unwrap().len(), 1);
}

#[test]
fn heavy_tailed_samples_saturate_instead_of_panicking() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    for d in [
        "lognormal:1000000000s:1ns",
        "lognormal:1ns:1000000000s",
        "lognormal:1000000000s:1000000000s",
        "normal:1000000000s:1000000000s",
        "exp:1000000000s",
        "uniform:0ns:1000000000s",
    ] {
        let dist: Dist = d.parse().unwrap();
        for _ in 0..2_000 {
            let _ = dist.sample(&mut rng);
        }
    }
}

// ---- the committed corpus -------------------------------------------------

#[test]
fn corpus_files_never_panic_any_parser() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        all_parsers(&bytes, &Limits::default());
        all_parsers(&bytes, &SMALL);
        n += 1;
    }
    assert!(n >= 10, "corpus has {n} files");
}

// ---- property-based fuzzing ---------------------------------------------------

/// Bytes that look like trace lines: digits, signs, dots, separators,
/// comments, quotes, BOMs and the odd invalid byte.
fn tracey_bytes() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"0".to_vec()),
        Just(b"1".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"18446744073709551615".to_vec()),
        Just(b"1e300".to_vec()),
        Just(b"0.001".to_vec()),
        Just(b"1.".to_vec()),
        Just(b"nan".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\t".to_vec()),
        Just(b",".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"#".to_vec()),
        Just(b";".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"\xEF\xBB\xBF".to_vec()),
        Just(b"\xff".to_vec()),
        Just(b"2023-02-28 23:59:59.5".to_vec()),
        Just(b"TIMESTAMP,ContextTokens,GeneratedTokens\n".to_vec()),
        Just(b"request_id".to_vec()),
        "[0-9]{1,25}".prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(token, 0..60).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parsers_never_panic_on_tracey_bytes(bytes in tracey_bytes()) {
        all_parsers(&bytes, &SMALL);
    }

    #[test]
    fn parsers_never_panic_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        all_parsers(&bytes, &SMALL);
    }

    /// Whatever the trace parser accepts, it writes and reads back the same.
    #[test]
    fn accepted_traces_round_trip(bytes in tracey_bytes()) {
        if let Ok(t) = parse_trace_with(&bytes[..], "f", &SMALL) {
            let mut out = Vec::new();
            write_trace(&t, &mut out).unwrap();
            let back = parse_trace_str(std::str::from_utf8(&out).unwrap(), "f").unwrap();
            prop_assert_eq!(back.tasks, t.tasks);
        }
    }

    /// Valid SWF lines with fuzzed numbers: imported or refused, and what is
    /// imported reads back through the trace format (unique ids).
    #[test]
    fn swf_numbers(
        rows in proptest::collection::vec(
            (0u64..50, -2.0f64..1e12, -2.0f64..1e12, -2i64..1000), 0..30),
        compress in prop_oneof![Just(3600.0), 1e-7f64..1e13],
    ) {
        let text: String = rows
            .iter()
            .map(|(id, sub, run, user)| {
                swf_line(&[&id.to_string(), &sub.to_string(), "-1", &run.to_string(),
                    "1", "-1", "-1", "-1", "-1", "-1", "1", &user.to_string()])
            })
            .collect();
        let opts = SwfOptions { compress, ..SwfOptions::default() };
        if let Ok(imp) = parse_swf_with(text.as_bytes(), "f", &opts, &SMALL) {
            let mut out = Vec::new();
            write_trace(&imp.trace, &mut out).unwrap();
            prop_assert!(parse_trace_str(std::str::from_utf8(&out).unwrap(), "f").is_ok());
        }
    }

    #[test]
    fn timestamps_never_panic(
        y in -5i64..10_100, m in -1i64..14, d in -1i64..33,
        hh in -1i64..25, mm in -1i64..61, ss in -1i64..62, frac in "[0-9]{0,11}",
    ) {
        let s = format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}:{ss:02}.{frac}");
        let _ = parse_timestamp(&s);
    }

    #[test]
    fn timestamp_strings_never_panic(s in "[0-9 :.T+-]{0,40}") {
        let _ = parse_timestamp(&s);
    }

    /// Any spec-like string: parsed or refused; what parses generates within
    /// the limits (or says why not), prints canonically and parses back.
    #[test]
    fn generator_specs(
        kind in prop_oneof![
            Just("poisson"), Just("periodic"), Just("normal"),
            Just("lognormal"), Just("steps"), Just("onoff"), Just("bogus")],
        pairs in proptest::collection::vec(
            (prop_oneof![
                Just("rate"), Just("n"), Just("cv"), Just("step"), Just("steps"),
                Just("step_time"), Just("on"), Just("off"), Just("off_rate"),
                Just("service"), Just("free"), Just("apps"), Just("seed"), Just("x")],
             prop_oneof![
                Just("0".to_string()), Just("1".to_string()), Just("-1".to_string()),
                Just("1e300".to_string()), Just("1e-300".to_string()), Just("nan".to_string()),
                Just("exp:1ms".to_string()), Just("lognormal:1ns:1000s".to_string()),
                Just("18446744073709551615".to_string()),
                (0.0f64..5000.0).prop_map(|v| v.to_string()),
                "[0-9]{1,4}(ns|us|ms|s)?".prop_map(|s| s),
                "[ -~]{0,12}".prop_map(|s| s)]),
            0..6),
    ) {
        let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let s = format!("{kind}:{}", body.join(","));
        if let Ok(spec) = GenSpec::parse_with(&s, &SMALL) {
            match spec.try_generate(&SMALL) {
                Ok(t) => prop_assert!(t.len() <= SMALL.max_tasks),
                Err(e) => prop_assert!(e.to_string().contains("more than")),
            }
            let again = GenSpec::parse_with(&spec.to_string(), &SMALL);
            prop_assert!(again.is_ok(), "{} -> {}", s, spec);
        }
    }

    #[test]
    fn arbitrary_spec_strings_never_panic(s in any::<String>()) {
        let _ = GenSpec::parse_with(&s, &SMALL);
        let _ = s.parse::<Dist>();
        let _ = tidepool_workload::dist::parse_duration(&s);
    }
}
