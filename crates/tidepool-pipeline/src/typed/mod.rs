//! Typed pipelines: each stage has its own input and output types
//! (`read → parse → transform → write`), as with iterators or channels,
//! run by the same engine as buffer pipelines.
//!
//! A thin layer: the engine's buffer is a [`Slot`] with one cell per stage
//! boundary, made once per buffer and recycled; stage `k` takes its input
//! out of cell `k` and puts its output into cell `k + 1`. Every feature of
//! the buffer API that does not depend on the buffer's type works under
//! the same name (replicated stages, ordered or not; self-sizing stages;
//! stages fused on a thread with `then`/`then_each`; `repeat`; priorities;
//! pooled mode; the stop handle and deadline; the timing report).
//!
//! ```
//! use tidepool_pipeline::{BoxError, Order, Pipeline};
//!
//! let (lengths, report) = Pipeline::typed("lengths")
//!     .source_iter("read", ["a", "bb", "ccc"].map(String::from))
//!     .stage("len", |s: String| Ok(s.len()))
//!     .replicated("double", 2, || |n: usize| Ok(2 * n))
//!     .order(Order::Ordered)
//!     .collect("write")?
//!     .run()?;
//! assert_eq!(lengths, vec![2, 4, 6]);
//! println!("{}", report.to_table());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod slot;

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tidepool::policy::PolicySpec;

use crate::builder::{Builder, Order};
use crate::error::{BuildError, PipelineError};
use crate::pipeline::Pipeline;
use crate::priority::PrioritySpec;
use crate::report::Report;
use crate::stage::{BoxError, Context, Flow};
use crate::stop::StopHandle;

pub use slot::Slot;
use slot::{cell, CellMaker};

/// Buffers in flight unless [`Typed::buffers`] says otherwise.
const DEFAULT_BUFFERS: usize = 16;

impl Pipeline<Slot> {
    /// Start describing a typed pipeline (see [`Typed`]).
    pub fn typed(name: impl Into<String>) -> TypedSource {
        TypedSource {
            inner: Builder::new(name),
        }
    }
}

/// A typed pipeline before its source ([`Pipeline::typed`]).
pub struct TypedSource {
    inner: Builder<Slot>,
}

impl TypedSource {
    /// A source that calls `next` until it returns `Ok(None)`.
    pub fn source<T: Send + 'static>(
        self,
        name: impl Into<String>,
        mut next: impl FnMut() -> Result<Option<T>, BoxError> + Send + 'static,
    ) -> Typed<T> {
        let inner = self
            .inner
            .source(name, move |s: &mut Slot, _: &Context| match next()? {
                Some(item) => {
                    s.put(0, item);
                    Ok(Flow::More)
                }
                None => Ok(Flow::End),
            });
        Typed {
            inner,
            cells: vec![cell::<T>],
            buffers: DEFAULT_BUFFERS,
            _out: PhantomData,
        }
    }

    /// A source that yields `items` in order.
    pub fn source_iter<I>(self, name: impl Into<String>, items: I) -> Typed<I::Item>
    where
        I: IntoIterator,
        I::IntoIter: Send + 'static,
        I::Item: Send + 'static,
    {
        let mut it = items.into_iter();
        self.source(name, move || Ok(it.next()))
    }
}

/// Describes a typed pipeline whose latest stage yields `T`; a sink
/// ([`sink`](Typed::sink), [`fold`](Typed::fold),
/// [`collect`](Typed::collect)) ends and builds it, or
/// [`build`](Typed::build) when the latest stage yields `()`. Options of the whole
/// pipeline ([`buffers`](Typed::buffers), [`pooled`](Typed::pooled),
/// [`deadline`](Typed::deadline)) go before the sink.
pub struct Typed<T> {
    inner: Builder<Slot>,
    cells: Vec<CellMaker>,
    buffers: usize,
    _out: PhantomData<fn() -> T>,
}

/// A typed stage as the engine runs it: from cell `k` to cell `k + 1`.
fn step<T: 'static, U: 'static>(
    k: usize,
    mut f: impl FnMut(T) -> Result<U, BoxError> + Send + 'static,
) -> impl FnMut(&mut Slot, &Context) -> Result<(), BoxError> + Send + 'static {
    move |s: &mut Slot, _: &Context| {
        if let Some(x) = s.take::<T>(k) {
            let y = f(x)?;
            s.put(k + 1, y);
        }
        Ok(())
    }
}

impl<T: Send + 'static> Typed<T> {
    /// The same pipeline with `f` applied to the engine's builder.
    fn map(mut self, f: impl FnOnce(Builder<Slot>) -> Builder<Slot>) -> Self {
        self.inner = f(self.inner);
        self
    }

    /// The next stage's input cell, and its output's cell added.
    fn next_cell<U: Send + 'static>(&mut self) -> usize {
        self.cells.push(cell::<U>);
        self.cells.len() - 2
    }

    fn with<U>(self, inner: Builder<Slot>) -> Typed<U> {
        Typed {
            inner,
            cells: self.cells,
            buffers: self.buffers,
            _out: PhantomData,
        }
    }

    /// A stage on a thread of its own: `f` turns each item into the next
    /// stage's input.
    pub fn stage<U: Send + 'static>(
        mut self,
        name: impl Into<String>,
        f: impl FnMut(T) -> Result<U, BoxError> + Send + 'static,
    ) -> Typed<U> {
        let k = self.next_cell::<U>();
        let inner = std::mem::replace(&mut self.inner, Builder::new(""));
        self.with(inner.stage(name, step(k, f)))
    }

    /// A stage on the previous stage's thread (a multistage thread).
    pub fn then<U: Send + 'static>(
        mut self,
        name: impl Into<String>,
        f: impl FnMut(T) -> Result<U, BoxError> + Send + 'static,
    ) -> Typed<U> {
        let k = self.next_cell::<U>();
        let inner = std::mem::replace(&mut self.inner, Builder::new(""));
        self.with(inner.then(name, step(k, f)))
    }

    /// A stage on the previous (replicated) stage's threads, an instance
    /// per thread from `make`.
    pub fn then_each<U: Send + 'static, F>(
        mut self,
        name: impl Into<String>,
        mut make: impl FnMut() -> F + Send + 'static,
    ) -> Typed<U>
    where
        F: FnMut(T) -> Result<U, BoxError> + Send + 'static,
    {
        let k = self.next_cell::<U>();
        let inner = std::mem::replace(&mut self.inner, Builder::new(""));
        self.with(inner.then_each(name, move || step(k, make())))
    }

    /// A stage on `replicas` threads, each with its own instance from
    /// `make` ([`Order::Ordered`] by default; see [`order`](Typed::order)).
    pub fn replicated<U: Send + 'static, F>(
        mut self,
        name: impl Into<String>,
        replicas: usize,
        mut make: impl FnMut() -> F + Send + 'static,
    ) -> Typed<U>
    where
        F: FnMut(T) -> Result<U, BoxError> + Send + 'static,
    {
        let k = self.next_cell::<U>();
        let inner = std::mem::replace(&mut self.inner, Builder::new(""));
        self.with(inner.replicated(name, replicas, move || step(k, make())))
    }

    /// A self-sizing replicated stage: as many threads as `policy` decides,
    /// up to `max` (see [`Builder::sized`]).
    pub fn sized<U: Send + 'static, F>(
        mut self,
        name: impl Into<String>,
        policy: PolicySpec,
        max: usize,
        mut make: impl FnMut() -> F + Send + 'static,
    ) -> Typed<U>
    where
        F: FnMut(T) -> Result<U, BoxError> + Send + 'static,
    {
        let k = self.next_cell::<U>();
        let inner = std::mem::replace(&mut self.inner, Builder::new(""));
        self.with(inner.sized(name, policy, max, move || step(k, make())))
    }

    /// The output order of the latest replicated stage.
    pub fn order(self, order: Order) -> Self {
        self.map(|b| b.order(order))
    }

    /// Multistage repeat for the latest group (see [`Builder::repeat`]).
    pub fn repeat(self, k: usize) -> Self {
        self.map(|b| b.repeat(k))
    }

    /// The priority policy of the latest group's threads.
    pub fn priority(self, spec: PrioritySpec) -> Self {
        self.map(|b| b.priority(spec))
    }

    /// Items in flight at most (the recycled buffers; 16 by default).
    pub fn buffers(mut self, count: usize) -> Self {
        self.buffers = count;
        self
    }

    /// Pooled mode (see [`Builder::pooled`]).
    pub fn pooled(self) -> Self {
        self.map(|b| b.pooled())
    }

    /// Pooled mode on `workers` workers (see [`Builder::pooled_threads`]).
    pub fn pooled_threads(self, workers: usize) -> Self {
        self.map(|b| b.pooled_threads(workers))
    }

    /// A deadline for the whole run (see [`Builder::deadline`]).
    pub fn deadline(self, after: Duration) -> Self {
        self.map(|b| b.deadline(after))
    }

    /// End with a sink on a thread of its own that consumes every item.
    pub fn sink(
        self,
        name: impl Into<String>,
        mut f: impl FnMut(T) -> Result<(), BoxError> + Send + 'static,
    ) -> Result<TypedPipeline<()>, BuildError> {
        self.fold(name, (), move |(), x| f(x))
    }

    /// End with a sink that folds every item into `init`, in order; the
    /// run returns the result.
    pub fn fold<A: Send + 'static>(
        mut self,
        name: impl Into<String>,
        init: A,
        mut f: impl FnMut(A, T) -> Result<A, BoxError> + Send + 'static,
    ) -> Result<TypedPipeline<A>, BuildError> {
        let k = self.cells.len() - 1;
        let out = Arc::new(Mutex::new(None));
        let o = out.clone();
        let mut acc = Some(init);
        let inner = std::mem::replace(&mut self.inner, Builder::new(""));
        let cells = Arc::new(std::mem::take(&mut self.cells));
        let inner = inner
            .stage(name, move |s: &mut Slot, cx: &Context| {
                if let Some(x) = s.take::<T>(k) {
                    let a = acc
                        .take()
                        .expect("the fold's value is back after each item");
                    acc = Some(f(a, x)?);
                }
                if cx.is_last() {
                    *o.lock().unwrap_or_else(|p| p.into_inner()) = acc.take();
                }
                Ok(())
            })
            .buffers(self.buffers, move || Slot::new(&cells));
        Ok(TypedPipeline {
            pipeline: inner.build()?,
            out,
        })
    }

    /// End with a sink that collects every item, in order.
    pub fn collect(self, name: impl Into<String>) -> Result<TypedPipeline<Vec<T>>, BuildError> {
        self.fold(name, Vec::new(), |mut v, x| {
            v.push(x);
            Ok(v)
        })
    }
}

impl Typed<()> {
    /// End a pipeline whose latest stage consumes its items (its output is
    /// `()`, so it is the sink, on its own thread or fused): build it.
    pub fn build(self) -> Result<TypedPipeline<()>, BuildError> {
        let cells = Arc::new(self.cells);
        let pipeline = self
            .inner
            .buffers(self.buffers, move || Slot::new(&cells))
            .build()?;
        Ok(TypedPipeline {
            pipeline,
            out: Arc::new(Mutex::new(Some(()))),
        })
    }
}

/// A typed pipeline, checked and ready to run; [`run`](TypedPipeline::run)
/// returns its sink's result and the timing report.
pub struct TypedPipeline<R> {
    pipeline: Pipeline<Slot>,
    out: Arc<Mutex<Option<R>>>,
}

impl<R> TypedPipeline<R> {
    /// A handle that stops the run from any thread (see [`StopHandle`]).
    pub fn stop_handle(&self) -> StopHandle {
        self.pipeline.stop_handle()
    }

    /// Run to the end (or the first failure, or a stop): the sink's result
    /// and the report.
    pub fn run(self) -> Result<(R, Report), PipelineError> {
        let report = self.pipeline.run()?;
        let out = self
            .out
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .expect("a run that succeeds gives its sink the last-buffer notice");
        Ok((out, report))
    }
}
