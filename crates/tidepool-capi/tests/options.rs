//! `tidepool_submit_with` (priority, deadline, cancel token) and
//! `tidepool_block_in_place`, called from Rust as C would call them.

use std::ffi::{c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use tidepool_capi::builder::*;
use tidepool_capi::error::*;
use tidepool_capi::options::*;
use tidepool_capi::pool::*;
use tidepool_capi::stats::*;
use tidepool_capi::tidepool_pool;
use tidepool_test_support::eventually;

fn last_error() -> String {
    unsafe { CStr::from_ptr(tidepool_last_error()) }
        .to_string_lossy()
        .into_owned()
}

fn pool(min: usize, max: usize) -> *mut tidepool_pool {
    unsafe {
        let b = tidepool_builder_new();
        let name = CString::new("options").unwrap();
        assert_eq!(tidepool_builder_name(b, name.as_ptr()), TIDEPOOL_OK);
        assert_eq!(tidepool_builder_max_threads(b, max), TIDEPOOL_OK);
        assert_eq!(tidepool_builder_min_threads(b, min), TIDEPOOL_OK);
        let pool = tidepool_builder_build(b);
        assert!(!pool.is_null(), "{}", last_error());
        pool
    }
}

fn stats(pool: *mut tidepool_pool) -> tidepool_stats {
    let mut s = tidepool_stats::default();
    assert_eq!(unsafe { tidepool_stats_get(pool, &mut s) }, TIDEPOOL_OK);
    s
}

/// A latch: `open` once, `wait` until it is.
#[derive(Default)]
struct Latch {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Latch {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }
}

unsafe extern "C-unwind" fn wait_latch(arg: *mut c_void) {
    (*(arg as *const Latch)).wait();
}

/// One task: its id, the log its run appends to, and its completion status.
struct Probe<'a> {
    id: usize,
    log: &'a Mutex<Vec<usize>>,
    status: Mutex<Option<c_int>>,
    /// Completion callbacks so far (exactly one is right).
    dones: AtomicUsize,
}

impl<'a> Probe<'a> {
    fn new(id: usize, log: &'a Mutex<Vec<usize>>) -> Self {
        Probe {
            id,
            log,
            status: Mutex::new(None),
            dones: AtomicUsize::new(0),
        }
    }
    fn arg(&self) -> *mut c_void {
        self as *const Self as *mut c_void
    }
    fn status(&self) -> Option<c_int> {
        *self.status.lock().unwrap()
    }
}

unsafe extern "C-unwind" fn probe_run(arg: *mut c_void) {
    let p = &*(arg as *const Probe);
    p.log.lock().unwrap().push(p.id);
}

unsafe extern "C-unwind" fn probe_done(arg: *mut c_void, status: c_int) {
    let p = &*(arg as *const Probe);
    *p.status.lock().unwrap() = Some(status);
    p.dones.fetch_add(1, SeqCst);
}

/// A one-worker pool held busy by a task waiting at the returned latch.
fn held_pool(latch: &Latch) -> *mut tidepool_pool {
    let pool = pool(1, 1);
    let arg = latch as *const Latch as *mut c_void;
    assert_eq!(
        unsafe { tidepool_submit(pool, Some(wait_latch), arg, None) },
        TIDEPOOL_OK
    );
    // The hold is running once the queue is empty again.
    eventually("the hold to run", || {
        let s = stats(pool);
        s.busy_threads == 1 && s.queue_len == 0
    });
    pool
}

fn submit_with(
    pool: *mut tidepool_pool,
    p: &Probe,
    priority: c_int,
    deadline_ns: u64,
    token: *const tidepool_cancel_token,
) -> c_int {
    unsafe {
        tidepool_submit_with(
            pool,
            Some(probe_run),
            p.arg(),
            Some(probe_done),
            priority,
            deadline_ns,
            token,
        )
    }
}

#[test]
fn higher_priorities_start_first_on_a_busy_worker() {
    let latch = Latch::default();
    let pool = held_pool(&latch);
    let log = Mutex::new(Vec::new());
    let probes: Vec<Probe> = (0..6).map(|i| Probe::new(i, &log)).collect();
    let priorities = [
        TIDEPOOL_PRIORITY_LOW,
        TIDEPOOL_PRIORITY_NORMAL,
        TIDEPOOL_PRIORITY_HIGH,
        TIDEPOOL_PRIORITY_LOW,
        TIDEPOOL_PRIORITY_HIGH,
        TIDEPOOL_PRIORITY_NORMAL,
    ];
    for (p, prio) in probes.iter().zip(priorities) {
        let code = submit_with(pool, p, prio, 0, std::ptr::null());
        assert_eq!(code, TIDEPOOL_OK, "{}", last_error());
    }
    latch.open();
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    assert_eq!(*log.lock().unwrap(), [2, 4, 1, 5, 0, 3]);
    assert!(probes.iter().all(|p| p.status() == Some(TIDEPOOL_OK)));
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}

#[test]
fn a_task_queued_past_its_deadline_never_runs_and_reports_expired() {
    let latch = Latch::default();
    let pool = held_pool(&latch);
    let log = Mutex::new(Vec::new());
    let late = Probe::new(1, &log);
    let timely = Probe::new(2, &log);
    let prio = TIDEPOOL_PRIORITY_NORMAL;
    assert_eq!(
        submit_with(pool, &late, prio, 1_000_000, std::ptr::null()),
        TIDEPOOL_OK
    );
    let hour = 3_600_000_000_000;
    assert_eq!(
        submit_with(pool, &timely, prio, hour, std::ptr::null()),
        TIDEPOOL_OK
    );
    // Past the first deadline for sure (the worker is still held).
    std::thread::sleep(Duration::from_millis(20));
    latch.open();
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    assert_eq!(*log.lock().unwrap(), [2]);
    assert_eq!(late.status(), Some(TIDEPOOL_ERR_EXPIRED));
    assert_eq!(timely.status(), Some(TIDEPOOL_OK));
    let s = stats(pool);
    assert_eq!((s.expired_jobs, s.cancelled_jobs), (1, 0));
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}

#[test]
fn a_token_cancelled_while_queued_drops_its_tasks_unrun() {
    let latch = Latch::default();
    let pool = held_pool(&latch);
    let log = Mutex::new(Vec::new());
    let (a, b, free) = (
        Probe::new(1, &log),
        Probe::new(2, &log),
        Probe::new(3, &log),
    );
    unsafe {
        let token = tidepool_cancel_token_new();
        let clone = tidepool_cancel_token_clone(token);
        assert!(!clone.is_null());
        let prio = TIDEPOOL_PRIORITY_HIGH;
        assert_eq!(submit_with(pool, &a, prio, 0, token), TIDEPOOL_OK);
        // The library keeps its own reference: freeing the caller's is fine.
        tidepool_cancel_token_free(token);
        assert_eq!(
            submit_with(pool, &b, TIDEPOOL_PRIORITY_LOW, 0, clone),
            TIDEPOOL_OK
        );
        assert_eq!(
            submit_with(pool, &free, prio, 0, std::ptr::null()),
            TIDEPOOL_OK
        );
        assert_eq!(tidepool_cancel_token_is_cancelled(clone), 0);
        assert_eq!(tidepool_cancel_token_cancel(clone), TIDEPOOL_OK);
        assert_eq!(tidepool_cancel_token_cancel(clone), TIDEPOOL_OK);
        assert_eq!(tidepool_cancel_token_is_cancelled(clone), 1);
        latch.open();
        assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
        tidepool_cancel_token_free(clone);
    }
    assert_eq!(*log.lock().unwrap(), [3]);
    assert_eq!(a.status(), Some(TIDEPOOL_ERR_CANCELLED));
    assert_eq!(b.status(), Some(TIDEPOOL_ERR_CANCELLED));
    assert_eq!(free.status(), Some(TIDEPOOL_OK));
    let s = stats(pool);
    assert_eq!((s.expired_jobs, s.cancelled_jobs), (0, 2));
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}

#[test]
fn bad_options_are_refused_with_a_message() {
    let pool = pool(1, 1);
    let log = Mutex::new(Vec::new());
    let p = Probe::new(0, &log);
    assert_eq!(
        submit_with(pool, &p, 7, 0, std::ptr::null()),
        TIDEPOOL_ERR_INVALID_ARGUMENT
    );
    assert!(last_error().contains("priority 7"), "{}", last_error());
    let null = std::ptr::null_mut();
    unsafe {
        assert!(tidepool_cancel_token_clone(null).is_null());
        assert_eq!(tidepool_last_error_code(), TIDEPOOL_ERR_INVALID_ARGUMENT);
        assert_eq!(
            tidepool_cancel_token_cancel(null),
            TIDEPOOL_ERR_INVALID_ARGUMENT
        );
        assert_eq!(tidepool_cancel_token_is_cancelled(null), -1);
        tidepool_cancel_token_free(null);
        assert_eq!(
            tidepool_block_in_place(None, null.cast()),
            TIDEPOOL_ERR_INVALID_ARGUMENT
        );
        let code = tidepool_submit_with(
            pool,
            None,
            null.cast(),
            None,
            TIDEPOOL_PRIORITY_NORMAL,
            0,
            null,
        );
        assert_eq!(code, TIDEPOOL_ERR_INVALID_ARGUMENT);
    }
    assert_eq!(p.status(), None);
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}

/// A parent task's arg: its pool, and the latch its child opens.
struct Nested {
    pool: usize,
    child_done: Latch,
    parent_done: Latch,
}

unsafe extern "C-unwind" fn nested_child(arg: *mut c_void) {
    (*(arg as *const Nested)).child_done.open();
}

unsafe extern "C-unwind" fn nested_wait(arg: *mut c_void) {
    (*(arg as *const Nested)).child_done.wait();
}

unsafe extern "C-unwind" fn nested_parent(arg: *mut c_void) {
    let n = &*(arg as *const Nested);
    let code = tidepool_submit(n.pool as *mut _, Some(nested_child), arg, None);
    assert_eq!(code, TIDEPOOL_OK);
    // The only worker waits for its own child: the pool adds one meanwhile.
    assert_eq!(tidepool_block_in_place(Some(nested_wait), arg), TIDEPOOL_OK);
    n.parent_done.open();
}

#[test]
fn a_task_waiting_in_block_in_place_for_its_child_in_its_own_pool_finishes() {
    let pool = pool(1, 2);
    let nested = Nested {
        pool: pool as usize,
        child_done: Latch::default(),
        parent_done: Latch::default(),
    };
    let arg = &nested as *const Nested as *mut c_void;
    assert_eq!(
        unsafe { tidepool_submit(pool, Some(nested_parent), arg, None) },
        TIDEPOOL_OK
    );
    nested.parent_done.wait();
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    let s = stats(pool);
    assert_eq!((s.completed_jobs, s.blocked_threads), (2, 0));
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}

#[test]
fn block_in_place_off_the_pool_just_calls() {
    let latch = Latch::default();
    latch.open();
    let arg = &latch as *const Latch as *mut c_void;
    assert_eq!(
        unsafe { tidepool_block_in_place(Some(wait_latch), arg) },
        TIDEPOOL_OK
    );
}

/// What `submit_into_own_full_pool` needs: its pool, a task that fills the
/// queue, a child with a cancelled token, and the two submit calls' codes.
struct OwnPool<'a> {
    pool: usize,
    filler: Probe<'a>,
    child: Probe<'a>,
    token: usize,
    codes: Mutex<Vec<c_int>>,
}

/// Runs on the pool's only worker: the filler stays queued and fills the
/// queue, so the child's submit runs it inline (the caller-runs rule), where
/// its cancelled token refuses it.
unsafe extern "C-unwind" fn submit_into_own_full_pool(arg: *mut c_void) {
    let s = &*(arg as *const OwnPool);
    let pool = s.pool as *mut tidepool_pool;
    let token = s.token as *const tidepool_cancel_token;
    let normal = TIDEPOOL_PRIORITY_NORMAL;
    let filler = submit_with(pool, &s.filler, normal, 0, std::ptr::null());
    let child = submit_with(pool, &s.child, normal, 0, token);
    s.codes.lock().unwrap().extend([filler, child]);
}

#[test]
fn a_task_refused_inline_by_its_token_still_gets_its_done_call() {
    let pool = unsafe {
        let b = tidepool_builder_new();
        assert_eq!(tidepool_builder_threads(b, 1), TIDEPOOL_OK);
        assert_eq!(tidepool_builder_queue_capacity(b, 1), TIDEPOOL_OK);
        assert_eq!(
            tidepool_builder_on_full(b, TIDEPOOL_ON_FULL_BLOCK),
            TIDEPOOL_OK
        );
        let pool = tidepool_builder_build(b);
        assert!(!pool.is_null(), "{}", last_error());
        pool
    };
    let log = Mutex::new(Vec::new());
    let token = tidepool_cancel_token_new();
    assert_eq!(unsafe { tidepool_cancel_token_cancel(token) }, TIDEPOOL_OK);
    let own = OwnPool {
        pool: pool as usize,
        filler: Probe::new(1, &log),
        child: Probe::new(2, &log),
        token: token as usize,
        codes: Mutex::new(Vec::new()),
    };
    let arg = &own as *const OwnPool as *mut c_void;
    unsafe {
        let parent = Some(submit_into_own_full_pool as unsafe extern "C-unwind" fn(*mut c_void));
        assert_eq!(tidepool_submit(pool, parent, arg, None), TIDEPOOL_OK);
    }
    assert_eq!(tidepool_wait_idle(pool), TIDEPOOL_OK);
    unsafe { tidepool_cancel_token_free(token) };
    assert_eq!(*own.codes.lock().unwrap(), [TIDEPOOL_OK, TIDEPOOL_OK]);
    assert_eq!(*log.lock().unwrap(), [1], "the child never ran");
    assert_eq!(own.child.status(), Some(TIDEPOOL_ERR_CANCELLED));
    assert_eq!(own.child.dones.load(SeqCst), 1, "exactly one done call");
    assert_eq!(own.filler.dones.load(SeqCst), 1);
    let s = stats(pool);
    assert_eq!((s.cancelled_jobs, s.inline_jobs), (1, 0));
    assert_eq!(tidepool_destroy(pool), TIDEPOOL_OK);
}
