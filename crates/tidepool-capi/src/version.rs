//! The library's version, for C programs that check what they linked.

use std::ffi::c_char;

/// The library's version, `"MAJOR.MINOR.PATCH"`. A static string.
#[no_mangle]
pub extern "C" fn tidepool_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
