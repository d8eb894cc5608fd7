//! The panic boundary around every exported function.
//!
//! A Rust panic must never unwind into C. Each export runs its body through
//! [`boundary`]: the calling thread's last error is cleared, the body runs
//! inside `catch_unwind`, and an error (or a caught panic, as
//! `TIDEPOOL_ERR_PANIC`) becomes the thread's last error and the function's
//! failure value — an error code, NULL or -1, whatever the signature allows.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{self, Error};

/// Run an export's body: `Ok` is returned as is; an error or a panic is
/// recorded as the last error and turned into `on_error(code)`.
pub(crate) fn boundary<T>(
    on_error: impl FnOnce(c_int) -> T,
    body: impl FnOnce() -> Result<T, Error>,
) -> T {
    error::clear();
    let e = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(e)) => e,
        Err(payload) => Error::panic(&*payload),
    };
    let code = e.code;
    error::set(e);
    on_error(code)
}

/// [`boundary`] for functions that return an error code.
pub(crate) fn code(body: impl FnOnce() -> Result<(), Error>) -> c_int {
    boundary(|code| code, || body().map(|()| error::TIDEPOOL_OK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::*;

    #[test]
    fn a_panic_becomes_an_error_code_and_a_message() {
        let r = code(|| panic!("boom in the body"));
        assert_eq!(r, TIDEPOOL_ERR_PANIC);
        assert_eq!(last_code(), TIDEPOOL_ERR_PANIC);
        let msg = unsafe { std::ffi::CStr::from_ptr(last_message()) };
        assert!(
            msg.to_str().unwrap().contains("boom in the body"),
            "{msg:?}"
        );
        // The next successful call clears it.
        assert_eq!(code(|| Ok(())), TIDEPOOL_OK);
        assert_eq!(last_code(), TIDEPOOL_OK);
    }

    #[test]
    fn errors_map_through_on_error() {
        let r: *mut u8 = boundary(|_| std::ptr::null_mut(), || Err(Error::invalid("no")));
        assert!(r.is_null());
        assert_eq!(last_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);
    }
}
