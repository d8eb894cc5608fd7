//! Where a node's buffers go: a queue, the free pool, a fork's branches or
//! a broadcast's join, in order where the wiring asks for it.

use std::sync::{Arc, Mutex};

use crate::builder::{CopyFn, MergeFn, Route};
use crate::error::{guarded, PipelineError, Step};

use super::env::{Empty, Env, Key, Reorder, Q};
use super::state::Run;

/// Where a push delivers.
pub(crate) enum Dest<B> {
    /// The pipeline's free pool (after its last stage).
    Free,
    /// The next node's queue.
    Queue(Q<B>),
    /// A broadcast join, as branch `.1`'s buffer.
    Gather(Arc<Gather<B>>, usize),
}

/// A node's way out for one pipeline (or a join's).
pub(crate) struct Push<B> {
    pub(crate) dest: Dest<B>,
    /// Tell the queue its total at this node's last buffer (not at a
    /// branch's tail: the fork tells the join).
    pub(crate) set_total: bool,
    /// Keep the order: by arrival index, or by a fork's number at a join.
    pub(crate) reorder: Option<(Arc<Mutex<Reorder<B>>>, Key)>,
    /// This push ends the branches of the forks at this depth and deeper:
    /// their empty notices go back to the free pool here.
    pub(crate) drop_at: Option<usize>,
}

impl<B: Send + 'static> Push<B> {
    /// Deliver a buffer (in order, if this push keeps one). Returns the
    /// depth of the queue it went to, or `None` if the run failed.
    pub(super) fn deliver(
        &self,
        run: &Run<B>,
        pipe: usize,
        env: Env<B>,
        index: u64,
    ) -> Option<usize> {
        match &self.reorder {
            Some((r, key)) if !key.skips(&env) => {
                let k = match key {
                    Key::Index => index,
                    Key::Seq(d) => env.seq[*d],
                };
                let mut r = r.lock().unwrap_or_else(|p| p.into_inner());
                r.insert(k, env);
                let mut depth = Some(0);
                while let Some(e) = r.pop_next() {
                    depth = Some(self.put(run, pipe, e)?);
                }
                depth
            }
            _ => self.put(run, pipe, env),
        }
    }

    pub(super) fn put(&self, run: &Run<B>, pipe: usize, e: Env<B>) -> Option<usize> {
        let free = &run.pipes[pipe].free;
        if let (Some(at), Empty::Branch(d)) = (self.drop_at, e.empty) {
            if d >= at {
                return free.push(pipe, e).ok();
            }
        }
        match &self.dest {
            Dest::Free => free.push(pipe, e).ok(),
            Dest::Queue(q) => q.push(pipe, e).ok(),
            Dest::Gather(g, branch) => g.arrive(run, pipe, e, *branch),
        }
    }
}

/// Where a node's buffers of one pipeline go.
pub(crate) enum Out<B> {
    /// A queue, a join or the free pool.
    Push(Push<B>),
    /// Into a fork's branches.
    Fork(Mutex<ForkRt<B>>),
}

/// How a fork spreads buffers at run time.
pub(crate) enum SpreadRt<B> {
    Route(Route<B>),
    Broadcast {
        copy: CopyFn<B>,
        /// The copy buffers, `branches − 1` per pipeline buffer.
        pool: Q<B>,
    },
}

pub(crate) struct ForkRt<B> {
    pub(crate) spread: SpreadRt<B>,
    /// Nesting depth: 0 for a fork in the main chain.
    pub(crate) depth: usize,
    pub(crate) branches: Vec<Q<B>>,
    /// The queue after the join, whose total this fork sets (`None` at the
    /// pipeline's end, or when an outer fork's join is the same place).
    pub(crate) join: Option<Q<B>>,
    pub(crate) counts: Vec<u64>,
    /// A broadcast's join.
    pub(crate) gather: Option<Arc<Gather<B>>>,
}

/// A broadcast's join: collects each round from every branch, merges the
/// copies into the original, recycles the copies and passes the original
/// on, in the fork's order.
pub(crate) struct Gather<B> {
    pub(crate) name: String,
    pub(crate) depth: usize,
    pub(crate) pool: Q<B>,
    pub(crate) then: std::sync::OnceLock<Push<B>>,
    pub(crate) state: Mutex<GatherState<B>>,
}

pub(crate) struct GatherState<B> {
    merge: MergeFn<B>,
    next: u64,
    /// A ring of rounds (as in [`Reorder`]): per round, each branch's buffer.
    slots: Vec<(usize, Vec<Option<Env<B>>>)>,
}

impl<B: Send + 'static> Gather<B> {
    pub(crate) fn new(
        name: String,
        depth: usize,
        branches: usize,
        width: usize,
        merge: MergeFn<B>,
        pool: Q<B>,
    ) -> Self {
        let slots = (0..width.max(1))
            .map(|_| (0, (0..branches).map(|_| None).collect()))
            .collect();
        Gather {
            name,
            depth,
            pool,
            then: std::sync::OnceLock::new(),
            state: Mutex::new(GatherState {
                merge,
                next: 0,
                slots,
            }),
        }
    }

    /// Branch `branch` is done with its buffer of a round. The thread that
    /// brings a round's final buffer merges it and passes it on (with any
    /// later rounds already complete).
    pub(super) fn arrive(
        &self,
        run: &Run<B>,
        pipe: usize,
        env: Env<B>,
        branch: usize,
    ) -> Option<usize> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let GatherState { merge, next, slots } = &mut *s;
        let width = slots.len() as u64;
        let (got, envs) = &mut slots[(env.seq[self.depth] % width) as usize];
        debug_assert!(envs[branch].is_none(), "gather window overrun");
        envs[branch] = Some(env);
        *got += 1;
        let mut depth = Some(0);
        loop {
            let (got, envs) = &mut slots[(*next % width) as usize];
            if *got < envs.len() {
                return depth;
            }
            *got = 0;
            *next += 1;
            let mut orig = envs[0].take().expect("branch 0 arrived");
            for (b, c) in envs.iter_mut().enumerate().skip(1) {
                let c = c.take().expect("every branch arrived");
                if orig.empty == Empty::No {
                    if let Err(cause) = guarded(|| merge(&mut orig.buf, &c.buf, b)) {
                        run.fail(PipelineError {
                            pipeline: run.pipes[pipe].name.clone(),
                            stage: self.name.clone(),
                            round: Some(orig.round),
                            step: Step::Merge,
                            cause,
                        });
                        return None;
                    }
                }
                // Fails only once the run is aborted: then it is dropped.
                let _ = self.pool.push(pipe, c);
            }
            let then = self.then.get().expect("a join is wired before the run");
            depth = Some(then.deliver(run, pipe, orig, 0)?);
        }
    }
}
