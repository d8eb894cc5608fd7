//! Wiring described pipelines into nodes and queues: one node per thread
//! group, a queue in front of each, forks' branches and joins, shared
//! stages fed by every pipeline that passes them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::builder::{Builder, GroupSpec, Order, Replicas, SharedInner, Spread};
use crate::queue::Queue;
use crate::running::Running;
use crate::stop::Stopper;

use super::env::{Env, Key, Reorder};
use super::node::Node;
use super::route::{Dest, ForkRt, Gather, Out, Push, SpreadRt};
use super::state::{PipeRt, Run};

/// What a link still waiting for the next node's queue will set.
enum LinkTo {
    /// `nodes[node].outs[pipe]`.
    Out(usize),
    /// A branch of this fork.
    Branch(usize),
    /// This fork's join: the queue whose total it sets, and for a
    /// broadcast, where its gather passes buffers on.
    Join(usize),
}

struct Link<B> {
    to: LinkTo,
    /// Bound to a broadcast's gather (as this branch) whatever comes next.
    gather: Option<(Arc<Gather<B>>, usize)>,
    set_total: bool,
    reorder: Option<(Arc<Mutex<Reorder<B>>>, Key)>,
    drop_at: Option<usize>,
}

impl<B> Link<B> {
    fn new(to: LinkTo, reorder: Option<(Arc<Mutex<Reorder<B>>>, Key)>) -> Self {
        Link {
            to,
            gather: None,
            set_total: true,
            reorder,
            drop_at: None,
        }
    }
}

type MakeBuf<B> = Box<dyn FnMut() -> B + Send>;

struct Compiler<B> {
    pipes: usize,
    nodes: Vec<Node<B>>,
    queues: Vec<Arc<Queue<Env<B>>>>,
    shared: HashMap<*const (), usize>,
    shared_feeds: HashMap<*const (), Vec<usize>>,
    /// The buffer maker of the pipeline being compiled (for copy pools).
    make: Option<MakeBuf<B>>,
    /// `Env::seq`'s length: the deepest fork nesting of the run.
    depths: usize,
    /// The run's running count, shared by its queues.
    running: Arc<Running>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<B: Send + 'static> Compiler<B> {
    fn queue(&mut self, feeding: &[usize], capacity: usize) -> Arc<Queue<Env<B>>> {
        let q = Arc::new(Queue::new(
            self.pipes,
            feeding,
            capacity,
            Some(self.running.clone()),
        ));
        self.queues.push(q.clone());
        q
    }

    /// A pool of `count` buffers of pipeline `pipe` (never ends).
    fn pool(&mut self, pipe: usize, count: usize) -> Arc<Queue<Env<B>>> {
        let all: Vec<usize> = (0..self.pipes).collect();
        let q = self.queue(&all, count);
        let make = self.make.as_mut().expect("a pipeline's maker");
        for _ in 0..count {
            let _ = q.push(pipe, Env::new(make(), self.depths));
        }
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

    /// Point `links` at queue `q` (`None`: the free pool, after the last
    /// stage), unless a link is bound to a gather.
    fn connect(&mut self, links: Vec<Link<B>>, q: Option<&Arc<Queue<Env<B>>>>, pipe: usize) {
        for l in links {
            let dest = match (&l.gather, q) {
                (Some((g, b)), _) => Dest::Gather(g.clone(), *b),
                (None, Some(q)) => Dest::Queue(q.clone()),
                (None, None) => Dest::Free,
            };
            let push = |dest| Push {
                dest,
                set_total: l.set_total,
                reorder: l.reorder.clone(),
                drop_at: l.drop_at,
            };
            match l.to {
                LinkTo::Out(node) => self.nodes[node].outs[pipe] = Some(Out::Push(push(dest))),
                LinkTo::Branch(node) | LinkTo::Join(node) => {
                    let Some(Out::Fork(f)) = &self.nodes[node].outs[pipe] else {
                        unreachable!("a fork link points at a fork");
                    };
                    let mut f = lock(f);
                    if matches!(l.to, LinkTo::Branch(_)) {
                        f.branches.push(q.expect("a branch has stages").clone());
                        continue;
                    }
                    if let (true, Dest::Queue(q)) = (l.set_total, &dest) {
                        f.join = Some(q.clone());
                    }
                    if let Some(g) = &f.gather {
                        let set = g.then.set(Push {
                            set_total: false,
                            ..push(dest)
                        });
                        debug_assert!(set.is_ok(), "a join is wired once");
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
        depth: usize,
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
                        let node = &mut self.nodes[n];
                        node.pipes = feeds;
                        node.priority = sh.inner.priority;
                        match &sh.inner.make {
                            Some(make) => {
                                node.makers = vec![make.clone()];
                                node.replicas = Replicas::Fixed(sh.inner.replicas);
                            }
                            None => node.shared = Some(sh.inner.clone() as Arc<SharedInner<B>>),
                        }
                        self.shared.insert(key, n);
                        n
                    }
                };
                let q = self.nodes[node].input.clone();
                self.connect(links, q.as_ref(), pipe);
                // Each pipeline keeps its own order through the replicas.
                let ordered = sh.inner.replicas > 1 && sh.inner.order == Order::Ordered;
                links = vec![Link::new(
                    LinkTo::Out(node),
                    ordered.then(|| (Arc::new(Mutex::new(Reorder::new(capacity))), Key::Index)),
                )];
                continue;
            }
            let q = self.queue(&[pipe], capacity);
            self.connect(links, Some(&q), pipe);
            let names: Vec<String> = g.stages.iter().map(|s| s.name.clone()).collect();
            let node = self.node(names.join("+"), names, pipe, Some(q));
            links = self.group(node, g, pipe, capacity, depth);
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
        depth: usize,
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
            return vec![Link::new(
                LinkTo::Out(node),
                ordered_replicas
                    .then(|| (Arc::new(Mutex::new(Reorder::new(capacity))), Key::Index)),
            )];
        };
        let n = fork.branches.len();
        let (spread, gather) = match fork.spread {
            Spread::Route(r) => (SpreadRt::Route(r), None),
            Spread::Broadcast { copy, merge } => {
                let pool = self.pool(pipe, (n - 1) * capacity);
                let name = format!("{} (join)", self.nodes[node].name);
                let g = Gather::new(name, depth, n, capacity, merge, pool.clone());
                (SpreadRt::Broadcast { copy, pool }, Some(Arc::new(g)))
            }
        };
        self.nodes[node].outs[pipe] = Some(Out::Fork(Mutex::new(ForkRt {
            spread,
            depth,
            branches: Vec::with_capacity(n),
            join: None,
            counts: vec![0; n],
            gather: gather.clone(),
        })));
        let join_order = (gather.is_none() && fork.order == Order::Ordered)
            .then(|| Arc::new(Mutex::new(Reorder::new(capacity))));
        let mut tails = Vec::new();
        for (b, br) in fork.branches.into_iter().enumerate() {
            let start = vec![Link::new(LinkTo::Branch(node), None)];
            for mut l in self.chain(br.groups, pipe, capacity, depth + 1, start) {
                // This fork sets the join's total, and its branches' (and
                // deeper forks') empty notices end here.
                l.set_total = false;
                l.drop_at = Some(depth);
                if let Some(g) = &gather {
                    l.gather = Some((g.clone(), b));
                    l.reorder = None;
                } else if let Some(j) = &join_order {
                    l.reorder = Some((j.clone(), Key::Seq(depth)));
                }
                tails.push(l);
            }
        }
        if gather.is_some() {
            self.connect(tails, None, pipe);
            tails = Vec::new();
        }
        tails.push(Link::new(LinkTo::Join(node), None));
        tails
    }
}

/// How deeply forks nest in a chain (0: no fork).
fn fork_depth<B>(groups: &[GroupSpec<B>]) -> usize {
    groups
        .iter()
        .filter_map(|g| g.fork.as_ref())
        .map(|f| {
            1 + f
                .branches
                .iter()
                .map(|b| fork_depth(&b.groups))
                .max()
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

/// The nodes and shared run state of pipelines run together.
pub(crate) fn compile<B: Send + 'static>(specs: Vec<Builder<B>>) -> (Vec<Node<B>>, Run<B>) {
    let pipelines = specs;
    let pipes = pipelines.len();
    let depths = pipelines
        .iter()
        .map(|p| fork_depth(&p.groups))
        .max()
        .unwrap_or(0);
    let mut c = Compiler {
        pipes,
        nodes: Vec::new(),
        queues: Vec::new(),
        shared: HashMap::new(),
        shared_feeds: HashMap::new(),
        make: None,
        depths,
        running: Arc::new(Running::new(tidepool::sys::cores())),
    };
    for (p, pl) in pipelines.iter().enumerate() {
        for g in &pl.groups {
            if let Some(s) = &g.shared {
                c.shared_feeds
                    .entry(Arc::as_ptr(&s.inner) as *const ())
                    .or_default()
                    .push(p);
            }
        }
    }
    let mut rts = Vec::with_capacity(pipes);
    for (p, pl) in pipelines.into_iter().enumerate() {
        let mut spec = pl;
        let (count, make) = spec.buffers.take().expect("validated");
        c.make = Some(make);
        let free = c.pool(p, count);
        rts.push(PipeRt {
            name: spec.name.clone(),
            free,
            buffers: count,
            rounds: CachePadded::new(AtomicU64::new(0)),
            stopper: Stopper::new(spec.stop.clone(), spec.deadline),
        });
        let (src_name, source) = spec.source.take().expect("validated");
        let mut groups = std::mem::take(&mut spec.groups);
        let first = groups.remove(0);
        let mut names = vec![src_name];
        names.extend(first.stages.iter().map(|s| s.name.clone()));
        let node = c.node(names.join("+"), names, p, None);
        *lock(&c.nodes[node].source) = Some(source);
        let links = c.group(node, first, p, count, 0);
        let links = c.chain(groups, p, count, 0, links);
        c.connect(links, None, p);
    }
    let run = Run {
        pipes: rts,
        queues: c.queues,
        running: c.running,
        error: Mutex::new(None),
        refused: AtomicBool::new(false),
        notes: Mutex::new(Vec::new()),
        start: Instant::now(),
    };
    (c.nodes, run)
}
