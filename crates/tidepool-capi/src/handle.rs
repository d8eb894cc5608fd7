//! Pool handles: what the C `tidepool_pool *` (and the thesis's `threadpool`)
//! points to, and how a stale one is caught.
//!
//! A handle is never dereferenced. Its value is an id, unique for the life of
//! the process, looked up in a registry of live pools: a NULL handle, one
//! whose pool was destroyed, or a pointer that was never a pool is found
//! missing and reported as `TIDEPOOL_ERR_INVALID_POOL` — never a read of freed
//! memory. (Ids are not reused; on a 32-bit target they would wrap after 2^32
//! pools.) A call holds its own reference to the pool while it runs, so a
//! concurrent destroy cannot free the pool under it; the call then sees a
//! shut-down pool.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, RwLock};

use tidepool::Pool;

use crate::error::{Error, TIDEPOOL_ERR_INVALID_POOL};

/// An opaque pool, created by `tidepool_builder_build()` or
/// `create_threadpool()` and owned by the caller until `tidepool_destroy()` or
/// `destroy_threadpool()` frees it. Every function taking one is thread-safe
/// and checks it: NULL, a destroyed pool or a pointer that was never a pool
/// fails with `TIDEPOOL_ERR_INVALID_POOL`, without reading freed memory.
pub struct tidepool_pool {
    _private: [u8; 0],
}

/// What a task needs from its pool while it runs: the C API's counters.
#[derive(Debug, Default)]
pub(crate) struct TaskShared {
    /// Tasks or completion callbacks that panicked (caught).
    pub(crate) panicked: AtomicU64,
    /// Tasks run inside a submit call, on the submitting thread.
    pub(crate) inline: AtomicU64,
    /// Tasks cancelled by `tidepool_shutdown_now`.
    pub(crate) cancelled: AtomicU64,
}

/// A live pool in the registry.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) pool: Pool,
    pub(crate) tasks: Arc<TaskShared>,
}

type Registry = RwLock<HashMap<usize, Arc<Entry>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// Register a new pool and return its handle.
pub(crate) fn register(pool: Pool) -> *mut tidepool_pool {
    let id = NEXT_ID.fetch_add(1, Relaxed);
    let entry = Arc::new(Entry {
        pool,
        tasks: Arc::new(TaskShared::default()),
    });
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, entry);
    id as *mut tidepool_pool
}

fn not_a_pool(handle: *const tidepool_pool) -> Error {
    let what = if handle.is_null() {
        "the pool is NULL".to_string()
    } else {
        format!("{handle:p} is not a live pool (destroyed, or never created)")
    };
    Error::new(TIDEPOOL_ERR_INVALID_POOL, what)
}

/// The live pool behind `handle`.
pub(crate) fn lookup(handle: *const tidepool_pool) -> Result<Arc<Entry>, Error> {
    registry()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(handle as usize))
        .cloned()
        .ok_or_else(|| not_a_pool(handle))
}

/// Take the pool behind `handle` out of the registry: later lookups fail.
pub(crate) fn unregister(handle: *const tidepool_pool) -> Result<Arc<Entry>, Error> {
    let mut pools = registry().write().unwrap_or_else(|e| e.into_inner());
    let entry = pools.remove(&(handle as usize));
    if pools.is_empty() {
        // No pool left: hold no memory (a leak checker at exit sees none).
        *pools = HashMap::new();
    }
    entry.ok_or_else(|| not_a_pool(handle))
}
