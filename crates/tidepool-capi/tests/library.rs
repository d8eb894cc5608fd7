//! The shared library as linkers and loaders see it: which symbols it
//! exports (`nm -D`) and the SONAME programs record (`readelf -d`).
//!
//! Needs `nm` and `readelf` (binutils, installed with `cc`): a missing tool
//! fails the test.

mod common;

use std::process::Command;

use common::{run_ok, shared_lib, soname, source_exports};

/// The symbols the shared library defines for others to link against.
fn dynamic_symbols() -> Vec<String> {
    let mut cmd = Command::new("nm");
    cmd.args(["-D", "--defined-only"]).arg(shared_lib());
    let table = run_ok(cmd, "nm");
    let mut names: Vec<String> = table
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        // `nm` marks a versioned symbol `name@@VERSION`.
        .map(|name| name.split('@').next().unwrap_or(name).to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn only_tidepool_prefixed_symbols_are_exported() {
    let exported = dynamic_symbols();
    let foreign: Vec<_> = exported
        .iter()
        .filter(|name| !name.starts_with("tidepool_"))
        .collect();
    assert!(
        foreign.is_empty(),
        "the shared library exports names without the tidepool_ prefix: {foreign:?}"
    );
    // Every export of the sources is there (so an empty table cannot pass),
    // including the thesis's functions under their prefixed names.
    let missing: Vec<_> = source_exports()
        .into_iter()
        .filter(|name| !exported.contains(name))
        .collect();
    assert!(missing.is_empty(), "not exported: {missing:?}");
    for name in ["tidepool_create_threadpool", "tidepool_dispatch"] {
        assert!(exported.iter().any(|e| e == name), "{name} is not exported");
    }
}

#[test]
fn the_shared_library_has_a_soname_for_its_abi() {
    let major: u32 = env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap();
    let minor = env!("CARGO_PKG_VERSION_MINOR");
    // While the major version is 0, a minor version may break the ABI.
    let abi = if major == 0 {
        format!("0.{minor}")
    } else {
        major.to_string()
    };
    assert_eq!(soname(), Some(format!("libtidepool.so.{abi}")));
}
