//! Limits per task name, cluster-wide: at most N running at once, at most R
//! started per second. Stored in the broker, so that any participant (and
//! any NATS client) can set them and every node sees them.
//!
//! ## Where they live
//!
//! Key `<task>` of the key-value bucket `TIDEPOOL_LIMITS` holds the limit as
//! JSON: `{"concurrency":3,"rate_per_s":20.0}` (either may be absent or
//! `null`: no such limit). Deleting the key clears the limit. Every node
//! watches the bucket, so a change applies to the next request a node starts,
//! within the watch's delivery time (milliseconds).
//!
//! ## How nodes enforce them: the lease table
//!
//! Key `<task>` of the bucket `TIDEPOOL_LEASES` holds the task's lease table:
//! `{"holders":[{"node":..,"request":..,"until_ns":..}],"next_start_ns":N}`.
//! Every change to it is a compare-and-set on the key's revision (a KV
//! `update` with the revision read, or `create` when the key is absent), so
//! two nodes can never both act on the same table: one of them fails and
//! reads it again.
//!
//! - **Start**: a node that holds a request of a limited task reads the
//!   table, drops holders whose `until_ns` has passed (their node died or
//!   stalled), and starts the request only if fewer than `concurrency`
//!   holders remain and `next_start_ns` is not in the future. It then writes
//!   the table with itself added as a holder (`until_ns` = now + the ack
//!   wait) and `next_start_ns` = now + 1/`rate`. If the write succeeds, the
//!   request runs; if not (another node wrote first), it starts over. A
//!   request that must wait keeps its place on the node and is kept alive by
//!   the node's heartbeats; the node tries again every 50 ms (or when the
//!   rate's next slot comes). On one node, one request per task tries at a
//!   time, in arrival order.
//! - **Renew**: every ack wait / 3, with its heartbeats, a node pushes
//!   `until_ns` forward for the leases it holds (not for a task past
//!   `--max-task-time`: a hung handler loses its lease as it loses its
//!   request).
//! - **Release**: when the handler returns, before the result is recorded,
//!   the node removes its holder entry.
//!
//! So at most `concurrency` requests of a task run at once across the
//! cluster, as long as node clocks agree to well within the ack wait (a lease
//! expiry is judged by the reader's clock) and no handler hangs past
//! `--max-task-time`. A limit lowered while more are running lets those
//! finish; it holds for the next starts. Requests waiting for a lease occupy
//! their node's pull budget: a node whose every slot waits for a limited
//! task pulls nothing else meanwhile.

use std::collections::BTreeMap;

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::protocol::{valid_task_name, LIMITS};

/// The most concurrency a limit may allow.
pub const MAX_CONCURRENCY: u32 = 100_000;
/// The highest rate a limit may set, per second.
pub const MAX_RATE: f64 = 1_000_000.0;
/// The lowest rate a limit may set, per second (one per day).
pub const MIN_RATE: f64 = 1.0 / 86_400.0;

/// The limit of one task name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// At most this many running at once, cluster-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// At most this many started per second, cluster-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
}

impl Limit {
    /// Check the ranges: concurrency 1..=100000, rate one per day..=10⁶/s.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(n) = self.concurrency {
            if !(1..=MAX_CONCURRENCY).contains(&n) {
                return Err(format!(
                    "--concurrency {n} is out of range: allowed 1..={MAX_CONCURRENCY}"
                ));
            }
        }
        if let Some(r) = self.rate_per_s {
            if !(r.is_finite() && (MIN_RATE..=MAX_RATE).contains(&r)) {
                return Err(format!(
                    "--rate {r}/s is out of range: allowed 1/d..=1000000/s"
                ));
            }
        }
        if self.concurrency.is_none() && self.rate_per_s.is_none() {
            return Err("a limit needs --concurrency N or --rate R/s (or use --clear)".into());
        }
        Ok(())
    }

    /// As the CLI shows it: `concurrency 3, rate 20/s`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(n) = self.concurrency {
            parts.push(format!("concurrency {n}"));
        }
        if let Some(r) = self.rate_per_s {
            parts.push(format!("rate {r}/s"));
        }
        parts.join(", ")
    }
}

/// Parse a rate: `20/s`, `300/m`, `1000/h`, `5/d`, as starts per second.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (n, unit) = t
        .split_once('/')
        .ok_or_else(|| format!("rate `{t}` has no unit: write N/s, N/m, N/h or N/d"))?;
    let n: f64 = n
        .trim()
        .parse()
        .map_err(|_| format!("rate `{t}`: `{n}` is not a number"))?;
    let per = match unit.trim() {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        u => return Err(format!("rate `{t}`: unit `{u}` is not one of s, m, h, d")),
    };
    let r = n / per;
    Limit {
        concurrency: None,
        rate_per_s: Some(r),
    }
    .validate()?;
    Ok(r)
}

fn check_task(task: &str) -> anyhow::Result<()> {
    if !valid_task_name(task) {
        anyhow::bail!("task name `{task}` is not allowed: use 1 to 64 of A-Z a-z 0-9 - _");
    }
    Ok(())
}

async fn bucket(js: &jetstream::Context) -> anyhow::Result<kv::Store> {
    js.get_key_value(LIMITS)
        .await
        .map_err(|e| anyhow::anyhow!("cannot open bucket {LIMITS}: {e}"))
}

/// Set the limit of `task` (`None`: clear it).
pub async fn set(js: &jetstream::Context, task: &str, limit: Option<Limit>) -> anyhow::Result<()> {
    check_task(task)?;
    let kv = bucket(js).await?;
    match limit {
        Some(l) => {
            l.validate().map_err(|e| anyhow::anyhow!(e))?;
            kv.put(task, serde_json::to_vec(&l)?.into())
                .await
                .map_err(|e| anyhow::anyhow!("cannot store the limit of {task}: {e}"))?;
        }
        None => kv
            .delete(task)
            .await
            .map_err(|e| anyhow::anyhow!("cannot clear the limit of {task}: {e}"))?,
    }
    Ok(())
}

/// Every limit set now, by task name.
pub async fn all(js: &jetstream::Context) -> anyhow::Result<BTreeMap<String, Limit>> {
    let kv = bucket(js).await?;
    let mut out = BTreeMap::new();
    let mut keys = match kv.keys().await {
        Ok(k) => k.boxed(),
        Err(e) => anyhow::bail!("cannot list bucket {LIMITS}: {e}"),
    };
    while let Some(key) = keys.next().await {
        let Ok(key) = key else { continue };
        if let Ok(Some(v)) = kv.get(&key).await {
            if let Ok(l) = serde_json::from_slice::<Limit>(&v) {
                out.insert(key, l);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_ranges() {
        assert_eq!(parse_rate("20/s"), Ok(20.0));
        assert_eq!(parse_rate("120/m"), Ok(2.0));
        assert!(parse_rate("20").unwrap_err().contains("N/s"));
        assert!(parse_rate("x/s").unwrap_err().contains("not a number"));
        assert!(parse_rate("5/w").unwrap_err().contains("s, m, h, d"));
        assert!(parse_rate("0/s").unwrap_err().contains("out of range"));
        let none = Limit::default().validate().unwrap_err();
        assert!(none.contains("--clear"), "{none}");
        let zero = Limit {
            concurrency: Some(0),
            rate_per_s: None,
        };
        assert!(zero.validate().unwrap_err().contains("1..=100000"));
        let l: Limit = serde_json::from_str(r#"{"concurrency":3}"#).unwrap();
        assert_eq!(l.describe(), "concurrency 3");
    }
}
