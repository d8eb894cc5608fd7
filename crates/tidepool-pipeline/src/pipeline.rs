//! A described pipeline, and turning one or more of them into running nodes.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::builder::{validate_chain, Builder, GroupSpec, Order, Replicas, SharedInner};
use crate::error::{BuildError, Cause, PipelineError, Step};
use crate::queue::Queue;
use crate::report::Report;
use crate::run::{self, Empty, Env, ForkRt, Key, Node, Out, PipeRt, Reorder, Run};

/// A pipeline, checked and ready to run.
pub struct Pipeline<B> {
    pub(crate) spec: Builder<B>,
}

impl<B: Send + 'static> Pipeline<B> {
    /// Start describing a pipeline.
    pub fn builder(name: impl Into<String>) -> Builder<B> {
        Builder::new(name)
    }

    pub(crate) fn new(spec: Builder<B>) -> Result<Self, BuildError> {
        let mut errors = Vec::new();
        let name = &spec.name;
        if spec.source.is_none() {
            errors.push(format!("pipeline `{name}` has no source"));
        }
        match &spec.buffers {
            None => errors.push(format!(
                "pipeline `{name}` has no buffers (Builder::buffers)"
            )),
            Some((0, _)) => errors.push(format!("pipeline `{name}`: buffers must be at least 1")),
            Some((n, _)) => {
                // A group waiting for `repeat` buffers holds up to `repeat - 1`
                // per thread, and a fork holds the stream's last buffer while
                // it takes empty ones for the other branches: one buffer more
                // than all of them keeps the pipeline moving.
                let held = held_while_waiting(&spec.groups);
                if *n <= held {
                    errors.push(format!(
                        "pipeline `{name}`: {n} buffers, but groups that repeat or fork can hold \
                         {held} while they wait for more; use at least {}",
                        held + 1
                    ));
                }
            }
        }
        validate_chain(&spec, false, &mut errors);
        let mut seen = Vec::new();
        for g in &spec.groups {
            if let Some(s) = &g.shared {
                let ptr = Arc::as_ptr(&s.inner) as *const ();
                if seen.contains(&ptr) {
                    errors.push(format!(
                        "pipeline `{name}` passes shared stage `{}` twice",
                        s.inner.name
                    ));
                }
                seen.push(ptr);
            }
        }
        if errors.is_empty() {
            Ok(Pipeline { spec })
        } else {
            Err(BuildError(errors.join("; ")))
        }
    }

    /// The pipeline's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Run the pipeline to its end (or its first failure) and report.
    pub fn run(self) -> Result<Report, PipelineError> {
        run_all(vec![self])
    }
}

fn held_while_waiting<B>(groups: &[GroupSpec<B>]) -> usize {
    groups
        .iter()
        .map(|g| {
            let threads = match g.replicas {
                Replicas::Fixed(n) => n,
                Replicas::Sized { .. } => 1,
            };
            threads * (g.repeat.max(1) - 1)
                + g.fork.as_ref().map_or(0, |f| {
                    1 + f
                        .branches
                        .iter()
                        .map(|b| held_while_waiting(&b.groups))
                        .sum::<usize>()
                })
        })
        .sum()
}

/// Run several pipelines at once, typically pipelines that share a stage
/// (FG 2.0's intersecting pipelines): the shared stage's thread serves all
/// of them. All must have the same buffer type. The first failure in any of
/// them stops all of them.
pub fn run_all<B: Send + 'static>(pipelines: Vec<Pipeline<B>>) -> Result<Report, PipelineError> {
    let (nodes, run) = compile(pipelines);
    let run = Arc::new(run);
    run::execute(nodes, run)
}

/// One link still waiting for the next node's queue.
enum Link<B> {
    /// Set `nodes[node].outs[pipe]`.
    Out {
        node: usize,
        set_total: bool,
        reorder: Option<(Arc<Mutex<Reorder<B>>>, Key)>,
        join: bool,
    },
    /// The next queue is one of this fork's branches.
    Branch(usize),
    /// The next queue is this fork's join.
    Join(usize),
}

struct Compiler<B> {
    pipes: usize,
    nodes: Vec<Node<B>>,
    queues: Vec<Arc<Queue<Env<B>>>>,
    shared: HashMap<*const (), usize>,
    shared_feeds: HashMap<*const (), Vec<usize>>,
}

impl<B: Send + 'static> Compiler<B> {
    fn queue(&mut self, feeding: &[usize], capacity: usize) -> Arc<Queue<Env<B>>> {
        let q = Arc::new(Queue::new(self.pipes, feeding, capacity));
        self.queues.push(q.clone());
        q
    }

    fn node(
        &mut self,
        name: String,
        stage_names: Vec<String>,
        pipe: usize,
        input: Option<Arc<Queue<Env<B>>>>,
    ) -> usize {
        let mut outs = Vec::with_capacity(self.pipes);
        outs.resize_with(self.pipes, || None);
        self.nodes.push(Node {
            name,
            stage_names,
            pipes: vec![pipe],
            input,
            outs,
            replicas: Replicas::Fixed(1),
            repeat: 1,
            priority: None,
            source: Mutex::new(None),
            makers: Vec::new(),
            shared: None,
            stats: Mutex::default(),
        });
        self.nodes.len() - 1
    }

    fn connect(&mut self, links: Vec<Link<B>>, q: Option<&Arc<Queue<Env<B>>>>, pipe: usize) {
        for l in links {
            match l {
                Link::Out {
                    node,
                    set_total,
                    reorder,
                    join,
                } => {
                    self.nodes[node].outs[pipe] = Some(match q {
                        Some(q) => Out::Push {
                            queue: q.clone(),
                            set_total,
                            reorder,
                            join,
                        },
                        None => Out::Free,
                    });
                }
                Link::Branch(node) | Link::Join(node) => {
                    let is_join = matches!(l, Link::Join(_));
                    let Some(Out::Fork(f)) = &self.nodes[node].outs[pipe] else {
                        unreachable!("a fork link points at a fork");
                    };
                    let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
                    if is_join {
                        f.join = q.cloned();
                    } else {
                        f.branches.push(q.expect("a branch has stages").clone());
                    }
                }
            }
        }
    }

    fn chain(
        &mut self,
        groups: Vec<GroupSpec<B>>,
        pipe: usize,
        capacity: usize,
        mut links: Vec<Link<B>>,
    ) -> Vec<Link<B>> {
        for g in groups {
            if let Some(sh) = &g.shared {
                let key = Arc::as_ptr(&sh.inner) as *const ();
                let node = match self.shared.get(&key) {
                    Some(&n) => n,
                    None => {
                        let feeds = self.shared_feeds[&key].clone();
                        let q = self.queue(&feeds, capacity);
                        let n = self.node(
                            sh.inner.name.clone(),
                            vec![sh.inner.name.clone()],
                            pipe,
                            Some(q),
                        );
                        self.nodes[n].pipes = feeds;
                        self.nodes[n].shared = Some(sh.inner.clone() as Arc<SharedInner<B>>);
                        self.nodes[n].priority = sh.inner.priority;
                        self.shared.insert(key, n);
                        n
                    }
                };
                let q = self.nodes[node].input.clone();
                self.connect(links, q.as_ref(), pipe);
                links = vec![Link::Out {
                    node,
                    set_total: true,
                    reorder: None,
                    join: false,
                }];
                continue;
            }
            let q = self.queue(&[pipe], capacity);
            self.connect(links, Some(&q), pipe);
            let names: Vec<String> = g.stages.iter().map(|s| s.name.clone()).collect();
            let node = self.node(names.join("+"), names, pipe, Some(q));
            links = self.group(node, g, pipe, capacity);
        }
        links
    }

    /// Fill in a group's node and return its outgoing links.
    fn group(
        &mut self,
        node: usize,
        g: GroupSpec<B>,
        pipe: usize,
        capacity: usize,
    ) -> Vec<Link<B>> {
        let ordered_replicas = g.order == Order::Ordered && g.replicas != Replicas::Fixed(1);
        {
            let n = &mut self.nodes[node];
            n.replicas = g.replicas;
            n.repeat = g.repeat.max(1);
            n.priority = g.priority;
            n.makers = g.stages.into_iter().map(|s| s.make).collect();
        }
        let Some(fork) = g.fork else {
            return vec![Link::Out {
                node,
                set_total: true,
                reorder: ordered_replicas
                    .then(|| (Arc::new(Mutex::new(Reorder::new())), Key::Index)),
                join: false,
            }];
        };
        let branches = fork.branches.len();
        self.nodes[node].outs[pipe] = Some(Out::Fork(Mutex::new(ForkRt {
            route: fork.route,
            branches: Vec::with_capacity(branches),
            join: None,
            counts: vec![0; branches],
        })));
        let join_order =
            (fork.order == Order::Ordered).then(|| Arc::new(Mutex::new(Reorder::new())));
        let mut out = Vec::new();
        for b in fork.branches {
            for l in self.chain(b.groups, pipe, capacity, vec![Link::Branch(node)]) {
                out.push(match l {
                    Link::Out { node, reorder, .. } => Link::Out {
                        node,
                        set_total: false,
                        reorder: match &join_order {
                            Some(j) => Some((j.clone(), Key::Seq)),
                            None => reorder,
                        },
                        join: true,
                    },
                    other => other,
                });
            }
        }
        out.push(Link::Join(node));
        out
    }
}

fn compile<B: Send + 'static>(pipelines: Vec<Pipeline<B>>) -> (Vec<Node<B>>, Run<B>) {
    let pipes = pipelines.len();
    let mut c = Compiler {
        pipes,
        nodes: Vec::new(),
        queues: Vec::new(),
        shared: HashMap::new(),
        shared_feeds: HashMap::new(),
    };
    for (p, pl) in pipelines.iter().enumerate() {
        for g in &pl.spec.groups {
            if let Some(s) = &g.shared {
                c.shared_feeds
                    .entry(Arc::as_ptr(&s.inner) as *const ())
                    .or_default()
                    .push(p);
            }
        }
    }
    let all: Vec<usize> = (0..pipes).collect();
    let mut rts = Vec::with_capacity(pipes);
    for (p, pl) in pipelines.into_iter().enumerate() {
        let mut spec = pl.spec;
        let (count, mut make) = spec.buffers.take().expect("validated");
        let free = c.queue(&all, count);
        for _ in 0..count {
            let env = Env {
                buf: make(),
                round: 0,
                seq: 0,
                empty: Empty::No,
            };
            let _ = free.push(p, env);
        }
        rts.push(PipeRt {
            name: spec.name.clone(),
            free,
            buffers: count,
            rounds: AtomicU64::new(0),
        });
        let (src_name, source) = spec.source.take().expect("validated");
        let mut groups = std::mem::take(&mut spec.groups);
        let first = groups.remove(0);
        let mut names = vec![src_name];
        names.extend(first.stages.iter().map(|s| s.name.clone()));
        let node = c.node(names.join("+"), names, p, None);
        *c.nodes[node]
            .source
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(source);
        let links = c.group(node, first, p, count);
        let links = c.chain(groups, p, count, links);
        c.connect(links, None, p);
    }
    let run = Run {
        pipes: rts,
        queues: c.queues,
        error: Mutex::new(None),
        refused: AtomicBool::new(false),
        notes: Mutex::new(Vec::new()),
        start: Instant::now(),
    };
    (c.nodes, run)
}

impl<B> Reorder<B> {
    pub(crate) fn new() -> Self {
        Reorder {
            next: 0,
            pending: BTreeMap::new(),
        }
    }
}

/// Errors for a thread that could not be started.
pub(crate) fn spawn_error(pipeline: &str, stage: &str, e: std::io::Error) -> PipelineError {
    PipelineError {
        pipeline: pipeline.to_string(),
        stage: stage.to_string(),
        round: None,
        step: Step::Init,
        cause: Cause::Failed(format!("cannot start a thread: {e}").into()),
    }
}
