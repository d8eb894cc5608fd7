//! `tidepool-node`: one node of a tidepool cluster (the same as `tidepool node`).
//! Runs until SIGTERM or Ctrl-C, then stops gracefully.

use std::process::ExitCode;

use clap::Parser;
use tidepool_cluster::args::{run_node, NodeArgs};
use tidepool_cluster::Node;

/// One node of a tidepool cluster: a self-sizing pool that takes requests
/// from NATS JetStream.
#[derive(Debug, Parser)]
#[command(name = "tidepool-node", version)]
struct Cli {
    #[command(flatten)]
    node: NodeArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match cli.node.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run_node(Node::new(config)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
