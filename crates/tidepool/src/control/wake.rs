//! One wake-up in flight: whether a submit that finds workers parked wakes
//! one of them (the protocol is in the pool's `pool/sleep.rs`).

use std::time::Duration;

/// How long a wake-up holds further wake-ups back while its worker is on
/// its way: the slow end of an idle virtual CPU's wake-up on the 2-core VM
/// of `docs/benchmarks.md` (30–50 µs). Older, it no longer holds: on a
/// loaded machine a woken worker can wait milliseconds for a core, and the
/// next tasks must not all wait for that one thread.
pub const ARRIVAL_GRACE: Duration = Duration::from_micros(50);

/// Whether a submit that finds workers parked and nobody spinning skips its
/// wake-up because `arriving` woken workers are still on their way, the
/// last woken `since_last_wake()` ago. The clock is read only when a worker
/// is on its way.
///
/// ```
/// # #[cfg(feature = "sim-hooks")] {
/// use std::time::Duration;
/// use tidepool::control::{holds_wake_up, ARRIVAL_GRACE};
/// assert!(!holds_wake_up(0, || Duration::ZERO)); // nobody on the way
/// assert!(holds_wake_up(1, || Duration::from_micros(5)));
/// assert!(!holds_wake_up(1, || ARRIVAL_GRACE)); // too old to count on
/// # }
/// ```
#[inline]
pub fn holds_wake_up(arriving: usize, since_last_wake: impl FnOnce() -> Duration) -> bool {
    arriving > 0 && since_last_wake() < ARRIVAL_GRACE
}
