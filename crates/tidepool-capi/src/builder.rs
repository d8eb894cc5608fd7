//! `tidepool_builder_*`: configure a pool from C, then build it.
//!
//! A builder is a plain heap object owned by the caller: used from one
//! thread at a time, and freed exactly once — by `tidepool_builder_build`
//! (whether or not the build succeeds) or by `tidepool_builder_free`. A NULL
//! builder is an error; using a builder after it was freed is undefined
//! behaviour.
//!
//! Strings (name, queue flavor, policy spec) are checked when set; sizes,
//! capacity and keep-alive when the pool is built, with a message naming the
//! setting and its allowed range.

use std::ffi::{c_char, c_int, CStr};
use std::time::Duration;

use tidepool::policy::PolicySpec;
use tidepool::{Builder, OnFull, Pool, QueueFlavor};

use crate::boundary::{boundary, code};
use crate::error::Error;
use crate::handle::{self, tidepool_pool};

/// `tidepool_builder_on_full` mode: a submit waits for room (the thesis's
/// dispatcher; the default).
pub const TIDEPOOL_ON_FULL_BLOCK: c_int = 0;
/// `tidepool_builder_on_full` mode: a submit fails with `TIDEPOOL_ERR_FULL`.
pub const TIDEPOOL_ON_FULL_REJECT: c_int = 1;

/// An opaque pool configuration, created by `tidepool_builder_new()`.
///
/// The caller owns a builder until it passes it to `tidepool_builder_build()`
/// or `tidepool_builder_free()`, which free it; it must not be used after that.
/// One builder must not be used by two threads at once (different builders
/// may). The setters copy what they are given, check strings at once and
/// numbers when the pool is built.
pub struct tidepool_builder {
    builder: Option<Builder>,
}

/// The builder behind `b`, or an error if it is NULL.
///
/// # Safety
/// `b` is NULL or a builder that has not been freed.
unsafe fn builder_mut<'a>(b: *mut tidepool_builder) -> Result<&'a mut tidepool_builder, Error> {
    // SAFETY: per this function's contract.
    unsafe { b.as_mut() }.ok_or_else(|| Error::invalid("the builder is NULL"))
}

/// Apply `f` to the builder behind `b`.
///
/// # Safety
/// As [`builder_mut`].
unsafe fn with(b: *mut tidepool_builder, f: impl FnOnce(Builder) -> Builder) -> Result<(), Error> {
    // SAFETY: per this function's contract.
    let b = unsafe { builder_mut(b) }?;
    let inner = b.builder.take().unwrap_or_default();
    b.builder = Some(f(inner));
    Ok(())
}

/// An export that applies `f` to the builder behind `b`.
///
/// # Safety
/// As [`builder_mut`].
unsafe fn update(b: *mut tidepool_builder, f: impl FnOnce(Builder) -> Builder) -> c_int {
    // SAFETY: per this function's contract.
    code(|| unsafe { with(b, f) })
}

/// A C string argument as UTF-8.
///
/// # Safety
/// `s` is NULL or points to a NUL-terminated string.
pub(crate) unsafe fn utf8<'a>(s: *const c_char, what: &str) -> Result<&'a str, Error> {
    if s.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    // SAFETY: per this function's contract.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|e| Error::invalid(format!("{what} is not valid UTF-8: {e}")))
}

/// A new builder with the library's defaults: as many threads as CPUs
/// (`min = max = initial`), an unbounded lock-free queue, block when full,
/// 10 s keep-alive, statistics on, policy `auto` when `min < max`.
/// The caller owns it (see `tidepool_builder`). Never returns NULL: if memory
/// runs out, the process aborts.
#[no_mangle]
pub extern "C" fn tidepool_builder_new() -> *mut tidepool_builder {
    boundary(
        |_| std::ptr::null_mut(),
        || {
            Ok(Box::into_raw(Box::new(tidepool_builder {
                builder: Some(Pool::builder()),
            })))
        },
    )
}

/// Free a builder that will not be built. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_free(b: *mut tidepool_builder) {
    boundary(
        |_| (),
        || {
            if !b.is_null() {
                // SAFETY: per this function's contract, we own `b`.
                drop(unsafe { Box::from_raw(b) });
            }
            Ok(())
        },
    )
}

/// Set the prefix of the worker threads' names (`name-1`, `name-2`, …, cut
/// to 15 bytes; default `tidepool`). `name` is a NUL-terminated UTF-8 string,
/// copied; the caller keeps ownership of it.
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` or `name` is
/// NULL or `name` is not UTF-8.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_name(
    b: *mut tidepool_builder,
    name: *const c_char,
) -> c_int {
    code(|| {
        // SAFETY: per this function's contract.
        let name = unsafe { utf8(name, "name") }?.to_owned();
        // SAFETY: per this function's contract.
        unsafe { with(b, |x| x.name(name)) }
    })
}

/// Give the pool a fixed size: `min = max = initial = n`.
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_threads(b: *mut tidepool_builder, n: usize) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { update(b, |x| x.threads(n)) }
}

/// Set the fewest worker threads (default: CPUs, capped by max).
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_min_threads(b: *mut tidepool_builder, n: usize) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { update(b, |x| x.min_threads(n)) }
}

/// Set the most worker threads, 1 to 32768 (default: the larger of CPUs,
/// min and initial).
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_max_threads(b: *mut tidepool_builder, n: usize) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { update(b, |x| x.max_threads(n)) }
}

/// Set how many worker threads the build starts, between min and max
/// (default: min).
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_initial_threads(
    b: *mut tidepool_builder,
    n: usize,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { update(b, |x| x.initial_threads(n)) }
}

/// Bound the queue to `n` >= 1 waiting tasks (default: unbounded).
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_queue_capacity(
    b: *mut tidepool_builder,
    n: usize,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { update(b, |x| x.queue_capacity(n)) }
}

/// Choose what a submit does when the bounded queue is full:
/// `TIDEPOOL_ON_FULL_BLOCK` (wait for room; the default) or
/// `TIDEPOOL_ON_FULL_REJECT` (fail with `TIDEPOOL_ERR_FULL`).
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` is NULL or
/// `mode` is neither.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_on_full(b: *mut tidepool_builder, mode: c_int) -> c_int {
    code(|| {
        // SAFETY: per this function's contract.
        let b = unsafe { builder_mut(b) }?;
        let on_full = match mode {
            TIDEPOOL_ON_FULL_BLOCK => OnFull::Block,
            TIDEPOOL_ON_FULL_REJECT => OnFull::Reject,
            other => {
                return Err(Error::invalid(format!(
                    "on_full mode {other}: must be TIDEPOOL_ON_FULL_BLOCK (0) or TIDEPOOL_ON_FULL_REJECT (1)"
                )))
            }
        };
        b.builder = Some(b.builder.take().unwrap_or_default().on_full(on_full));
        Ok(())
    })
}

/// Choose the queue's implementation by name: `"lock-free"` (default),
/// `"mutex"`, `"spin"` or `"hybrid"`. `flavor` is a NUL-terminated string,
/// copied.
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` or `flavor`
/// is NULL or `flavor` names none of these.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_queue(
    b: *mut tidepool_builder,
    flavor: *const c_char,
) -> c_int {
    code(|| {
        // SAFETY: per this function's contract.
        let flavor = unsafe { utf8(flavor, "queue flavor") }?
            .parse::<QueueFlavor>()
            .map_err(|e| Error::invalid(e.to_string()))?;
        // SAFETY: per this function's contract.
        unsafe { with(b, |x| x.queue(flavor)) }
    })
}

/// Set how long a worker thread above `min` may stay idle before it exits,
/// in milliseconds, at least 1 (default 10 000).
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_keep_alive_ms(
    b: *mut tidepool_builder,
    ms: u64,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { update(b, |x| x.keep_alive(Duration::from_millis(ms))) }
}

/// Choose the sizing policy by a spec string: `"auto"`, `"fixed:8"`,
/// `"watermark:3..100"`, `"xu-bode:initial=4,stride=2"`,
/// `"hisdyn:max=100,p=0.01"`, `"frequency"` or `"hill-climb"` (default: `auto`
/// when `min < max`, else a fixed size). `spec` is a NUL-terminated string,
/// copied.
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` or `spec` is
/// NULL or `spec` is not a pool policy (the last error says why).
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_policy(
    b: *mut tidepool_builder,
    spec: *const c_char,
) -> c_int {
    code(|| {
        // SAFETY: per this function's contract.
        let text = unsafe { utf8(spec, "policy spec") }?;
        let spec = PolicySpec::parse(text).map_err(|e| Error::invalid(e.to_string()))?;
        let policy = spec.build().ok_or_else(|| {
            Error::invalid(format!(
                "policy `{spec}` is an executor of its own (a thread per request), not a pool policy"
            ))
        })?;
        // SAFETY: per this function's contract.
        unsafe { with(b, |x| x.policy_boxed(policy)) }
    })
}

/// Turn per-task statistics on or off (default on; a policy other than a
/// fixed size turns them on).
/// Returns `TIDEPOOL_OK`, or `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` is NULL.
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_statistics(b: *mut tidepool_builder, on: bool) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { update(b, |x| x.statistics(on)) }
}

/// Start a pool as configured. Frees the builder, whether or not the build
/// succeeds: `b` must not be used afterwards.
/// Returns the pool, owned by the caller until `tidepool_destroy()`; or NULL
/// with the last error set: `TIDEPOOL_ERR_INVALID_ARGUMENT` if `b` is NULL or a
/// setting is out of range (the message names the setting and the range).
#[no_mangle]
pub unsafe extern "C" fn tidepool_builder_build(b: *mut tidepool_builder) -> *mut tidepool_pool {
    boundary(
        |_| std::ptr::null_mut(),
        || {
            if b.is_null() {
                return Err(Error::invalid("the builder is NULL"));
            }
            // SAFETY: per this function's contract, we own `b`.
            let b = unsafe { Box::from_raw(b) };
            let pool = b
                .builder
                .unwrap_or_default()
                .build()
                .map_err(|e| Error::invalid(e.to_string()))?;
            Ok(handle::register(pool))
        },
    )
}
