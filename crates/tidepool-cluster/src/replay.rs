//! Replay a tidepool workload across the cluster.
