//! `tidepool node`: run one node of a cluster (see docs/cluster.md).

use clap::Args;
use tidepool_cluster::args::{run_node, NodeArgs};
use tidepool_cluster::Node;

use crate::cluster_replay::with_trace;

use crate::error::usage;

const EXAMPLES: &str = "\
Examples:
  tidepool node --nats nats://127.0.0.1:4222
  tidepool node --nats nats://10.0.0.1:4222,nats://10.0.0.2:4222 --policy frequency --queue hybrid
  tidepool node --policy fixed:16 --journal node.journal

The node pulls only as many requests as its pool can start now, acks each after its
result is stored, and stops gracefully on SIGTERM or Ctrl-C (running tasks finish).";

/// Options of `tidepool node`.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct NodeCmdArgs {
    #[command(flatten)]
    node: NodeArgs,
}

/// Run the node until SIGTERM or Ctrl-C.
pub fn run(a: NodeCmdArgs) -> anyhow::Result<()> {
    let config = a.node.config().map_err(usage)?;
    // The laboratory's node also runs `trace` tasks (`cluster replay`).
    run_node(with_trace(Node::new(config)))?;
    Ok(())
}
