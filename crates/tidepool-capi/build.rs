//! Gives the shared library its SONAME, the name programs record at link
//! time and the loader looks for at run time.
//!
//! It follows the ABI: `libtidepool.so.MAJOR`, and while the major version is
//! 0 (where a new minor version may break compatibility) `libtidepool.so.0.MINOR`.
//! `scripts/install-capi.sh` installs the library under that name.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        return;
    }
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("set by cargo");
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").expect("set by cargo");
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major
    };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtidepool.so.{abi}");
}
