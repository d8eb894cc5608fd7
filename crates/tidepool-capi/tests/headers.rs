//! The committed headers are what cbindgen makes of the sources today.
//!
//! Fails when `include/tidepool.h` or `include/threadpool.h` is stale. Run
//! with `TIDEPOOL_BLESS=1` to rewrite them.

mod common;

use std::path::Path;

use common::{exports_in, source_exports};

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
            "options.rs",
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

#[test]
fn the_headers_declare_every_export() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let headers: String = HEADERS
        .iter()
        .map(|(file, _, _)| std::fs::read_to_string(dir.join(file)).unwrap_or_default())
        .collect();
    let exports = source_exports();
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

/// The thesis's functions `X`, exported as `tidepool_X` from `threadpool.rs`.
fn thesis_names() -> Vec<String> {
    let exports = exports_in(&common::crate_dir().join("src/threadpool.rs"));
    assert!(exports.len() >= 6, "{exports:?}");
    exports
        .iter()
        .map(|e| {
            let name = e.strip_prefix("tidepool_");
            name.unwrap_or_else(|| panic!("{e} has no tidepool_ prefix"))
                .to_string()
        })
        .collect()
}

#[test]
fn threadpool_h_wraps_each_thesis_export_under_the_thesis_name() {
    let header = std::fs::read_to_string(common::crate_dir().join("include/threadpool.h")).unwrap();
    for name in thesis_names() {
        // `static inline <type> name(<args>) {` followed by a body calling the export.
        let wrapper = header
            .split("static inline ")
            .skip(1)
            .find(|w| {
                w.split('{')
                    .next()
                    .unwrap_or_default()
                    .contains(&format!(" {name}("))
            })
            .unwrap_or_else(|| panic!("threadpool.h has no static inline {name}()"));
        let body = wrapper.split('}').next().unwrap_or_default();
        assert!(
            body.contains(&format!("tidepool_{name}(")),
            "the wrapper {name}() does not call tidepool_{name}(): {body}"
        );
    }
}

#[test]
fn the_c_test_program_calls_every_export() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let test = std::fs::read_to_string(dir.join("c/tests/test_capi.c")).unwrap();
    let thesis = thesis_names();
    // A thesis function counts as called through its wrapper (checked above).
    let called = |export: &str| {
        let wrapper = export
            .strip_prefix("tidepool_")
            .filter(|n| thesis.iter().any(|t| t == n));
        test.contains(&format!("{}(", wrapper.unwrap_or(export)))
    };
    let missing: Vec<_> = source_exports()
        .into_iter()
        .filter(|name| !called(name))
        .collect();
    assert!(
        missing.is_empty(),
        "c/tests/test_capi.c never calls {missing:?}"
    );
}
