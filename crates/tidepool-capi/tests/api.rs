//! The C API called from Rust, as C would call it: every function, its error
//! paths, panics in callbacks, and calls back into a pool from its own tasks.
//! (The C programs in `c/` test the same from C: `tests/c_programs.rs`.)

use std::ffi::{c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tidepool_capi::builder::*;
use tidepool_capi::error::*;
use tidepool_capi::pool::*;
use tidepool_capi::stats::*;
use tidepool_capi::threadpool::*;
use tidepool_capi::tidepool_pool;
use tidepool_capi::version::*;
use tidepool_test_support::eventually;

fn last_error() -> String {
    unsafe { CStr::from_ptr(tidepool_last_error()) }
        .to_str()
        .unwrap()
        .to_owned()
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// A gate tasks wait at until it is opened; counts arrivals.
#[derive(Default)]
struct Gate {
    state: Mutex<(bool, usize)>,
    cv: Condvar,
}

impl Gate {
    fn pass(&self) {
        let mut s = self.state.lock().unwrap();
        s.1 += 1;
        self.cv.notify_all();
        while !s.0 {
            s = self.cv.wait(s).unwrap();
        }
    }
    fn await_arrivals(&self, n: usize) {
        let mut s = self.state.lock().unwrap();
        while s.1 < n {
            s = self.cv.wait(s).unwrap();
        }
    }
    fn open(&self) {
        self.state.lock().unwrap().0 = true;
        self.cv.notify_all();
    }
}

unsafe extern "C-unwind" fn at_gate(arg: *mut c_void) {
    (*(arg as *const Gate)).pass();
}

unsafe extern "C-unwind" fn count(arg: *mut c_void) {
    (*(arg as *const AtomicUsize)).fetch_add(1, SeqCst);
}

unsafe extern "C-unwind" fn boom(_arg: *mut c_void) {
    panic!("a Rust callback panicked");
}

/// Completion statuses seen, one list per test (tests run in parallel).
static STATUSES: [Mutex<Vec<c_int>>; 3] = [
    Mutex::new(Vec::new()),
    Mutex::new(Vec::new()),
    Mutex::new(Vec::new()),
];

unsafe extern "C-unwind" fn record_status<const TEST: usize>(_arg: *mut c_void, status: c_int) {
    STATUSES[TEST].lock().unwrap().push(status);
}

fn stats(pool: *mut tidepool_pool) -> tidepool_stats {
    let mut s = tidepool_stats::default();
    assert_eq!(
        unsafe { tidepool_stats_get(pool, &mut s) },
        TIDEPOOL_OK,
        "{}",
        last_error()
    );
    s
}

/// A pool of one worker, a queue of `capacity`, blocking or rejecting.
fn one_worker(capacity: usize, on_full: c_int) -> *mut tidepool_pool {
    unsafe {
        let b = tidepool_builder_new();
        assert_eq!(tidepool_builder_name(b, c("one").as_ptr()), TIDEPOOL_OK);
        assert_eq!(tidepool_builder_threads(b, 1), TIDEPOOL_OK);
        assert_eq!(tidepool_builder_queue_capacity(b, capacity), TIDEPOOL_OK);
        assert_eq!(tidepool_builder_on_full(b, on_full), TIDEPOOL_OK);
        assert_eq!(tidepool_builder_queue(b, c("mutex").as_ptr()), TIDEPOOL_OK);
        assert_eq!(tidepool_builder_keep_alive_ms(b, 1000), TIDEPOOL_OK);
        assert_eq!(tidepool_builder_statistics(b, true), TIDEPOOL_OK);
        let pool = tidepool_builder_build(b);
        assert!(!pool.is_null(), "{}", last_error());
        pool
    }
}

#[test]
fn thesis_functions_run_resize_and_destroy() {
    let done = Arc::new(AtomicUsize::new(0));
    let arg = Arc::as_ptr(&done) as *mut c_void;
    let pool = tidepool_create_threadpool(4);
    assert!(!pool.is_null(), "{}", last_error());
    assert_eq!(tidepool_threadpool_size(pool), 4);
    for _ in 0..500 {
        unsafe { tidepool_dispatch(pool, Some(count), arg) };
        assert_eq!(tidepool_last_error_code(), TIDEPOOL_OK);
    }
    assert_eq!(tidepool_expand_threadpool(8, pool), TIDEPOOL_OK);
    assert_eq!(
        tidepool_threadpool_size(pool),
        8,
        "expand starts workers at once"
    );
    assert_eq!(tidepool_shrink_threadpool(2, pool), TIDEPOOL_OK);
    eventually("the pool to shrink to 2", || {
        tidepool_threadpool_size(pool) == 2
    });
    assert_eq!(stats(pool).target_threads, 2);
    // Wrong direction or out of range: an error, nothing changes.
    assert_eq!(
        tidepool_expand_threadpool(1, pool),
        TIDEPOOL_ERR_INVALID_ARGUMENT
    );
    assert!(
        last_error().contains("use shrink_threadpool"),
        "{}",
        last_error()
    );
    assert_eq!(
        tidepool_shrink_threadpool(3, pool),
        TIDEPOOL_ERR_INVALID_ARGUMENT
    );
    assert_eq!(
        tidepool_shrink_threadpool(0, pool),
        TIDEPOOL_ERR_INVALID_ARGUMENT
    );
    assert_eq!(
        tidepool_expand_threadpool(-1, pool),
        TIDEPOOL_ERR_INVALID_ARGUMENT
    );
    assert_eq!(
        tidepool_expand_threadpool(40_000, pool),
        TIDEPOOL_ERR_INVALID_ARGUMENT
    );
    assert!(
        last_error().contains("between 1 and 32768"),
        "{}",
        last_error()
    );
    unsafe { tidepool_dispatch(pool, None, arg) };
    assert_eq!(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);
    tidepool_destroy_threadpool(pool);
    assert_eq!(tidepool_last_error_code(), TIDEPOOL_OK);
    assert_eq!(done.load(SeqCst), 500, "destroy runs what was queued");

    // The handle is dead now, and every function says so.
    assert_eq!(tidepool_threadpool_size(pool), -1);
    assert_eq!(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_POOL);
    assert!(last_error().contains("not a live pool"), "{}", last_error());
    unsafe { tidepool_dispatch(pool, Some(count), arg) };
    assert_eq!(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_POOL);
    assert_eq!(
        tidepool_expand_threadpool(9, pool),
        TIDEPOOL_ERR_INVALID_POOL
    );
    assert_eq!(
        tidepool_shrink_threadpool(1, pool),
        TIDEPOOL_ERR_INVALID_POOL
    );
    tidepool_destroy_threadpool(pool);
    assert_eq!(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_POOL);
    assert_eq!(done.load(SeqCst), 500);

    for bad in [0, -5, 32_769] {
        assert!(tidepool_create_threadpool(bad).is_null());
        assert_eq!(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);
    }
    let null = std::ptr::null_mut();
    assert_eq!(tidepool_threadpool_size(null), -1);
    assert!(last_error().contains("NULL"), "{}", last_error());
}

#[test]
fn dispatch_blocks_while_the_queue_is_full() {
    let gate = Gate::default();
    let gate_arg = &gate as *const Gate as *mut c_void;
    let pool = tidepool_create_threadpool(1);
    unsafe { tidepool_dispatch(pool, Some(at_gate), gate_arg) };
    gate.await_arrivals(1);
    for _ in 0..THREADPOOL_QUEUE_CAPACITY {
        unsafe { tidepool_dispatch(pool, Some(at_gate), gate_arg) };
    }
    assert_eq!(stats(pool).queue_len, THREADPOOL_QUEUE_CAPACITY as u64);
    let returned = AtomicBool::new(false);
    std::thread::scope(|s| {
        let handle = pool as usize;
        let (gate_arg, returned) = (gate_arg as usize, &returned);
        s.spawn(move || {
            unsafe { tidepool_dispatch(handle as *mut _, Some(at_gate), gate_arg as *mut c_void) };
            returned.store(true, SeqCst);
        });
        // The queue stays full until the gate opens, so the dispatch must wait.
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !returned.load(SeqCst),
            "dispatch returned while the queue was full"
        );
        gate.open();
    });
    assert!(returned.load(SeqCst));
    tidepool_destroy_threadpool(pool);
    gate.await_arrivals(THREADPOOL_QUEUE_CAPACITY + 2);
}

#[test]
fn full_queue_rejects_times_out_and_try_fails() {
    STATUSES[0].lock().unwrap().clear();
    let gate = Gate::default();
    let g = &gate as *const Gate as *mut c_void;
    let pool = one_worker(2, TIDEPOOL_ON_FULL_REJECT);
    unsafe {
        assert_eq!(
            tidepool_submit(pool, Some(at_gate), g, Some(record_status::<0>)),
            TIDEPOOL_OK
        );
        gate.await_arrivals(1);
        assert_eq!(
            tidepool_submit(pool, Some(at_gate), g, Some(record_status::<0>)),
            TIDEPOOL_OK
        );
        assert_eq!(
            tidepool_try_submit(pool, Some(at_gate), g, Some(record_status::<0>)),
            TIDEPOOL_OK
        );
        assert_eq!(
            tidepool_submit(pool, Some(at_gate), g, Some(record_status::<0>)),
            TIDEPOOL_ERR_FULL
        );
        assert_eq!(
            tidepool_try_submit(pool, Some(at_gate), g, None),
            TIDEPOOL_ERR_FULL
        );
        assert_eq!(
            tidepool_submit_timeout(pool, Some(at_gate), g, Some(record_status::<0>), 1000),
            TIDEPOOL_ERR_TIMEOUT
        );
        assert!(last_error().contains("stayed full"), "{}", last_error());
        assert_eq!(
            tidepool_submit(pool, None, g, None),
            TIDEPOOL_ERR_INVALID_ARGUMENT
        );
    }
    let s = stats(pool);
    assert_eq!((s.queue_len, s.rejected_jobs), (2, 3));
    gate.open();
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    let s = stats(pool);
    assert_eq!((s.submitted_jobs, s.completed_jobs), (3, 3));
    assert_eq!(
        *STATUSES[0].lock().unwrap(),
        vec![TIDEPOOL_OK; 3],
        "refused tasks get no callback"
    );
    assert_eq!(s.wait.count, 3);
    assert!(s.service.mean_us > 0.0 && s.execution_time_s > 0.0 && s.throughput > 0.0);
    assert_eq!(
        unsafe { tidepool_submit_timeout(pool, Some(at_gate), g, None, 1000) },
        TIDEPOOL_OK
    );

    // Submit after shutdown.
    assert_eq!(tidepool_shutdown(pool), TIDEPOOL_OK);
    assert_eq!(tidepool_shutdown(pool), TIDEPOOL_OK, "idempotent");
    unsafe {
        assert_eq!(
            tidepool_submit(pool, Some(at_gate), g, None),
            TIDEPOOL_ERR_SHUT_DOWN
        );
        assert_eq!(
            tidepool_try_submit(pool, Some(at_gate), g, None),
            TIDEPOOL_ERR_SHUT_DOWN
        );
        assert_eq!(
            tidepool_submit_timeout(pool, Some(at_gate), g, None, 10),
            TIDEPOOL_ERR_SHUT_DOWN
        );
    }
    assert_eq!(
        stats(pool).completed_jobs,
        4,
        "statistics stay readable after shutdown"
    );
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_ERR_INVALID_POOL);
}

#[test]
fn sizes_resize_and_quantiles() {
    let done = Arc::new(AtomicUsize::new(0));
    let pool = unsafe {
        let b = tidepool_builder_new();
        tidepool_builder_min_threads(b, 1);
        tidepool_builder_max_threads(b, 6);
        tidepool_builder_initial_threads(b, 2);
        assert_eq!(
            tidepool_builder_policy(b, c("watermark:1..6").as_ptr()),
            TIDEPOOL_OK
        );
        tidepool_builder_build(b)
    };
    assert!(!pool.is_null(), "{}", last_error());
    for _ in 0..100 {
        let arg = Arc::as_ptr(&done) as *mut c_void;
        assert_eq!(
            unsafe { tidepool_submit(pool, Some(count), arg, None) },
            TIDEPOOL_OK
        );
    }
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    assert_eq!(done.load(SeqCst), 100);
    // The watermark policy retires idle extra workers after 1 ms, so the
    // size it shows is its own business; the thesis pool below only moves
    // when told.
    assert_eq!(tidepool_resize(pool, 5), TIDEPOOL_OK);
    let mut live = 0usize;
    assert_eq!(unsafe { tidepool_size(pool, &mut live) }, TIDEPOOL_OK);
    assert!((1..=6).contains(&live), "{live}");
    assert_eq!(tidepool_resize(pool, 7), TIDEPOOL_ERR_INVALID_ARGUMENT);
    assert!(last_error().contains("bounds 1..=6"), "{}", last_error());
    assert_eq!(tidepool_resize(pool, 0), TIDEPOOL_ERR_INVALID_ARGUMENT);
    assert_eq!(
        unsafe { tidepool_size(pool, std::ptr::null_mut()) },
        TIDEPOOL_ERR_INVALID_ARGUMENT
    );

    let mut us = -1.0;
    for which in [
        TIDEPOOL_LATENCY_SUBMIT_BLOCKED,
        TIDEPOOL_LATENCY_WAIT,
        TIDEPOOL_LATENCY_SERVICE,
    ] {
        assert_eq!(
            unsafe { tidepool_stats_quantile(pool, which, 0.99, &mut us) },
            TIDEPOOL_OK
        );
        assert!(us >= 0.0);
    }
    let s = stats(pool);
    assert!(s.service.p50_us <= s.service.p99_us && s.service.p99_us <= s.service.max_us);
    unsafe {
        assert_eq!(
            tidepool_stats_quantile(pool, 3, 0.5, &mut us),
            TIDEPOOL_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tidepool_stats_quantile(pool, 1, 1.5, &mut us),
            TIDEPOOL_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tidepool_stats_quantile(pool, 1, f64::NAN, &mut us),
            TIDEPOOL_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tidepool_stats_quantile(pool, 1, 0.5, std::ptr::null_mut()),
            TIDEPOOL_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            tidepool_stats_get(pool, std::ptr::null_mut()),
            TIDEPOOL_ERR_INVALID_ARGUMENT
        );
    }
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);

    let thesis = tidepool_create_threadpool(2);
    assert_eq!(tidepool_resize(thesis, 5), TIDEPOOL_OK);
    assert_eq!(unsafe { tidepool_size(thesis, &mut live) }, TIDEPOOL_OK);
    assert_eq!(live, 5, "growth starts workers at once");
    assert_eq!(
        tidepool_resize(thesis, 40_000),
        TIDEPOOL_ERR_INVALID_ARGUMENT
    );
    assert!(
        last_error().contains("bounds 1..=32768"),
        "{}",
        last_error()
    );
    assert_eq!(tidepool_destroy(thesis), TIDEPOOL_OK);

    unsafe {
        let mut s = tidepool_stats::default();
        assert_eq!(tidepool_stats_get(pool, &mut s), TIDEPOOL_ERR_INVALID_POOL);
        assert_eq!(
            tidepool_stats_quantile(pool, 1, 0.5, &mut us),
            TIDEPOOL_ERR_INVALID_POOL
        );
        assert_eq!(tidepool_size(pool, &mut live), TIDEPOOL_ERR_INVALID_POOL);
    }
    assert_eq!(tidepool_resize(pool, 2), TIDEPOOL_ERR_INVALID_POOL);
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_ERR_INVALID_POOL);
    assert_eq!(tidepool_shutdown(pool), TIDEPOOL_ERR_INVALID_POOL);
    assert_eq!(
        unsafe { tidepool_shutdown_now(pool, std::ptr::null_mut()) },
        TIDEPOOL_ERR_INVALID_POOL
    );
}

#[test]
fn builder_errors_name_the_setting() {
    let null = std::ptr::null_mut();
    unsafe {
        let build_err = |setup: &dyn Fn(*mut tidepool_builder), field: &str| {
            let b = tidepool_builder_new();
            setup(b);
            assert!(tidepool_builder_build(b).is_null());
            assert_eq!(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);
            assert!(last_error().contains(field), "{field}: {}", last_error());
        };
        build_err(
            &|b| {
                tidepool_builder_min_threads(b, 5);
                tidepool_builder_max_threads(b, 2);
            },
            "min_threads",
        );
        build_err(
            &|b| {
                tidepool_builder_threads(b, 0);
            },
            "max_threads",
        );
        build_err(
            &|b| {
                tidepool_builder_queue_capacity(b, 0);
            },
            "queue_capacity",
        );
        build_err(
            &|b| {
                tidepool_builder_keep_alive_ms(b, 0);
            },
            "keep_alive",
        );
        build_err(
            &|b| {
                tidepool_builder_min_threads(b, 1);
                tidepool_builder_max_threads(b, 3);
                tidepool_builder_initial_threads(b, 4);
            },
            "initial_threads",
        );

        let b = tidepool_builder_new();
        let bad = [
            (
                tidepool_builder_queue(b, c("nope").as_ptr()),
                "`nope`: expected one of mutex, spin, hybrid, lock-free",
            ),
            (
                tidepool_builder_policy(b, c("watermark:9..3").as_ptr()),
                "invalid policy spec",
            ),
            (
                tidepool_builder_policy(b, c("tpr").as_ptr()),
                "not a pool policy",
            ),
            (tidepool_builder_on_full(b, 7), "on_full mode 7"),
            (tidepool_builder_name(b, std::ptr::null()), "name is NULL"),
            (
                tidepool_builder_policy(b, c"\xff".as_ptr()),
                "not valid UTF-8",
            ),
        ];
        for (code, words) in bad {
            assert_eq!(code, TIDEPOOL_ERR_INVALID_ARGUMENT, "{words}");
        }
        // The message is the last call's.
        assert!(last_error().contains("not valid UTF-8"), "{}", last_error());
        tidepool_builder_free(b);
        tidepool_builder_free(null);

        for code in [
            tidepool_builder_name(null, c("x").as_ptr()),
            tidepool_builder_threads(null, 1),
            tidepool_builder_min_threads(null, 1),
            tidepool_builder_max_threads(null, 1),
            tidepool_builder_initial_threads(null, 1),
            tidepool_builder_queue_capacity(null, 1),
            tidepool_builder_on_full(null, 0),
            tidepool_builder_queue(null, c("mutex").as_ptr()),
            tidepool_builder_keep_alive_ms(null, 1),
            tidepool_builder_policy(null, c("auto").as_ptr()),
            tidepool_builder_statistics(null, true),
        ] {
            assert_eq!(code, TIDEPOOL_ERR_INVALID_ARGUMENT);
            assert!(last_error().contains("builder is NULL"));
        }
        assert!(tidepool_builder_build(null).is_null());

        // Every flavor and the default build.
        for flavor in ["mutex", "spin", "hybrid", "lock-free"] {
            let b = tidepool_builder_new();
            assert_eq!(tidepool_builder_queue(b, c(flavor).as_ptr()), TIDEPOOL_OK);
            tidepool_builder_threads(b, 1);
            let pool = tidepool_builder_build(b);
            assert!(!pool.is_null(), "{flavor}: {}", last_error());
            assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
        }
        let pool = tidepool_builder_build(tidepool_builder_new());
        assert!(!pool.is_null());
        assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
    }
}

#[test]
fn errors_have_names_and_a_version() {
    let name = |code| {
        unsafe { CStr::from_ptr(tidepool_error_name(code)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(name(TIDEPOOL_ERR_FULL), "TIDEPOOL_ERR_FULL");
    assert_eq!(name(42), "unknown error code");
    let v = unsafe { CStr::from_ptr(tidepool_version_string()) }
        .to_str()
        .unwrap();
    assert_eq!(v, env!("CARGO_PKG_VERSION"));
    let n = tidepool_version();
    assert_eq!(n, TIDEPOOL_VERSION_NUMBER);
    let parts = format!("{}.{}.{}", n / 10000, n / 100 % 100, n % 100);
    assert_eq!(parts, env!("CARGO_PKG_VERSION"));
    assert_eq!(tidepool_last_error_code(), TIDEPOOL_OK);
    assert_eq!(last_error(), "");
}

#[test]
fn a_panicking_callback_is_caught_and_reported() {
    STATUSES[1].lock().unwrap().clear();
    let pool = one_worker(16, TIDEPOOL_ON_FULL_BLOCK);
    let done = AtomicUsize::new(0);
    unsafe {
        assert_eq!(
            tidepool_submit(
                pool,
                Some(boom),
                std::ptr::null_mut(),
                Some(record_status::<1>)
            ),
            TIDEPOOL_OK
        );
        // The worker survives: the next task runs.
        let arg = &done as *const AtomicUsize as *mut c_void;
        assert_eq!(
            tidepool_submit(pool, Some(count), arg, Some(record_status::<1>)),
            TIDEPOOL_OK
        );
    }
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    assert_eq!(done.load(SeqCst), 1);
    assert_eq!(
        *STATUSES[1].lock().unwrap(),
        vec![TIDEPOOL_ERR_PANIC, TIDEPOOL_OK]
    );
    let s = stats(pool);
    assert_eq!((s.panicked_jobs, s.completed_jobs, s.thread_num), (1, 2, 1));
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}

unsafe extern "C-unwind" fn done_boom(_arg: *mut c_void, _status: c_int) {
    panic!("a completion callback panicked");
}

#[test]
fn a_panicking_completion_callback_is_caught() {
    let pool = one_worker(16, TIDEPOOL_ON_FULL_BLOCK);
    let done = AtomicUsize::new(0);
    let arg = &done as *const AtomicUsize as *mut c_void;
    assert_eq!(
        unsafe { tidepool_submit(pool, Some(count), arg, Some(done_boom)) },
        TIDEPOOL_OK
    );
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    assert_eq!(stats(pool).panicked_jobs, 1);
    assert_eq!(done.load(SeqCst), 1);
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}

/// Arg of `hold_until_drained`: the pool, and when to start watching.
struct Hold {
    pool: usize,
    armed: AtomicBool,
    started: AtomicBool,
}

/// Runs until its pool's queue has been emptied by someone else.
unsafe extern "C-unwind" fn hold_until_drained(arg: *mut c_void) {
    let hold = &*(arg as *const Hold);
    hold.started.store(true, SeqCst);
    eventually("the test to arm the hold", || hold.armed.load(SeqCst));
    eventually("shutdown_now to take the queue", || {
        stats(hold.pool as *mut _).queue_len == 0
    });
}

#[test]
fn shutdown_now_cancels_what_has_not_started() {
    STATUSES[2].lock().unwrap().clear();
    let pool = one_worker(100, TIDEPOOL_ON_FULL_BLOCK);
    let hold = Hold {
        pool: pool as usize,
        armed: AtomicBool::new(false),
        started: AtomicBool::new(false),
    };
    let done = AtomicUsize::new(0);
    unsafe {
        let h = &hold as *const Hold as *mut c_void;
        assert_eq!(
            tidepool_submit(pool, Some(hold_until_drained), h, Some(record_status::<2>)),
            TIDEPOOL_OK
        );
        eventually("the hold to start", || hold.started.load(SeqCst));
        for _ in 0..5 {
            let arg = &done as *const AtomicUsize as *mut c_void;
            assert_eq!(
                tidepool_submit(pool, Some(count), arg, Some(record_status::<2>)),
                TIDEPOOL_OK
            );
        }
        hold.armed.store(true, SeqCst);
        let mut cancelled = 0usize;
        assert_eq!(tidepool_shutdown_now(pool, &mut cancelled), TIDEPOOL_OK);
        assert_eq!(cancelled, 5);
    }
    assert_eq!(done.load(SeqCst), 0);
    let mut statuses = STATUSES[2].lock().unwrap().clone();
    statuses.sort();
    let mut want = vec![TIDEPOOL_ERR_CANCELLED; 5];
    want.insert(0, TIDEPOOL_OK);
    assert_eq!(statuses, want);
    assert_eq!(stats(pool).cancelled_jobs, 5);
    let arg = &done as *const AtomicUsize as *mut c_void;
    assert_eq!(
        unsafe { tidepool_submit(pool, Some(count), arg, None) },
        TIDEPOOL_ERR_SHUT_DOWN
    );
    assert_eq!(
        unsafe { tidepool_shutdown_now(pool, std::ptr::null_mut()) },
        TIDEPOOL_OK
    );
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}

/// Arg of `fan_out`: its pool and how many children to dispatch into it.
struct FanOut {
    pool: usize,
    children: usize,
    /// Submit with a timeout instead of `dispatch`.
    timeout: bool,
    ran: AtomicUsize,
}

unsafe extern "C-unwind" fn fan_out_child(arg: *mut c_void) {
    (*(arg as *const FanOut)).ran.fetch_add(1, SeqCst);
}

unsafe extern "C-unwind" fn fan_out(arg: *mut c_void) {
    let f = &*(arg as *const FanOut);
    for _ in 0..f.children {
        if f.timeout {
            // Never waits: a wait would end in TIDEPOOL_ERR_TIMEOUT.
            let code =
                tidepool_submit_timeout(f.pool as *mut _, Some(fan_out_child), arg, None, 10);
            assert_eq!(code, TIDEPOOL_OK);
        } else {
            tidepool_dispatch(f.pool as *mut _, Some(fan_out_child), arg);
        }
        assert_eq!(tidepool_last_error_code(), TIDEPOOL_OK);
    }
}

#[test]
fn a_task_dispatching_into_its_own_full_pool_never_deadlocks() {
    // One worker, busy with the task that dispatches: nobody drains the
    // queue, so past its capacity the children run on the dispatching thread.
    for timeout in [false, true] {
        let pool = tidepool_create_threadpool(1);
        let extra = 300;
        let f = FanOut {
            pool: pool as usize,
            children: THREADPOOL_QUEUE_CAPACITY + extra,
            timeout,
            ran: AtomicUsize::new(0),
        };
        unsafe { tidepool_dispatch(pool, Some(fan_out), &f as *const FanOut as *mut c_void) };
        assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
        assert_eq!(f.ran.load(SeqCst), f.children, "timeout: {timeout}");
        assert_eq!(stats(pool).inline_jobs, extra as u64, "timeout: {timeout}");
        assert_eq!(stats(pool).rejected_jobs, 0, "run inline, not refused");
        tidepool_destroy_threadpool(pool);
        assert_eq!(tidepool_last_error_code(), TIDEPOOL_OK);
    }
}

/// What a task saw when it called the waiting functions on its own pool.
#[derive(Default)]
struct SelfCalls {
    pool: usize,
    other: usize,
    codes: Mutex<Vec<c_int>>,
}

unsafe extern "C-unwind" fn call_own_pool(arg: *mut c_void) {
    let s = &*(arg as *const SelfCalls);
    let pool = s.pool as *mut tidepool_pool;
    let mut codes = s.codes.lock().unwrap();
    tidepool_destroy_threadpool(pool);
    codes.push(tidepool_last_error_code());
    codes.push(tidepool_destroy(pool));
    codes.push(tidepool_shutdown(pool));
    codes.push(tidepool_shutdown_now(pool, std::ptr::null_mut()));
    codes.push(tidepool_wait_idle(pool));
    // Destroying *another* pool from a task is fine.
    codes.push(tidepool_destroy(s.other as *mut _));
}

unsafe extern "C-unwind" fn destroy_own_in_done(arg: *mut c_void, _status: c_int) {
    let s = &*(arg as *const SelfCalls);
    s.codes
        .lock()
        .unwrap()
        .push(tidepool_destroy(s.pool as *mut _));
}

unsafe extern "C-unwind" fn nothing(_arg: *mut c_void) {}

unsafe extern "C-unwind" fn wait_idle_in_done(arg: *mut c_void, status: c_int) {
    let s = &*(arg as *const SelfCalls);
    let mut codes = s.codes.lock().unwrap();
    codes.push(status);
    codes.push(tidepool_wait_idle(s.pool as *mut _));
}

/// The own-task check asks the pool whether the thread is one of its workers
/// (`Pool::is_worker_thread`), not whether a callback is running: a `done`
/// that `tidepool_shutdown_now` calls on the caller's thread may wait for
/// the pool, whose workers it does not hold up.
#[test]
fn the_own_task_check_is_about_worker_threads() {
    let pool = one_worker(100, TIDEPOOL_ON_FULL_BLOCK);
    let hold = Hold {
        pool: pool as usize,
        armed: AtomicBool::new(false),
        started: AtomicBool::new(false),
    };
    let s = SelfCalls {
        pool: pool as usize,
        ..SelfCalls::default()
    };
    unsafe {
        let h = &hold as *const Hold as *mut c_void;
        assert_eq!(
            tidepool_submit(pool, Some(hold_until_drained), h, None),
            TIDEPOOL_OK
        );
        eventually("the hold to start", || hold.started.load(SeqCst));
        let arg = &s as *const SelfCalls as *mut c_void;
        assert_eq!(
            tidepool_submit(pool, Some(nothing), arg, Some(wait_idle_in_done)),
            TIDEPOOL_OK
        );
        hold.armed.store(true, SeqCst);
        assert_eq!(
            tidepool_shutdown_now(pool, std::ptr::null_mut()),
            TIDEPOOL_OK
        );
    }
    assert_eq!(
        *s.codes.lock().unwrap(),
        vec![TIDEPOOL_ERR_CANCELLED, TIDEPOOL_OK],
        "cancelled, then waited for its pool from the shutting-down thread"
    );
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}

#[test]
fn a_task_destroying_its_own_pool_is_refused_not_deadlocked() {
    let pool = tidepool_create_threadpool(2);
    let other = tidepool_create_threadpool(1);
    let s = SelfCalls {
        pool: pool as usize,
        other: other as usize,
        ..SelfCalls::default()
    };
    let arg = &s as *const SelfCalls as *mut c_void;
    unsafe { tidepool_dispatch(pool, Some(call_own_pool), arg) };
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    let own = TIDEPOOL_ERR_IN_OWN_TASK;
    assert_eq!(
        *s.codes.lock().unwrap(),
        vec![own, own, own, own, own, TIDEPOOL_OK]
    );
    assert_eq!(
        tidepool_threadpool_size(other),
        -1,
        "the other pool was destroyed"
    );

    s.codes.lock().unwrap().clear();
    assert_eq!(
        unsafe { tidepool_submit(pool, Some(nothing), arg, Some(destroy_own_in_done)) },
        TIDEPOOL_OK
    );
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    assert_eq!(*s.codes.lock().unwrap(), vec![own]);
    assert_eq!(tidepool_threadpool_size(pool), 2, "still alive");
    tidepool_destroy_threadpool(pool);
    assert_eq!(tidepool_last_error_code(), TIDEPOOL_OK);
}

#[test]
fn eight_threads_dispatch_while_another_resizes() {
    let pool = tidepool_create_threadpool(4);
    let done = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let per_thread = 2000;
    let handle = pool as usize;
    std::thread::scope(|sc| {
        let resizer = sc.spawn(|| {
            let pool = handle as *mut tidepool_pool;
            let mut sizes = [1, 8, 3, 16, 2].iter().cycle();
            let mut resizes = 0;
            while !stop.load(SeqCst) {
                let n = *sizes.next().unwrap();
                let target = stats(pool).target_threads as c_int;
                let code = if n >= target {
                    tidepool_expand_threadpool(n, pool)
                } else {
                    tidepool_shrink_threadpool(n, pool)
                };
                assert_eq!(code, TIDEPOOL_OK, "{}", last_error());
                assert!(tidepool_threadpool_size(pool) >= 1);
                resizes += 1;
                std::thread::yield_now();
            }
            resizes
        });
        let dispatchers: Vec<_> = (0..8)
            .map(|_| {
                let done = &done as *const AtomicUsize as usize;
                sc.spawn(move || {
                    for _ in 0..per_thread {
                        unsafe {
                            tidepool_dispatch(handle as *mut _, Some(count), done as *mut c_void)
                        };
                        assert_eq!(tidepool_last_error_code(), TIDEPOOL_OK);
                    }
                })
            })
            .collect();
        for d in dispatchers {
            d.join().unwrap();
        }
        stop.store(true, SeqCst);
        assert!(resizer.join().unwrap() > 0);
    });
    tidepool_destroy_threadpool(pool);
    assert_eq!(done.load(SeqCst), 8 * per_thread);
}
