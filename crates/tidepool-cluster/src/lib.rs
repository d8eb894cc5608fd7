//! # tidepool-cluster
//!
//! A distributed tidepool: nodes that each run a self-sizing [`tidepool::Pool`]
//! and share work through NATS JetStream, and lose nothing when a node dies.
//! See `docs/cluster.md` for the architecture and the exact guarantees.
//!
//! | module | what |
//! |---|---|
//! | [`protocol`] | streams, subjects, headers, settings, connecting with retries |
//! | [`tasks`] | tasks that travel (name + payload) and the built-in handlers |
//! | [`node`] | a node: pulls what its pool can start, runs, records, acks |
//! | [`client`] | submit a request and await its result; batches; options |
//! | [`limits`] | concurrency and rate limits per task name, and their lease protocol |
//! | [`cancel`] | cancel a request; what a running handler sees |
//! | [`dashboard`] | the live web page of `tidepool cluster dashboard` |
//! | [`status`] | collect the nodes' status reports |
//! | [`audit`] | count results, duplicates and dead letters in the streams |
//! | [`chaos`] | the chaos scenario: kill a node, restart the broker, count |
//! | [`http`] | a small GET-only HTTP server (`/metrics`, the dashboard) |
//! | [`server`] | start a private `nats-server` (tests, demos, `cluster up`) |
//! | [`process`] | node processes and signals |
//! | [`args`] | the node's command-line options (`tidepool-node`, `tidepool node`) |
//! | [`duration`] | duration options: a unit required, a range checked |
#![warn(missing_docs)]

pub mod args;
pub mod audit;
pub mod cancel;
pub mod chaos;
pub mod client;
pub mod dashboard;
pub mod duration;
pub mod http;
pub mod limits;
pub mod node;
pub mod process;
pub mod protocol;
pub mod server;
pub mod status;
mod suspect;
pub mod tasks;

/// The NATS client this crate speaks through (its types are in this API).
pub use async_nats;
pub use client::{Client, Pending, SubmitOptions, TaskResult};
pub use node::{Node, NodeConfig, NodeStatus};
pub use protocol::{Priority, Settings};
pub use server::NatsServer;
