//! The decision log's entry: one call of the sizing policy that changed
//! something, with what the policy saw.

use std::time::Duration;

use super::{Observation, Trigger};

/// One call of the sizing policy that changed something.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct DecisionRecord {
    /// Time since the pool started.
    pub at: Duration,
    /// Why the policy was called.
    pub trigger: Trigger,
    /// Target size before the decision.
    pub old_target: usize,
    /// Target size after the decision (after clamping).
    pub new_target: usize,
    /// The policy's reason.
    pub reason: String,
    /// What the policy saw.
    pub observation: Observation,
}
