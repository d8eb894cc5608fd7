//! What a user writes: a [`Source`] that fills buffers and decides when the
//! stream ends, and [`Stage`]s that work on each buffer in turn.

/// The error type a stage returns: any error, boxed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a stage learns about the buffer in hand.
///
/// A stage only ever sees a `&Context` for the length of one call (it is
/// not `Clone`, and nothing hands out an owned one), which is what lets it
/// lend out the names it holds without a lifetime parameter: closures then
/// need no annotations. A `&Context` may be shared with scoped threads the
/// stage starts during the call.
pub struct Context {
    // Borrowed from the running node for the duration of one call.
    stage: std::ptr::NonNull<str>,
    pipeline: std::ptr::NonNull<str>,
    pub(crate) round: u64,
    pub(crate) last: bool,
    pub(crate) empty: bool,
    pub(crate) replica: usize,
}

// SAFETY: the pointers lead to immutable `str`s (which are `Sync`), valid
// for as long as any `&Context` can be used (see `new`).
unsafe impl Sync for Context {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("stage", &self.stage())
            .field("pipeline", &self.pipeline())
            .field("round", &self.round)
            .field("last", &self.last)
            .field("empty", &self.empty)
            .field("replica", &self.replica)
            .finish()
    }
}

impl Context {
    /// A context for one call; `stage` and `pipeline` must outlive every use
    /// of it (the framework builds it on the stack around the call).
    pub(crate) fn new(
        stage: &str,
        pipeline: &str,
        round: u64,
        last: bool,
        empty: bool,
        replica: usize,
    ) -> Self {
        Context {
            stage: std::ptr::NonNull::from(stage),
            pipeline: std::ptr::NonNull::from(pipeline),
            round,
            last,
            empty,
            replica,
        }
    }

    /// The round: this buffer's number in the source's order (0, 1, 2, …).
    pub fn round(&self) -> u64 {
        self.round
    }

    /// The last-buffer notice: no later buffer will reach this stage. Every
    /// stage sees it exactly once per pipeline run (in a replicated stage,
    /// only the replica that takes the last buffer sees it).
    pub fn is_last(&self) -> bool {
        self.last
    }

    /// The buffer carries no data: it only brings the last-buffer notice
    /// (the source ended with [`Flow::End`], or a fork sent it down a branch
    /// that the stream's real last buffer did not take). Always also last.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// The stage's name.
    pub fn stage(&self) -> &str {
        // SAFETY: a Context lives only during the call it was built for,
        // while the node that owns the name is alive (see `new`); users
        // get a `&Context` and cannot keep or clone it.
        unsafe { self.stage.as_ref() }
    }

    /// The name of the pipeline this buffer belongs to (it differs between
    /// calls of a stage that two pipelines share).
    pub fn pipeline(&self) -> &str {
        // SAFETY: as in `stage`.
        unsafe { self.pipeline.as_ref() }
    }

    /// Which replica of the stage runs this call (0 unless replicated).
    pub fn replica(&self) -> usize {
        self.replica
    }
}

/// What the source says after filling a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// The buffer is filled; more will follow.
    More,
    /// The buffer is filled and it is the last one.
    Last,
    /// Nothing was filled and the stream is over: the buffer travels empty,
    /// as the last one, so that every stage still gets its notice.
    End,
}

/// A stage of a pipeline: a function over a buffer, with its own state.
///
/// Closures `FnMut(&mut B, &Context) -> Result<(), BoxError>` are stages.
/// Implement the trait on a struct for [`init`](Stage::init) and
/// [`cleanup`](Stage::cleanup).
pub trait Stage<B>: Send {
    /// Called once on the stage's thread before its first buffer.
    fn init(&mut self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Work on one buffer.
    fn process(&mut self, buf: &mut B, cx: &Context) -> Result<(), BoxError>;

    /// Called once on the stage's thread after its last buffer, also when the
    /// run failed (if `init` succeeded).
    fn cleanup(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
}

impl<B, F> Stage<B> for F
where
    F: FnMut(&mut B, &Context) -> Result<(), BoxError> + Send,
{
    fn process(&mut self, buf: &mut B, cx: &Context) -> Result<(), BoxError> {
        self(buf, cx)
    }
}

/// The first stage: fills empty buffers and decides when the stream ends.
///
/// Closures `FnMut(&mut B, &Context) -> Result<Flow, BoxError>` are sources.
pub trait Source<B>: Send {
    /// Called once on the source's thread before the first fill.
    fn init(&mut self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Fill one buffer (it holds whatever a previous round left in it).
    fn fill(&mut self, buf: &mut B, cx: &Context) -> Result<Flow, BoxError>;

    /// Called once after the last fill, also when the run failed.
    fn cleanup(&mut self) -> Result<(), BoxError> {
        Ok(())
    }
}

impl<B, F> Source<B> for F
where
    F: FnMut(&mut B, &Context) -> Result<Flow, BoxError> + Send,
{
    fn fill(&mut self, buf: &mut B, cx: &Context) -> Result<Flow, BoxError> {
        self(buf, cx)
    }
}
