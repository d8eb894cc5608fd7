//! The number of cores this process may use.

/// Logical CPUs available to this process (the standard library's answer:
/// affinity mask and cgroup quota on Linux); 1 if it cannot tell.
///
/// Read once: the standard library reads the cgroup quota files on every
/// call, and every statistics snapshot wants the number.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
