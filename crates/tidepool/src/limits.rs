//! Constants more than one layer relies on, kept below them all so that none
//! reaches up or sideways for them.

/// The most worker threads a pool may have (builder, policy specs and
/// decisions alike).
pub const MAX_THREADS: usize = 32_768;

/// Consecutive short timed tasks (on one worker) before the statistics
/// switch to sampling. So a pool's first `SHORT_STREAK` tasks are all
/// timed, whatever the sampling rate: the `auto` policy's "settled" rule
/// counts on it.
pub(crate) const SHORT_STREAK: u32 = 256;
