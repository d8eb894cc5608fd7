//! Creating a pool thread without risking the process.
//!
//! Linux gives each thread about four memory maps (its stack and guard page,
//! and Rust's signal stack and its guard), and a process may hold at most
//! `vm.max_map_count` maps (65,530 by default). Near that limit the thread
//! is often still created, but the next allocation anywhere in the process
//! fails and aborts it: `threads(32768).build()` died that way near 16,000
//! threads. So before asking for a thread we check that the process stays
//! below the limit with a margin for everything else (an eighth of the maps);
//! refusing is an `io::Error` like any other failed spawn, which `build`
//! reports and later growth counts in `PoolStats::spawn_failures`.

use std::io;
use std::sync::OnceLock;

/// Memory maps a thread costs (measured by a test below).
const MAPS_PER_THREAD: usize = 4;

/// Spawn a thread as `builder` says, or say why the OS would not (or should
/// not) give one.
pub(crate) fn thread(
    builder: std::thread::Builder,
    f: impl FnOnce() + Send + 'static,
) -> io::Result<std::thread::JoinHandle<()>> {
    #[cfg(test)]
    injected::check()?;
    if let (Some(limit), Some(threads)) = (thread_limit(), process_threads()) {
        if threads >= limit {
            return Err(io::Error::other(format!(
                "the process has {threads} threads, and vm.max_map_count = {} leaves \
                 room for about {limit} ({MAPS_PER_THREAD} memory maps each, an eighth \
                 kept for the rest of the process)",
                max_map_count().unwrap_or(0)
            )));
        }
    }
    builder.spawn(f)
}

/// The most threads the process should hold, from `vm.max_map_count`.
fn thread_limit() -> Option<usize> {
    let maps = max_map_count()?;
    Some((maps - maps / 8) / MAPS_PER_THREAD)
}

fn max_map_count() -> Option<usize> {
    static MAX: OnceLock<Option<usize>> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// Threads in this process now (`num_threads`, field 20 of `/proc/self/stat`).
fn process_threads() -> Option<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which ends with the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(17)?.parse().ok()
}

/// Fault injection for tests: make this thread's next spawns fail.
#[cfg(test)]
pub(crate) mod injected {
    use std::cell::Cell;

    thread_local! {
        /// Spawns the calling thread may still make (`None`: unlimited).
        static BUDGET: Cell<Option<usize>> = const { Cell::new(None) };
    }

    /// Let the calling thread create `n` more threads, then fail like an
    /// exhausted OS (`None`: no limit).
    #[cfg_attr(loom, allow(dead_code))] // the loom models spawn no pool threads
    pub(crate) fn allow(n: Option<usize>) {
        BUDGET.with(|b| b.set(n));
    }

    pub(super) fn check() -> std::io::Result<()> {
        BUDGET.with(|b| match b.get() {
            Some(0) => Err(std::io::Error::from_raw_os_error(libc::EAGAIN)),
            Some(n) => {
                b.set(Some(n - 1));
                Ok(())
            }
            None => Ok(()),
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use tidepool_test_support::threads_named;

    fn maps() -> usize {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .count()
    }

    /// Start `n` threads that wait until the returned sender is dropped.
    fn waiting_threads(
        n: usize,
    ) -> (
        std::sync::mpsc::Sender<()>,
        Vec<std::thread::JoinHandle<()>>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let threads = (0..n)
            .map(|i| {
                let rx = rx.clone();
                thread(
                    std::thread::Builder::new().name(format!("maps-{i}")),
                    move || {
                        let _ = rx.lock().unwrap().recv();
                    },
                )
                .unwrap()
            })
            .collect();
        (tx, threads)
    }

    #[test]
    fn a_thread_costs_at_most_the_maps_we_budget() {
        let n = 32;
        // A first batch, joined: the first threads of a process also create
        // the allocator's per-thread arenas (a map or two each, at most
        // eight per core), which later threads reuse. Run alone, this test
        // counted them (4.75-4.9 maps per thread); the budget is for the
        // thousands of threads after them.
        let (tx, warm) = waiting_threads(n);
        drop(tx);
        warm.into_iter().for_each(|t| t.join().unwrap());
        let before = maps();
        let (tx, threads) = waiting_threads(n);
        let after = maps();
        drop(tx);
        for t in threads {
            t.join().unwrap();
        }
        // Other tests start and stop threads meanwhile: allow some slack.
        let per_thread = after.saturating_sub(before) as f64 / n as f64;
        assert!(
            per_thread <= MAPS_PER_THREAD as f64 + 0.5,
            "{per_thread} maps per thread"
        );
    }

    #[test]
    fn the_process_thread_count_is_read() {
        let n = process_threads().unwrap();
        assert!(n >= 1, "{n}");
        assert!(thread_limit().unwrap() > 1000);
    }

    #[test]
    fn a_pool_the_os_refuses_threads_is_an_error_and_leaves_nothing_behind() {
        injected::allow(Some(3));
        let e = crate::Pool::builder()
            .name("refused")
            .threads(8)
            .build()
            .unwrap_err();
        injected::allow(None);
        assert_eq!(e.field, "initial_threads");
        assert_eq!(e.value, "8");
        assert!(e.allowed.contains("refused thread 4 after 3"), "{e}");
        assert!(
            e.allowed.contains("Resource temporarily unavailable"),
            "{e}"
        );
        // The three workers that did start were shut down and joined.
        assert_eq!(threads_named("refused-"), 0);
    }

    #[test]
    fn growth_the_os_refuses_is_counted_and_the_pool_goes_on() {
        let pool = crate::Pool::builder()
            .min_threads(1)
            .max_threads(8)
            .policy(crate::policy::Fixed::keep())
            .build()
            .unwrap();
        injected::allow(Some(2));
        let target = pool.resize(8);
        injected::allow(None);
        assert_eq!(target, 8);
        assert_eq!(pool.live_threads(), 3);
        let stats = pool.stats();
        assert_eq!((stats.spawn_failures, stats.threads_created), (1, 3));
        let sum: u64 = (0..100u64)
            .map(|i| pool.submit(move || i).unwrap())
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!(sum, 4950);
        // Once the OS gives threads again, the next resize reaches the target.
        pool.resize(8);
        assert_eq!(pool.live_threads(), 8);
    }

    #[test]
    fn injected_failures_look_like_the_os_refusing() {
        injected::allow(Some(1));
        thread(std::thread::Builder::new(), || {})
            .unwrap()
            .join()
            .unwrap();
        let e = thread(std::thread::Builder::new(), || {}).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EAGAIN));
        injected::allow(None);
    }
}
