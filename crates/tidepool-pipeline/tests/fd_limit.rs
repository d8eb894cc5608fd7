//! A pipeline still runs when the process has no file descriptor left: each
//! stage thread parks on a pipe of its own, and when none can be made it
//! falls back to a futex park (`src/park.rs`). Alone in its test binary,
//! since it lowers the whole process's descriptor limit.

#![cfg(target_os = "linux")]

use tidepool_pipeline::{BoxError, Context, Flow, Order, Pipeline};

/// The lowest descriptor number not open now: with the limit there, no
/// new descriptor can be made (the kernel hands out the lowest free one).
fn lowest_free_fd() -> u64 {
    // SAFETY: F_GETFD only reads a descriptor's flags.
    (0..)
        .find(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1)
        .unwrap() as u64
}

/// A replicated, ordered pipeline of `items` rounds: the sum of what its
/// last stage saw, or the error.
fn run(items: u64) -> Result<u64, Box<dyn std::error::Error>> {
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let s = seen.clone();
    Pipeline::builder("no-fds")
        .buffers(2, || 0u64)
        .source(
            "read",
            move |b: &mut u64, cx: &Context| -> Result<Flow, BoxError> {
                *b = cx.round();
                Ok(if cx.round() + 1 == items {
                    Flow::Last
                } else {
                    Flow::More
                })
            },
        )
        .replicated("double", 3, || {
            |b: &mut u64, _: &Context| -> Result<(), BoxError> {
                *b *= 2;
                Ok(())
            }
        })
        .order(Order::Ordered)
        .stage(
            "sum",
            move |b: &mut u64, _: &Context| -> Result<(), BoxError> {
                s.fetch_add(*b, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            },
        )
        .build()?
        .run()?;
    Ok(seen.load(std::sync::atomic::Ordering::Relaxed))
}

#[test]
fn a_pipeline_runs_with_no_descriptor_to_spare() {
    // First with the usual limit (the parkers' pipe budget is read from it
    // now, so the run below meets EMFILE itself, not a budget of zero).
    let items = 2_000u64;
    assert_eq!(run(items).unwrap(), items * (items - 1));

    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `old`.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
    let tight = libc::rlimit {
        rlim_cur: lowest_free_fd(),
        rlim_max: old.rlim_max,
    };
    // SAFETY: setrlimit reads one rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &tight) }, 0);
    let mut fds = [0i32; 2];
    // SAFETY: pipe writes two descriptors into `fds`, closed at once if made.
    let made = unsafe { libc::pipe(fds.as_mut_ptr()) } == 0;
    if made {
        // SAFETY: both were just made here.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
    let result = run(items);
    // SAFETY: restores the limit read above.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &old) }, 0);
    assert!(
        !made,
        "the lowered limit left room for a pipe: the test tests nothing"
    );
    assert_eq!(result.expect("runs on the futex park"), items * (items - 1));
}
