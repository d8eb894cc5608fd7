//! The committed headers are what cbindgen makes of the sources today.
//!
//! Fails when `include/tidepool.h` or `include/threadpool.h` is stale. Run
//! with `TIDEPOOL_BLESS=1` to rewrite them.

use std::path::Path;

/// Each header: its file, its cbindgen config and the sources it declares.
const HEADERS: &[(&str, &str, &[&str])] = &[
    (
        "include/tidepool.h",
        "cbindgen-tidepool.toml",
        &[
            "error.rs",
            "version.rs",
            "handle.rs",
            "task.rs",
            "builder.rs",
            "pool.rs",
            "stats.rs",
        ],
    ),
    (
        "include/threadpool.h",
        "cbindgen-threadpool.toml",
        &["threadpool.rs"],
    ),
];

fn generate(dir: &Path, config: &str, sources: &[&str]) -> String {
    let config = cbindgen::Config::from_file(dir.join(config)).expect("cbindgen config");
    let mut builder = cbindgen::Builder::new().with_config(config);
    for src in sources {
        builder = builder.with_src(dir.join("src").join(src));
    }
    let mut out = Vec::new();
    builder
        .generate()
        .expect("cbindgen could not read the sources")
        .write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[test]
fn committed_headers_are_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var_os("TIDEPOOL_BLESS").is_some();
    let mut stale = Vec::new();
    for (file, config, sources) in HEADERS {
        let fresh = generate(dir, config, sources);
        let path = dir.join(file);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != fresh {
            if bless {
                std::fs::write(&path, &fresh).expect("write the header");
            } else {
                stale.push(*file);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "stale headers in crates/tidepool-capi: {stale:?}; regenerate them with \
         `TIDEPOOL_BLESS=1 cargo test -p tidepool-capi --test headers` and commit them"
    );
}

/// The names of every `#[no_mangle]` function in the sources.
fn exports(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir.join("src")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if line.trim() == "#[no_mangle]" {
                let sig = lines.next().unwrap_or_default();
                let name = sig
                    .split("fn ")
                    .nth(1)
                    .and_then(|s| s.split('(').next())
                    .unwrap_or(sig);
                names.push(name.to_string());
            }
        }
    }
    names.sort();
    names
}

#[test]
fn the_headers_declare_every_export() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let headers: String = HEADERS
        .iter()
        .map(|(file, _, _)| std::fs::read_to_string(dir.join(file)).unwrap_or_default())
        .collect();
    let exports = exports(dir);
    assert!(exports.len() >= 30, "{exports:?}");
    let missing: Vec<_> = exports
        .iter()
        .filter(|name| !headers.contains(&format!("{name}(")))
        .collect();
    assert!(
        missing.is_empty(),
        "exports missing from the headers: {missing:?}"
    );
}

#[test]
fn the_c_test_program_calls_every_export() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let test = std::fs::read_to_string(dir.join("c/tests/test_capi.c")).unwrap();
    let missing: Vec<_> = exports(dir)
        .into_iter()
        .filter(|name| !test.contains(&format!("{name}(")))
        .collect();
    assert!(
        missing.is_empty(),
        "c/tests/test_capi.c never calls {missing:?}"
    );
}
