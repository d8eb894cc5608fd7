//! The two ways to run a pipeline: a thread per stage group, or pooled
//! workers that run any stage.

pub(crate) mod pooled;
pub(crate) mod threads;
