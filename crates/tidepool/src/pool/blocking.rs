//! [`block_in_place`]: a task tells its pool that it is about to block.
//!
//! Protocol: the calling worker adds itself to `Shared::blocked` before `f`
//! runs and removes itself after (a guard, so also when `f` panics). While
//! counted it is neither idle nor busy in the statistics, so every policy
//! sees it as not available. On entry, if no other worker is idle or
//! searching, the pool starts one compensating worker at once — up to
//! `max_threads`, whatever the policy's target — and raises the target to
//! the live count, as on-demand growth does; the compensating worker
//! leaves through the normal keep-alive path once it has nothing to do.
//! If a worker is idle and tasks wait, it is woken instead.

use std::sync::atomic::Ordering::Relaxed;

use super::shared::Shared;
use super::worker;
use crate::sync::Arc;

/// Run `f`, which is about to block (a long system call, a lock, a sleep).
///
/// Called on a worker of a [`Pool`](crate::Pool), the pool counts this
/// worker as blocked while `f` runs — not available to the sizing policy —
/// and starts a compensating worker at once if nobody else is idle (up to
/// the pool's `max_threads`); the extra worker retires after its
/// keep-alive. Called anywhere else, it just runs `f`. Either way it
/// returns `f`'s value, and a panic in `f` passes through.
///
/// ```
/// let pool = tidepool::Pool::builder().min_threads(1).max_threads(4).build()?;
/// let h = pool.submit(|| {
///     tidepool::block_in_place(|| std::thread::sleep(std::time::Duration::from_millis(5)));
///     7
/// })?;
/// assert_eq!(h.join()?, 7);
/// assert_eq!(tidepool::block_in_place(|| 6 * 7), 42); // not a worker: just runs
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn block_in_place<R>(f: impl FnOnce() -> R) -> R {
    let Some(shared) = worker::current() else {
        return f();
    };
    let _blocked = Blocked::enter(shared);
    f()
}

/// Counts the calling worker in `Shared::blocked` while it lives.
pub(crate) struct Blocked(Arc<Shared>);

impl Blocked {
    /// Count the calling worker as blocked and compensate (see the module doc).
    pub(crate) fn enter(shared: Arc<Shared>) -> Blocked {
        shared.blocked.fetch_add(1, Relaxed);
        compensate(&shared);
        Blocked(shared)
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        self.0.blocked.fetch_sub(1, Relaxed);
    }
}

/// Start a worker if nobody else is idle or searching; otherwise wake one
/// for queued work.
fn compensate(shared: &Arc<Shared>) {
    if shared.is_shutdown() {
        return;
    }
    if shared.sleepers.idle() + shared.sleepers.searching() > 0 {
        if !shared.queue.is_empty() {
            shared.sleepers.notify_work();
        }
        return;
    }
    let max = shared.sizes.max.load(Relaxed);
    if !shared.reserve_worker(max) {
        shared.control.at_max();
        return;
    }
    shared.raise_target_to_live();
    let _ = worker::spawn(shared);
}
