//! When a task that found nobody idle makes the pool try to spawn a worker
//! (on-demand growth, then [`Sizes::reserve`](super::Sizes::reserve) up to
//! `max`, or an at-max event when that fails).

/// Whether a submit whose task woke nobody should try to spawn a worker:
/// always when no worker is alive (the task would wait forever), otherwise
/// only with on-demand growth on, and not while workers are already
/// spinning for work and there are no more queued tasks than spinners
/// (they will take them; a burst of more tasks still grows the pool).
///
/// Each value after `live` is read only when the answer depends on it, in
/// the order given (the pool's `grow_if_starved` reads them from atomics:
/// it does the loads its inline copy of this rule did, no more).
///
/// ```
/// # #[cfg(feature = "sim-hooks")] {
/// use tidepool::control::wants_worker;
/// assert!(wants_worker(0, || false, || 0, || 1)); // nobody alive
/// assert!(!wants_worker(3, || false, || 0, || 5)); // growth off
/// assert!(wants_worker(3, || true, || 0, || 1));
/// assert!(!wants_worker(3, || true, || 2, || 2)); // two spinners take two tasks
/// assert!(wants_worker(3, || true, || 2, || 3)); // a burst
/// # }
/// ```
#[inline]
pub fn wants_worker(
    live: usize,
    grow_on_demand: impl FnOnce() -> bool,
    searching: impl FnOnce() -> usize,
    queued: impl FnOnce() -> usize,
) -> bool {
    live == 0
        || grow_on_demand() && {
            let searching = searching();
            searching == 0 || queued() > searching
        }
}
