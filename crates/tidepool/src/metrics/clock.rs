//! The statistics clock: raw CPU ticks (TSC, via `quanta`) on the hot path,
//! converted to durations only when statistics are read.

use std::sync::OnceLock;

/// A cheap monotonic clock shared by every pool in the process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock;

fn inner() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

impl Clock {
    /// Ticks now. A few nanoseconds where the TSC is usable.
    #[inline]
    pub(crate) fn ticks() -> u64 {
        inner().raw()
    }

    /// Nanoseconds from `start` to `end` (0 if `end` is earlier).
    #[inline]
    pub(crate) fn nanos_between(start: u64, end: u64) -> u64 {
        if end <= start {
            0
        } else {
            inner().delta_as_nanos(start, end)
        }
    }
}
