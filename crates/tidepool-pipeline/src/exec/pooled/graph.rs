//! The pipelines of a run, their groups, forks, joins and shared stages
//! flattened into one list of task kinds with fixed successors, and where
//! every buffer id lives (see the parent module's doc, "Forks and joins"
//! and "Shared stages").

use std::collections::HashMap;
use std::sync::Arc;

use crate::builder::{
    Builder, CopyFn, GroupSpec, MergeFn, Order, Replicas, Route, SharedInner, Spread, StageSpec,
};

/// Where a group's finished buffers go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// The input ring of this group.
    Group(usize),
    /// Back to the free stack of this source group (after its pipeline's
    /// last group).
    Free(usize),
    /// Through this fork into its branches.
    Fork(usize),
    /// A shared stage's: on along the buffer's pipeline (its lane's
    /// `next`).
    Lanes,
    /// The end of a route fork's branch: this fork's join.
    Join(usize),
    /// The end of a broadcast's branch `.1`: the fork's gather.
    Gather(usize, usize),
}

/// What a fork does with a buffer.
#[derive(Clone, Copy, Debug)]
pub(super) enum ForkKind {
    /// Each buffer down one branch; `notices`: the first of the fork's
    /// `branches − 1` empty last-buffer notices' ids.
    Route { ordered: bool, notices: u32 },
    /// Each buffer down every branch: branch `b > 0` gets the copy with id
    /// `copies + root × (branches − 1) + b − 1`; `merge` is the group that
    /// folds a complete round's copies back into the original.
    Broadcast { copies: u32, merge: usize },
}

/// A fork and its join.
pub(super) struct ForkRt {
    /// Nesting depth (0 in the main chain): the buffer's position slot.
    pub(super) depth: usize,
    /// The first group of each branch.
    pub(super) branches: Vec<usize>,
    /// Where the join passes buffers on.
    pub(super) after: Next,
    pub(super) kind: ForkKind,
    /// A route fork's branch `b` is scope `scopes + b`.
    pub(super) scopes: usize,
    /// The join's region in the id array: an ordered route join's reorder
    /// ring (`width`), or a gather's per-round arrival counts then its
    /// originals (`2 × width`).
    pub(super) region: usize,
}

impl ForkRt {
    /// Whether `id` is one of this (route) fork's empty notices.
    pub(super) fn own_notice(&self, id: u32) -> bool {
        match self.kind {
            ForkKind::Route { notices, .. } => {
                id >= notices && id - notices < self.branches.len() as u32 - 1
            }
            ForkKind::Broadcast { .. } => false,
        }
    }
}

/// User code a group runs besides its stages, on its one instance.
pub(crate) enum Extra<B> {
    /// A route fork's choice of branch.
    Route(Route<B>),
    /// A broadcast's copy into branch `b`'s buffer.
    Copy(CopyFn<B>),
    /// A gather: fold the copies into the original.
    Merge(MergeFn<B>),
}

/// A group as the pooled engine runs it.
pub(super) struct Flat<B> {
    pub(super) stages: Vec<StageSpec<B>>,
    /// The names in messages: the source's first in a source group, a merge
    /// group's "`<fork group>` (join)".
    pub(super) names: Vec<String>,
    pub(super) instances: usize,
    pub(super) ordered: bool,
    pub(super) repeat: usize,
    pub(super) next: Next,
    /// Which count says how many buffers reach the group: 0, the stream's;
    /// else a route fork's branch's.
    pub(super) scope: usize,
    pub(super) extra: Option<Extra<B>>,
    /// A gather's merge group (not a stage of the report).
    pub(super) merge: bool,
    /// The fork after it, or the broadcast whose merge it runs.
    pub(super) fork: Option<usize>,
    /// A source group (its pipeline's first; its input is the free stack).
    pub(super) source: bool,
    /// The pipeline it belongs to (a shared stage: the first that passes
    /// it), for messages.
    pub(super) pipe: usize,
    /// A shared stage: its description (a single instance is taken from
    /// it for the run and handed back), and per pipeline its lane
    /// ([`NO_LANE`] where the pipeline does not pass it).
    pub(super) shared: Option<Arc<SharedInner<B>>>,
    pub(super) lanes: Vec<u32>,
}

/// A pipeline's way through a shared stage: what its own group there
/// would have had besides the instances and the input.
pub(super) struct Lane {
    pub(super) next: Next,
    /// Which count is its total (its pipeline's stream scope).
    pub(super) scope: usize,
    /// Replicated and ordered: the pipeline's buffers leave through a
    /// reorder ring of the lane's own (its region in the id array, set by
    /// the run).
    pub(super) ordered: bool,
}

/// A successor not yet known (every one is set before the run).
const UNSET: Next = Next::Free(usize::MAX);

/// No lane: the pipeline does not pass the shared stage.
pub(super) const NO_LANE: u32 = u32::MAX;

/// A pipeline of the run: its source group, its ids.
pub(super) struct PipeIds {
    pub(super) source: usize,
    /// Its first id: its buffers, then its notices (its roots), then its
    /// broadcasts' copies.
    pub(super) base: u32,
    pub(super) buffers: usize,
    /// Buffers plus notices: the run is over for it when all of them are
    /// back in its free stack.
    pub(super) roots: usize,
}

/// The flattened pipelines and their id space: per pipeline, in order, a
/// block of ids: its buffers, then every route fork's notices (together
/// its *roots*), then every broadcast's copies.
pub(super) struct Graph<B> {
    pub(super) groups: Vec<Flat<B>>,
    pub(super) forks: Vec<ForkRt>,
    pub(super) lanes: Vec<Lane>,
    pub(super) pipes: Vec<PipeIds>,
    /// Every pipeline's roots: every ring is this wide.
    pub(super) width: usize,
    /// Every id's root, as an ordinal among its pipeline's roots (itself
    /// for roots; a copy's original's).
    pub(super) roots: Vec<u32>,
    /// Every id's pipeline.
    pub(super) pipe_of: Vec<u32>,
    /// Fork nesting levels: the position slots per id.
    pub(super) depths: usize,
    /// The groups but the sources from upstream to downstream across the
    /// pipelines (the scan order of "downstream first").
    pub(super) order: Vec<usize>,
}

/// Where the next group's `next` or a fork's `after` is written.
#[derive(Clone, Copy)]
enum Pending {
    Group(usize),
    After(usize),
    Lane(usize),
}

struct Flattener<B> {
    groups: Vec<Flat<B>>,
    forks: Vec<ForkRt>,
    lanes: Vec<Lane>,
    /// Scopes handed out so far (each pipeline's stream has one).
    scopes: usize,
    /// The pipeline being flattened, its notices so far, and per broadcast
    /// of it (fork, copies per root).
    pipe: usize,
    pipes: usize,
    notices: usize,
    broadcasts: Vec<(usize, usize)>,
    depths: usize,
    /// Each shared stage's group, by its description's address.
    shared: HashMap<*const (), usize>,
    /// The groups each pipeline passes, upstream first.
    visits: Vec<usize>,
}

impl<B> Flattener<B> {
    fn set(&mut self, p: Pending, next: Next) {
        match p {
            Pending::Group(g) => self.groups[g].next = next,
            Pending::After(f) => self.forks[f].after = next,
            Pending::Lane(l) => self.lanes[l].next = next,
        }
    }

    fn push(&mut self, f: Flat<B>) -> usize {
        self.groups.push(f);
        self.visits.push(self.groups.len() - 1);
        self.groups.len() - 1
    }

    /// Pipeline `self.pipe`'s lane through shared stage `sh` (its group
    /// made at the first pipeline that passes it); returns the group and
    /// the lane.
    fn shared(&mut self, sh: &Arc<SharedInner<B>>, scope: usize) -> (usize, usize) {
        let key = Arc::as_ptr(sh) as *const ();
        let g = match self.shared.get(&key) {
            Some(&g) => {
                self.visits.push(g);
                g
            }
            None => {
                let stages = sh.make.iter().map(|m| StageSpec {
                    name: sh.name.clone(),
                    make: m.clone(),
                    single: false,
                });
                let g = self.push(Flat {
                    stages: stages.collect(),
                    names: vec![sh.name.clone()],
                    instances: sh.replicas,
                    ordered: false, // per lane
                    repeat: 1,
                    next: Next::Lanes,
                    scope: usize::MAX, // no total: each lane has its own
                    extra: None,
                    merge: false,
                    fork: None,
                    source: false,
                    pipe: self.pipe,
                    shared: Some(sh.clone()),
                    lanes: vec![NO_LANE; self.pipes],
                });
                self.shared.insert(key, g);
                g
            }
        };
        let l = self.lanes.len();
        self.lanes.push(Lane {
            next: UNSET,
            scope,
            ordered: sh.replicas > 1 && sh.order == Order::Ordered,
        });
        self.groups[g].lanes[self.pipe] = l as u32;
        (g, l)
    }

    /// Flatten a chain in scope `scope` at fork depth `depth`; its last
    /// group goes on to `after`. Returns its first group.
    fn chain(
        &mut self,
        groups: Vec<GroupSpec<B>>,
        mut names0: Vec<String>,
        scope: usize,
        depth: usize,
        after: Next,
    ) -> usize {
        let mut first = None;
        let mut pending: Option<Pending> = None;
        for g in groups {
            if let Some(sh) = &g.shared {
                // Validated: not the first group, not in a branch, no fork.
                let (idx, lane) = self.shared(&sh.inner, scope);
                first.get_or_insert(idx);
                if let Some(p) = pending.take() {
                    self.set(p, Next::Group(idx));
                }
                pending = Some(Pending::Lane(lane));
                continue;
            }
            let mut names = std::mem::take(&mut names0);
            names.extend(g.stages.iter().map(|s| s.name.clone()));
            let instances = match g.replicas {
                Replicas::Fixed(n) => n,
                Replicas::Sized { .. } => unreachable!("refused by build()"),
            };
            let idx = self.push(Flat {
                stages: g.stages,
                names,
                instances,
                ordered: instances > 1 && g.order == Order::Ordered,
                repeat: g.repeat.max(1),
                next: UNSET,
                scope,
                extra: None,
                merge: false,
                fork: None,
                source: starts_main_chain(&first, depth),
                pipe: self.pipe,
                shared: None,
                lanes: Vec::new(),
            });
            first.get_or_insert(idx);
            if let Some(p) = pending.take() {
                self.set(p, Next::Group(idx));
            }
            let Some(fork) = g.fork else {
                pending = Some(Pending::Group(idx));
                continue;
            };
            let f = self.forks.len();
            let n = fork.branches.len();
            self.depths = self.depths.max(depth + 1);
            self.groups[idx].next = Next::Fork(f);
            self.groups[idx].fork = Some(f);
            let route = matches!(fork.spread, Spread::Route(_));
            let scopes = if route {
                self.scopes += n;
                self.scopes - n
            } else {
                0
            };
            self.forks.push(ForkRt {
                depth,
                branches: Vec::with_capacity(n),
                after: UNSET,
                kind: ForkKind::Route {
                    ordered: fork.order == Order::Ordered,
                    notices: 0,
                },
                scopes,
                region: 0,
            });
            let merge_fn = match fork.spread {
                Spread::Route(r) => {
                    self.groups[idx].extra = Some(Extra::Route(r));
                    self.forks[f].kind = ForkKind::Route {
                        ordered: fork.order == Order::Ordered,
                        notices: self.notices as u32, // an offset from the buffers, for now
                    };
                    self.notices += n - 1;
                    None
                }
                Spread::Broadcast { copy, merge } => {
                    self.groups[idx].extra = Some(Extra::Copy(copy));
                    self.broadcasts.push((f, n - 1));
                    Some(merge)
                }
            };
            for (b, br) in fork.branches.into_iter().enumerate() {
                let (sc, end) = if route {
                    (scopes + b, Next::Join(f))
                } else {
                    (scope, Next::Gather(f, b))
                };
                let start = self.chain(br.groups, Vec::new(), sc, depth + 1, end);
                self.forks[f].branches.push(start);
            }
            pending = Some(match merge_fn {
                Some(m) => {
                    let name = format!("{} (join)", self.groups[idx].names.join("+"));
                    let mg = self.push(Flat {
                        stages: Vec::new(),
                        names: vec![name],
                        instances: 1,
                        ordered: false,
                        repeat: 1,
                        next: UNSET,
                        scope,
                        extra: Some(Extra::Merge(m)),
                        merge: true,
                        fork: Some(f),
                        source: false,
                        pipe: self.pipe,
                        shared: None,
                        lanes: Vec::new(),
                    });
                    self.forks[f].kind = ForkKind::Broadcast {
                        copies: 0,
                        merge: mg,
                    };
                    Pending::Group(mg)
                }
                None => Pending::After(f),
            });
        }
        if let Some(p) = pending {
            self.set(p, after);
        }
        first.expect("a chain has a group (validated)")
    }
}

/// Whether the group about to be made is its pipeline's source group:
/// the first of the main chain.
fn starts_main_chain(first: &Option<usize>, depth: usize) -> bool {
    first.is_none() && depth == 0
}

/// Flatten checked pooled pipelines (their groups and sources are taken out
/// of `specs`); each source's name heads its group's names. Returns the
/// graph and the sources, by pipeline.
#[allow(clippy::type_complexity)]
pub(super) fn flatten<B>(
    specs: &mut [Builder<B>],
) -> (Graph<B>, Vec<Box<dyn crate::stage::Source<B>>>) {
    let mut fl = Flattener {
        groups: Vec::new(),
        forks: Vec::new(),
        lanes: Vec::new(),
        scopes: 0,
        pipe: 0,
        pipes: specs.len(),
        notices: 0,
        broadcasts: Vec::new(),
        depths: 0,
        shared: HashMap::new(),
        visits: Vec::new(),
    };
    let mut pipes = Vec::with_capacity(specs.len());
    let mut sources = Vec::with_capacity(specs.len());
    let mut roots: Vec<u32> = Vec::new();
    let mut pipe_of: Vec<u32> = Vec::new();
    let mut visits = Vec::with_capacity(specs.len());
    for (p, spec) in specs.iter_mut().enumerate() {
        let (buffers, _) = spec.buffers.as_ref().expect("validated");
        let buffers = *buffers;
        let (src_name, source) = spec.source.take().expect("validated");
        sources.push(source);
        fl.pipe = p;
        fl.notices = 0;
        fl.broadcasts.clear();
        let forks0 = fl.forks.len();
        let scope = fl.scopes;
        fl.scopes += 1;
        let groups = std::mem::take(&mut spec.groups);
        // The chain's first group is the source's.
        let free = Next::Free(fl.groups.len());
        let first = fl.chain(groups, vec![src_name], scope, 0, free);
        visits.push(std::mem::take(&mut fl.visits));
        let base = roots.len() as u32; // validated: the ids fit a u32
        let width = buffers + fl.notices;
        roots.extend(0..width as u32);
        for f in &mut fl.forks[forks0..] {
            if let ForkKind::Route { ordered, notices } = f.kind {
                f.kind = ForkKind::Route {
                    ordered,
                    notices: notices + base + buffers as u32,
                };
            }
        }
        for &(f, per) in &fl.broadcasts {
            let copies = roots.len() as u32;
            for r in 0..width as u32 {
                roots.extend(std::iter::repeat_n(r, per));
            }
            if let ForkKind::Broadcast { merge, .. } = fl.forks[f].kind {
                fl.forks[f].kind = ForkKind::Broadcast { copies, merge };
            }
        }
        pipe_of.resize(roots.len(), p as u32);
        pipes.push(PipeIds {
            source: first,
            base,
            buffers,
            roots: width,
        });
    }
    let order = scan_order(&fl.groups, &visits);
    let graph = Graph {
        groups: fl.groups,
        forks: fl.forks,
        lanes: fl.lanes,
        width: pipes.iter().map(|p| p.roots).sum(),
        pipes,
        roots,
        pipe_of,
        depths: fl.depths,
        order,
    };
    (graph, sources)
}

/// The groups but the sources, upstream first across pipelines: by their
/// distance from their pipeline's last group, farthest first (a shared
/// stage: its largest), so that scanning backwards takes every pipeline's
/// downstream groups before any pipeline's upstream ones. One pipeline's
/// order is the groups' own.
fn scan_order<B>(groups: &[Flat<B>], visits: &[Vec<usize>]) -> Vec<usize> {
    let mut from_end = vec![0usize; groups.len()];
    for v in visits {
        for (i, &g) in v.iter().enumerate() {
            from_end[g] = from_end[g].max(v.len() - 1 - i);
        }
    }
    let mut order: Vec<usize> = (0..groups.len()).filter(|&g| !groups[g].source).collect();
    order.sort_by_key(|&g| std::cmp::Reverse(from_end[g]));
    order
}
