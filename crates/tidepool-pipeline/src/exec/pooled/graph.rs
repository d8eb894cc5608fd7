//! A pipeline's groups, forks and joins flattened into one list of task
//! kinds with fixed successors, and where every buffer id lives (see the
//! parent module's doc, "Forks and joins").

use crate::builder::{
    Builder, CopyFn, GroupSpec, MergeFn, Order, Replicas, Route, Spread, StageSpec,
};

/// Where a group's finished buffers go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// The input ring of this group.
    Group(usize),
    /// Back to the free stack (after the pipeline's last group).
    Free,
    /// Through this fork into its branches.
    Fork(usize),
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
    /// The names in messages: the source's first in group 0, a merge
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
}

/// The flattened pipeline and its id space: ids `0..buffers` are the
/// pipeline's buffers, then every route fork's notices (together the
/// *roots*, `width` of them), then every broadcast's copies.
pub(super) struct Graph<B> {
    pub(super) groups: Vec<Flat<B>>,
    pub(super) forks: Vec<ForkRt>,
    /// Roots: buffers plus notices; every ring is this wide.
    pub(super) width: usize,
    /// Every id's root (itself for roots; a copy's original's root).
    pub(super) roots: Vec<u32>,
    /// Fork nesting levels: the position slots per id.
    pub(super) depths: usize,
}

/// Where the next group's `next` or a fork's `after` is written.
#[derive(Clone, Copy)]
enum Pending {
    Group(usize),
    After(usize),
}

struct Flattener<B> {
    groups: Vec<Flat<B>>,
    forks: Vec<ForkRt>,
    /// Forks in order with their spread, and what their ids need.
    scopes: usize,
    notices: usize,
    /// Per broadcast: (fork, copies per root).
    broadcasts: Vec<(usize, usize)>,
    depths: usize,
}

impl<B> Flattener<B> {
    fn set(&mut self, p: Pending, next: Next) {
        match p {
            Pending::Group(g) => self.groups[g].next = next,
            Pending::After(f) => self.forks[f].after = next,
        }
    }

    fn push(&mut self, f: Flat<B>) -> usize {
        self.groups.push(f);
        self.groups.len() - 1
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
                next: Next::Free,
                scope,
                extra: None,
                merge: false,
                fork: None,
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
                after: Next::Free,
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
                        next: Next::Free,
                        scope,
                        extra: Some(Extra::Merge(m)),
                        merge: true,
                        fork: Some(f),
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

/// Flatten a checked pooled pipeline of `buffers` buffers (its groups are
/// taken out of `spec`); the source's name heads group 0's names.
pub(super) fn flatten<B>(spec: &mut Builder<B>, source: String, buffers: usize) -> Graph<B> {
    let mut fl = Flattener {
        groups: Vec::new(),
        forks: Vec::new(),
        scopes: 1,
        notices: 0,
        broadcasts: Vec::new(),
        depths: 0,
    };
    let groups = std::mem::take(&mut spec.groups);
    fl.chain(groups, vec![source], 0, 0, Next::Free);
    let width = buffers + fl.notices;
    let mut roots: Vec<u32> = (0..width as u32).collect();
    for f in &mut fl.forks {
        if let ForkKind::Route { ordered, notices } = f.kind {
            f.kind = ForkKind::Route {
                ordered,
                notices: notices + buffers as u32,
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
    Graph {
        groups: fl.groups,
        forks: fl.forks,
        width,
        roots,
        depths: fl.depths,
    }
}
