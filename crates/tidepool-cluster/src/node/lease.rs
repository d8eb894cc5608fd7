//! The node's side of the limits: it watches `TIDEPOOL_LIMITS` and takes,
//! renews and releases leases in `TIDEPOOL_LEASES` (the protocol is in
//! [`crate::limits`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_nats::jetstream::kv::{self, Operation};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::limits::Limit;
use crate::protocol::unix_ns;

/// How often a waiting request looks at its task's lease table again.
const POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Default, Serialize, Deserialize)]
struct Table {
    #[serde(default)]
    holders: Vec<Holder>,
    #[serde(default)]
    next_start_ns: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Holder {
    node: String,
    request: String,
    until_ns: u64,
}

/// Limits as this node knows them, and its leases.
pub(super) struct Limiter {
    node: String,
    limits_kv: kv::Store,
    leases_kv: kv::Store,
    lease_for: Duration,
    limits: RwLock<HashMap<String, Limit>>,
    /// One request per task tries at a time on this node (arrival order).
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Limiter {
    pub(super) fn new(
        node: &str,
        limits_kv: kv::Store,
        leases_kv: kv::Store,
        lease_for: Duration,
    ) -> Limiter {
        Limiter {
            node: node.to_string(),
            limits_kv,
            leases_kv,
            lease_for,
            limits: RwLock::new(HashMap::new()),
            turns: Mutex::new(HashMap::new()),
        }
    }

    /// The limit of `task` now, if any.
    pub(super) fn limit(&self, task: &str) -> Option<Limit> {
        self.limits.read().ok()?.get(task).copied()
    }

    /// Every limit this node knows.
    pub(super) fn all(&self) -> HashMap<String, Limit> {
        self.limits.read().map(|l| l.clone()).unwrap_or_default()
    }

    /// Keep the limits current: the bucket's values, then every change.
    /// Started again (from the values) if the watch ends.
    pub(super) async fn watch(self: Arc<Self>) {
        loop {
            if let Ok(mut watch) = self.limits_kv.watch_with_history(">").await {
                if let Ok(mut l) = self.limits.write() {
                    l.clear();
                }
                while let Some(Ok(entry)) = watch.next().await {
                    let Ok(mut l) = self.limits.write() else {
                        return;
                    };
                    match entry.operation {
                        Operation::Put => match serde_json::from_slice::<Limit>(&entry.value) {
                            Ok(limit) => {
                                l.insert(entry.key.clone(), limit);
                            }
                            Err(e) => {
                                eprintln!(
                                    "{}: limit of {} is not valid JSON: {e}",
                                    self.node, entry.key
                                );
                            }
                        },
                        Operation::Delete | Operation::Purge => {
                            l.remove(&entry.key);
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn turn(&self, task: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        turns.entry(task.to_string()).or_default().clone()
    }

    /// Read the table of `task`: its value and the revision to write at
    /// (`None`: absent or deleted, so `create`).
    async fn read(&self, task: &str) -> anyhow::Result<(Table, Option<u64>)> {
        Ok(match self.leases_kv.entry(task).await? {
            Some(e) if e.operation == Operation::Put => (
                serde_json::from_slice(&e.value).unwrap_or_default(),
                Some(e.revision),
            ),
            _ => (Table::default(), None),
        })
    }

    /// Write `table` if the key is still at `revision` (compare-and-set).
    async fn write(&self, task: &str, table: &Table, revision: Option<u64>) -> bool {
        let Ok(value) = serde_json::to_vec(table) else {
            return false;
        };
        match revision {
            Some(r) => self.leases_kv.update(task, value.into(), r).await.is_ok(),
            None => self.leases_kv.create(task, value.into()).await.is_ok(),
        }
    }

    /// Wait until `request` of `task` may start under the task's limit, or
    /// until `give_up` says stop (`None`). `Some(true)`: started holding a
    /// lease (release it when the handler returns); `Some(false)`: no
    /// concurrency limit (or none at all now).
    pub(super) async fn admit(
        &self,
        task: &str,
        request: &str,
        give_up: impl Fn() -> bool,
    ) -> Option<bool> {
        let turn = self.turn(task);
        let _turn = turn.lock().await;
        loop {
            if give_up() {
                return None;
            }
            let Some(limit) = self.limit(task) else {
                return Some(false);
            };
            let (mut table, revision) = match self.read(task).await {
                Ok(t) => t,
                Err(_) => {
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            };
            let now = unix_ns();
            table.holders.retain(|h| h.until_ns > now);
            let full = limit
                .concurrency
                .is_some_and(|n| table.holders.len() >= n as usize);
            let early = limit.rate_per_s.is_some() && table.next_start_ns > now;
            if full || early {
                let wait = if full {
                    POLL
                } else {
                    Duration::from_nanos(table.next_start_ns - now).min(Duration::from_secs(1))
                };
                tokio::time::sleep(wait).await;
                continue;
            }
            if limit.concurrency.is_some() {
                table.holders.push(Holder {
                    node: self.node.clone(),
                    request: request.to_string(),
                    until_ns: now + self.lease_for.as_nanos() as u64,
                });
            }
            if let Some(r) = limit.rate_per_s {
                table.next_start_ns = now + (1e9 / r) as u64;
            }
            if self.write(task, &table, revision).await {
                return Some(limit.concurrency.is_some());
            }
        }
    }

    /// Change this node's holder entries of `task` with `f` (compare-and-set,
    /// retried on conflict for up to 10 s; a lease not renewed expires).
    async fn edit(&self, task: &str, f: impl Fn(&mut Table, u64)) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::time::Instant::now() < deadline {
            if let Ok((mut table, revision)) = self.read(task).await {
                if revision.is_none() {
                    return;
                }
                f(&mut table, unix_ns());
                if self.write(task, &table, revision).await {
                    return;
                }
            } else {
                tokio::time::sleep(POLL).await;
            }
        }
    }

    /// Give back the lease of `request` of `task`.
    pub(super) async fn release(&self, task: &str, request: &str) {
        let node = self.node.clone();
        self.edit(task, |t, _| {
            t.holders
                .retain(|h| !(h.node == node && h.request == request))
        })
        .await;
    }

    /// Push the expiry of these leases (task → requests) forward.
    pub(super) async fn renew(&self, held: HashMap<String, Vec<String>>) {
        let until = self.lease_for.as_nanos() as u64;
        for (task, requests) in held {
            let node = self.node.clone();
            self.edit(&task, |t, now| {
                for h in &mut t.holders {
                    if h.node == node && requests.contains(&h.request) {
                        h.until_ns = now + until;
                    }
                }
            })
            .await;
        }
    }
}
