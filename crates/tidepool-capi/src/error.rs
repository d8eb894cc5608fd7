//! Error codes, and the last error's message for each calling thread.
//!
//! Every function of the C API returns one of these codes (or NULL, or -1,
//! where its signature has no room for a code) and leaves a readable message
//! for the calling thread. The message of a successful call is empty: every
//! function except the last-error getters clears it on entry, so after a
//! `void` call such as `tidepool_dispatch` the code tells whether *that*
//! call failed.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};

/// Success.
pub const TIDEPOOL_OK: c_int = 0;
/// An argument is out of range, NULL where a value is needed, or not valid
/// UTF-8; or a pool setting is invalid (the message names the setting and
/// the allowed range).
pub const TIDEPOOL_ERR_INVALID_ARGUMENT: c_int = 1;
/// The pool handle is NULL, already destroyed, or was never a pool.
pub const TIDEPOOL_ERR_INVALID_POOL: c_int = 2;
/// The pool is shut down (or shutting down) and accepts no more tasks.
pub const TIDEPOOL_ERR_SHUT_DOWN: c_int = 3;
/// The queue is full and the pool rejects rather than waits, or
/// `tidepool_try_submit` was called.
pub const TIDEPOOL_ERR_FULL: c_int = 4;
/// The queue stayed full for the whole timeout of `tidepool_submit_timeout`.
pub const TIDEPOOL_ERR_TIMEOUT: c_int = 5;
/// Called from a task (or completion callback) of the same pool, where it
/// would wait for itself: destroy, shutdown, shutdown-now and wait-idle.
pub const TIDEPOOL_ERR_IN_OWN_TASK: c_int = 6;
/// An unexpected failure inside the library (a bug: the message says where),
/// or a task or completion callback written in Rust panicked (then the status
/// passed to the completion callback). The process and the pool go on.
pub const TIDEPOOL_ERR_PANIC: c_int = 7;
/// Completion status of a task that never ran: `tidepool_shutdown_now` or
/// its cancel token cancelled it.
pub const TIDEPOOL_ERR_CANCELLED: c_int = 8;
/// Completion status of a task that never ran: it had not started by the
/// deadline given to `tidepool_submit_with`.
pub const TIDEPOOL_ERR_EXPIRED: c_int = 9;

/// The name of each code, indexed by code, NUL-terminated for C.
const NAMES_C: [&[u8]; 10] = [
    b"TIDEPOOL_OK\0",
    b"TIDEPOOL_ERR_INVALID_ARGUMENT\0",
    b"TIDEPOOL_ERR_INVALID_POOL\0",
    b"TIDEPOOL_ERR_SHUT_DOWN\0",
    b"TIDEPOOL_ERR_FULL\0",
    b"TIDEPOOL_ERR_TIMEOUT\0",
    b"TIDEPOOL_ERR_IN_OWN_TASK\0",
    b"TIDEPOOL_ERR_PANIC\0",
    b"TIDEPOOL_ERR_CANCELLED\0",
    b"TIDEPOOL_ERR_EXPIRED\0",
];

/// A failed call: its code and what went wrong, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub(crate) code: c_int,
    pub(crate) message: String,
}

impl Error {
    pub(crate) fn new(code: c_int, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(TIDEPOOL_ERR_INVALID_ARGUMENT, message)
    }

    /// A caught panic, with its message when it has one.
    pub(crate) fn panic(payload: &(dyn std::any::Any + Send)) -> Self {
        let what = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("<non-string panic payload>");
        Error::new(
            TIDEPOOL_ERR_PANIC,
            format!("a Rust panic was caught: {what}"),
        )
    }
}

impl From<tidepool::SubmitError> for Error {
    fn from(e: tidepool::SubmitError) -> Self {
        use tidepool::SubmitError as S;
        let code = match e {
            S::ShutDown => TIDEPOOL_ERR_SHUT_DOWN,
            S::Full => TIDEPOOL_ERR_FULL,
            S::Timeout(_) => TIDEPOOL_ERR_TIMEOUT,
            // Only the thread-per-request executor spawns per task.
            S::Spawn(_) => TIDEPOOL_ERR_INVALID_ARGUMENT,
            // A kind newer than this mapping: the message says which.
            _ => TIDEPOOL_ERR_INVALID_ARGUMENT,
        };
        Error::new(code, e.to_string())
    }
}

thread_local! {
    /// The calling thread's last error: code and NUL-terminated message.
    static LAST: RefCell<(c_int, CString)> = RefCell::new((TIDEPOOL_OK, CString::default()));
}

/// Forget the calling thread's last error (cheap when there is none).
pub(crate) fn clear() {
    let _ = LAST.try_with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != TIDEPOOL_OK {
            *last = (TIDEPOOL_OK, CString::default());
        }
    });
}

/// Record `e` as the calling thread's last error.
pub(crate) fn set(e: Error) {
    // A message never holds NUL from our code; strip any from user input.
    let message = CString::new(e.message.replace('\0', "\\0")).unwrap_or_default();
    let _ = LAST.try_with(|last| *last.borrow_mut() = (e.code, message));
}

/// The calling thread's last error code (`TIDEPOOL_OK` if the last call succeeded).
pub(crate) fn last_code() -> c_int {
    LAST.try_with(|last| last.borrow().0).unwrap_or(TIDEPOOL_OK)
}

/// The calling thread's last error message; valid until its next call.
pub(crate) fn last_message() -> *const c_char {
    LAST.try_with(|last| last.borrow().1.as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The code's name (`"TIDEPOOL_ERR_FULL"`), or None for an unknown code.
pub(crate) fn name_c(code: c_int) -> Option<*const c_char> {
    let i = usize::try_from(code).ok()?;
    NAMES_C.get(i).map(|n| n.as_ptr().cast())
}

/// The calling thread's last error message: "" if its last call into the
/// library succeeded. The string belongs to the library and stays valid until
/// the thread's next call into it: copy it to keep it. Never NULL; each
/// thread has its own.
#[no_mangle]
pub extern "C" fn tidepool_last_error() -> *const c_char {
    last_message()
}

/// The calling thread's last error code: `TIDEPOOL_OK` if its last call into
/// the library succeeded. The way to learn whether a call that returns nothing
/// (`dispatch()`, `destroy_threadpool()`) failed. Each thread has its own.
#[no_mangle]
pub extern "C" fn tidepool_last_error_code() -> c_int {
    last_code()
}

/// The name of an error code (`"TIDEPOOL_ERR_FULL"`), or
/// `"unknown error code"`. A static string owned by the library; never NULL.
/// Thread-safe.
#[no_mangle]
pub extern "C" fn tidepool_error_name(code: c_int) -> *const c_char {
    name_c(code).unwrap_or(c"unknown error code".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn names_match_the_constants() {
        let name = |code| {
            unsafe { CStr::from_ptr(name_c(code).unwrap()) }
                .to_str()
                .unwrap()
        };
        assert_eq!(name(TIDEPOOL_OK), "TIDEPOOL_OK");
        assert_eq!(
            name(TIDEPOOL_ERR_INVALID_ARGUMENT),
            "TIDEPOOL_ERR_INVALID_ARGUMENT"
        );
        assert_eq!(name(TIDEPOOL_ERR_INVALID_POOL), "TIDEPOOL_ERR_INVALID_POOL");
        assert_eq!(name(TIDEPOOL_ERR_SHUT_DOWN), "TIDEPOOL_ERR_SHUT_DOWN");
        assert_eq!(name(TIDEPOOL_ERR_FULL), "TIDEPOOL_ERR_FULL");
        assert_eq!(name(TIDEPOOL_ERR_TIMEOUT), "TIDEPOOL_ERR_TIMEOUT");
        assert_eq!(name(TIDEPOOL_ERR_IN_OWN_TASK), "TIDEPOOL_ERR_IN_OWN_TASK");
        assert_eq!(name(TIDEPOOL_ERR_PANIC), "TIDEPOOL_ERR_PANIC");
        assert_eq!(name(TIDEPOOL_ERR_CANCELLED), "TIDEPOOL_ERR_CANCELLED");
        assert_eq!(name(TIDEPOOL_ERR_EXPIRED), "TIDEPOOL_ERR_EXPIRED");
        assert!(name_c(-1).is_none() && name_c(10).is_none());
    }

    #[test]
    fn last_error_is_per_thread_and_cleared() {
        set(Error::invalid("bad"));
        assert_eq!(last_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);
        std::thread::spawn(|| assert_eq!(last_code(), TIDEPOOL_OK))
            .join()
            .unwrap();
        let msg = unsafe { CStr::from_ptr(last_message()) };
        assert_eq!(msg.to_str().unwrap(), "bad");
        clear();
        assert_eq!(last_code(), TIDEPOOL_OK);
        assert_eq!(unsafe { CStr::from_ptr(last_message()) }.to_bytes(), b"");
    }
}
