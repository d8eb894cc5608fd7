//! Cancelling a request by its id.
//!
//! A cancellation is key `<request id>` in the key-value bucket
//! `TIDEPOOL_CANCEL` (any value; the bucket keeps keys for the duplicate
//! window, 2 h). Any NATS client can cancel: it publishes to
//! `$KV.TIDEPOOL_CANCEL.<request id>` (a JetStream publish, or a plain one).
//! Request ids that are to be cancelled must be valid key names (letters,
//! digits, `-`, `_`, `=`, `/`, `.`); the client's ids are.
//!
//! Every node watches the bucket. A node that holds a cancelled request
//! which has not started records its result once, as an error result with
//! `Tidepool-Error: cancelled`, and acks it: it never runs. A running
//! handler can ask [`cancelled`] and stop early; if it then returns an
//! error, that result is recorded as `cancelled` too (without retries).
//! What a handler returns successfully is recorded as usual. A cancellation
//! that reaches a node after the request started cannot stop it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;

use crate::protocol::CANCEL;

thread_local! {
    static CURRENT: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Has the request whose handler runs on this thread been cancelled? For
/// handlers: check now and then and return early (an `Err` is then
/// recorded as `cancelled`). Always `false` outside a handler.
pub fn cancelled() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(|f| f.load(Relaxed)))
}

/// Run `f` as the handler of a request whose cancellation flag is `flag`.
pub(crate) fn with_flag<T>(flag: Arc<AtomicBool>, f: impl FnOnce() -> T) -> T {
    CURRENT.with(|c| *c.borrow_mut() = Some(flag));
    let out = f();
    CURRENT.with(|c| *c.borrow_mut() = None);
    out
}

/// Is `request` usable as a key of the cancellation bucket?
pub fn valid_request_id(request: &str) -> bool {
    !request.is_empty()
        && request.len() <= 256
        && !request.starts_with('.')
        && !request.ends_with('.')
        && request
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'=' | b'/' | b'.'))
}

/// Cancel `request` (see the module docs for what that does).
pub async fn cancel(js: &jetstream::Context, request: &str) -> anyhow::Result<()> {
    if !valid_request_id(request) {
        anyhow::bail!(
            "request id `{request}` cannot be cancelled: use 1 to 256 of A-Z a-z 0-9 - _ = / ."
        );
    }
    let kv = js
        .get_key_value(CANCEL)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open bucket {CANCEL}: {e}"))?;
    kv.put(request, "cancelled".into())
        .await
        .map_err(|e| anyhow::anyhow!("cannot cancel {request}: {e}"))?;
    Ok(())
}

/// The cancellations a node has seen, and the flags of what it runs.
pub(crate) struct Cancellations {
    seen: Mutex<HashMap<String, Instant>>,
    flags: Mutex<HashMap<String, Arc<AtomicBool>>>,
    keep: Duration,
}

impl Cancellations {
    /// Forget a cancellation after `keep` (the bucket's own age limit).
    pub(crate) fn new(keep: Duration) -> Cancellations {
        Cancellations {
            seen: Mutex::new(HashMap::new()),
            flags: Mutex::new(HashMap::new()),
            keep,
        }
    }

    /// Is `request` cancelled?
    pub(crate) fn is_cancelled(&self, request: &str) -> bool {
        self.seen.lock().is_ok_and(|s| s.contains_key(request))
    }

    /// The flag a handler of `request` will see (raised if already cancelled).
    pub(crate) fn flag(&self, request: &str) -> Arc<AtomicBool> {
        let flag = Arc::new(AtomicBool::new(self.is_cancelled(request)));
        if let Ok(mut f) = self.flags.lock() {
            f.insert(request.to_string(), flag.clone());
        }
        flag
    }

    /// The handler of `request` returned: its flag is no longer needed.
    pub(crate) fn done(&self, request: &str) {
        if let Ok(mut f) = self.flags.lock() {
            f.remove(request);
        }
    }

    fn note(&self, request: &str) {
        if let Ok(mut s) = self.seen.lock() {
            let keep = self.keep;
            if s.len() % 1024 == 1023 {
                s.retain(|_, at| at.elapsed() < keep);
            }
            s.insert(request.to_string(), Instant::now());
        }
        if let Some(flag) = self.flags.lock().ok().and_then(|f| f.get(request).cloned()) {
            flag.store(true, Relaxed);
        }
    }

    /// Follow the bucket: its keys, then every new one (started again if
    /// the watch ends).
    pub(crate) async fn watch(self: Arc<Self>, kv: kv::Store) {
        loop {
            if let Ok(mut watch) = kv.watch_with_history(">").await {
                while let Some(Ok(entry)) = watch.next().await {
                    if entry.operation == kv::Operation::Put {
                        self.note(&entry.key);
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
