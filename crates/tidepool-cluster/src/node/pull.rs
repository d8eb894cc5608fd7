//! Step 1 of the protocol: pull what the pool can start now, highest
//! priority first.
//!
//! Each round asks the three consumers in turn (`nodes-high`, `nodes`,
//! `nodes-low`) for what is waiting now (a fetch that does not wait at the
//! broker), up to `free` requests in all. So a request of a lower priority
//! is pulled only when no higher one waits: among waiting requests, a node
//! starts higher priorities first. A round that finds nothing waits for a
//! doorbell (the stream republishes each request's headers on
//! `tidepool.bell.>`) or `IDLE_LOOK`, whichever comes first: a request
//! nak'ed with a delay or redelivered after the ack wait rings no bell.
//! Bells are drained before each round, so a bell heard while waiting is
//! always for a request published after the round's fetches began.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};

use super::check::{already_handled, bound_suspicion};
use super::run::Starter;
use super::start::start;
use crate::protocol::{Consumers, BELL_PREFIX};
use crate::suspect::Suspicion;

/// How long an idle node waits for a doorbell before it looks again.
const IDLE_LOOK: Duration = Duration::from_millis(250);

/// How long a fetch may go unanswered before the node pulls again (the
/// broker answers one at once, with what it has or with "no messages").
const FETCH_LOST: Duration = Duration::from_secs(5);

/// A fetch that ends because the broker has nothing (more) is normal.
fn is_benign_pull_end(e: &dyn std::fmt::Display) -> bool {
    let text = e.to_string().to_lowercase();
    text.contains("timeout") || text.contains("timed out") || text.contains("no messages")
}

/// Pull and start requests until `shutdown` completes.
pub(super) async fn pull(
    s: &Starter,
    client: &async_nats::Client,
    consumers: &mut Consumers,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let name = &s.state.name;
    let connection = client.statistics();
    let mut suspicion = Suspicion::new(connection.connects.load(Relaxed));
    let mut bell = client.subscribe(format!("{BELL_PREFIX}>")).await.ok();
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_millis(50);
    loop {
        if (&mut shutdown).now_or_never().is_some() {
            return;
        }
        let free = s.state.free();
        if free == 0 {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = s.state.finished.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            continue;
        }
        if let Some(b) = bell.as_mut() {
            while let Some(Some(_)) = b.next().now_or_never() {}
        }
        let mut got = 0;
        let mut failed = false;
        for consumer in consumers.iter() {
            if got >= free {
                break;
            }
            // No expiry: with one, a 2.9 server waits for the batch to fill
            // instead of answering with what it has.
            let fetch = consumer.fetch().max_messages(free - got).messages();
            let mut batch = match fetch.await {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("{name}: cannot pull requests: {e}; retrying in {backoff:?}");
                    failed = true;
                    break;
                }
            };
            loop {
                // A fetch whose request or answer was lost (a broker
                // restart) would never end: give up on it after a while.
                let m = match tokio::time::timeout(FETCH_LOST, batch.next()).await {
                    Ok(Some(m)) => m,
                    Ok(None) => break,
                    Err(_) => {
                        eprintln!(
                            "{name}: a fetch went unanswered for {FETCH_LOST:?}; pulling again"
                        );
                        break;
                    }
                };
                match m {
                    Ok(message) => {
                        got += 1;
                        let connects = connection.connects.load(Relaxed);
                        bound_suspicion(&s.state, &mut suspicion, connects).await;
                        if !already_handled(&s.state, &suspicion, connects, &message).await {
                            start(s, message);
                        }
                    }
                    Err(e) => {
                        if !is_benign_pull_end(&*e) {
                            eprintln!("{name}: pull interrupted: {e}");
                            failed = true;
                        }
                        break;
                    }
                }
            }
        }
        if failed {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
            continue;
        }
        backoff = Duration::from_millis(50);
        if got == 0 {
            let ring = async {
                match bell.as_mut() {
                    Some(b) => {
                        b.next().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut shutdown => return,
                _ = ring => {}
                _ = tokio::time::sleep(IDLE_LOOK) => {}
            }
        }
    }
}
