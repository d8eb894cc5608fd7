//! `tracing` events (feature `tracing`, target `tidepool`): a policy
//! decision (`info`), a worker spawned or retired (`debug`). Never per task:
//! these happen at most as often as the pool changes size. Without the
//! feature every function here is empty and inlined away.

use crate::policy::DecisionRecord;

/// A worker thread started.
#[inline]
pub(crate) fn spawned(pool: &str, worker: u64) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "tidepool", pool, worker, "worker spawned");
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, worker);
}

/// A worker thread retired: the pool shrank, or its keep-alive ran out.
#[inline]
pub(crate) fn retired(pool: &str, worker: u64, keep_alive_expired: bool) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "tidepool",
        pool,
        worker,
        cause = if keep_alive_expired { "keep-alive" } else { "shrink" },
        "worker retired"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, worker, keep_alive_expired);
}

/// The sizing policy decided something (holds are not logged).
#[inline]
pub(crate) fn decided(pool: &str, d: &DecisionRecord) {
    #[cfg(feature = "tracing")]
    tracing::info!(
        target: "tidepool",
        pool,
        trigger = ?d.trigger,
        old_target = d.old_target,
        new_target = d.new_target,
        reason = %d.reason,
        live = d.observation.live,
        queue_len = d.observation.queue_len,
        "policy decision"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (pool, d);
}
