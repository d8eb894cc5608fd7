//! The library's version, at compile time (macros in `tidepool.h`) and at run
//! time (what the program actually loaded).
//!
//! The macros are literals, since cbindgen copies only literal constants into
//! the header; a compile-time check keeps them equal to the package version
//! in `Cargo.toml`, so a version bump that forgets them does not build.

use std::ffi::c_char;

/// Major version of the headers: releases with another major version are not
/// compatible. (While it is 0, a new minor version is not compatible either.)
pub const TIDEPOOL_VERSION_MAJOR: u32 = 0;
/// Minor version of the headers.
pub const TIDEPOOL_VERSION_MINOR: u32 = 1;
/// Patch version of the headers.
pub const TIDEPOOL_VERSION_PATCH: u32 = 0;
/// The headers' version as one number, `MAJOR * 10000 + MINOR * 100 + PATCH`
/// (0.1.0 is 100; 1.2.3 is 10203): what `tidepool_version()` returns for the
/// same release.
pub const TIDEPOOL_VERSION_NUMBER: u32 =
    TIDEPOOL_VERSION_MAJOR * 10000 + TIDEPOOL_VERSION_MINOR * 100 + TIDEPOOL_VERSION_PATCH;

/// A decimal version part from `Cargo.toml`, parsed at compile time.
const fn parse(s: &str) -> u32 {
    let bytes = s.as_bytes();
    assert!(!bytes.is_empty(), "empty version part");
    let mut n = 0;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "version part is not a number");
        n = n * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    n
}

const _: () = {
    assert!(TIDEPOOL_VERSION_MAJOR == parse(env!("CARGO_PKG_VERSION_MAJOR")));
    assert!(TIDEPOOL_VERSION_MINOR == parse(env!("CARGO_PKG_VERSION_MINOR")));
    assert!(TIDEPOOL_VERSION_PATCH == parse(env!("CARGO_PKG_VERSION_PATCH")));
    // The single number has two decimal digits each for minor and patch.
    assert!(TIDEPOOL_VERSION_MINOR < 100 && TIDEPOOL_VERSION_PATCH < 100);
};

/// The version of the library loaded at run time, as one number
/// (`TIDEPOOL_VERSION_NUMBER` of its release). A program can compare it with
/// the `TIDEPOOL_VERSION_NUMBER` it was compiled with:
/// `tidepool_version() / 10000` is the major version,
/// `tidepool_version() / 100 % 100` the minor and `tidepool_version() % 100`
/// the patch. Never fails; thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_version() -> u32 {
    TIDEPOOL_VERSION_NUMBER
}

/// The version of the library loaded at run time as a string,
/// `"MAJOR.MINOR.PATCH"` (e.g. `"0.1.0"`). The string is static, owned by the
/// library: do not free or modify it. Never NULL; thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_version_string() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
