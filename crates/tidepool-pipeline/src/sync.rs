//! One place that picks the synchronisation primitives: `loom`'s model-checked
//! ones under `--cfg loom`, the real ones otherwise.

#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread::JoinHandle;

#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread::JoinHandle;

/// Lock a mutex, ignoring poisoning: no critical section in this crate runs
/// user code, so a poisoned lock still guards consistent data.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
