//! A stage whose user code busy-waits for a downstream stage's progress
//! (through a side channel, not the framework) while the source also
//! busy-waits: with deferred wake-ups (`running.rs`), the downstream
//! stage's wake-up is owed while two counted threads run, and neither of
//! them ever leaves the count. Without the stall bound (`running.rs`) this
//! hung; with it the owed wake-up costs at most
//! `STALL`. It can only fail on one or two cores (with more, two running
//! threads are below the count at which wake-ups are deferred); this
//! machine has two.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{counter, Buffers, Counted};
use tidepool_pipeline::{BoxError, Context, Pipeline};

type R = Result<(), BoxError>;

#[test]
fn busy_waiting_on_a_parked_stage_does_not_hang() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let made = Arc::new(AtomicU64::new(0));
        let b_done = Arc::new(AtomicU64::new(0));
        let (m1, m2, b1, b2) = (made.clone(), made.clone(), b_done.clone(), b_done.clone());
        let mut src = counter(80);
        Pipeline::builder("spin")
            .buffers(8, Buffers::default().maker())
            .source("read", move |buf: &mut Counted, cx: &Context| {
                // From round 45 on, the source waits (busy) for b.
                if cx.round() >= 45 {
                    while b1.load(Ordering::SeqCst) < 41 {
                        std::thread::yield_now();
                    }
                }
                let f = src(buf, cx);
                m1.store(cx.round() + 1, Ordering::SeqCst);
                f
            })
            .stage("a", move |_: &mut Counted, cx: &Context| -> R {
                // Round 39 leaves once the source is busy-waiting; round 40
                // waits (busy) until b has taken round 39.
                if cx.round() == 39 {
                    while m2.load(Ordering::SeqCst) < 45 {
                        std::thread::yield_now();
                    }
                }
                if cx.round() == 40 {
                    while b2.load(Ordering::SeqCst) < 40 {
                        std::thread::yield_now();
                    }
                }
                Ok(())
            })
            .stage("b", move |_: &mut Counted, cx: &Context| -> R {
                b_done.store(cx.round() + 1, Ordering::SeqCst);
                Ok(())
            })
            .build()
            .unwrap()
            .run()
            .unwrap();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the pipeline finished (no hang)");
}
