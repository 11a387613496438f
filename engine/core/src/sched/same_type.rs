//! The same-type dependency DAG: for each type t, the transitive reduction of
//! "u is an ancestor of v" over the type-t nodes. Its edges u → v are the
//! type-t pairs with no type-t node w such that u → w → v; ED-Batch's G^t is
//! the transitive closure of it. v is on Frontier(G^t) exactly when all of its
//! predecessors here have run: every type-t ancestor of v is an ancestor of one
//! of them, and a node runs only after all of its ancestors. Precomputed once
//! per graph so that a frontier step updates |Frontier(G^t)| in O(same-type
//! out-edges).
//!
//! Why the reduction and not the nearest same-type ancestors (no type-t node on
//! *some* path between): on a lattice, every word cell is a nearest word-type
//! ancestor of every later word of its sentence (through the character chain),
//! so the nearest-ancestor DAG is quadratic per sentence and its construction
//! cost about as much as a small replay; the reduction keeps only the words
//! that start before the next word ends (ED-Batch §2; docs/replay.md).
//!
//! It also holds h(v), the number of nodes on the longest same-type chain
//! starting at v: a longest chain never takes a shortcut edge, so one reverse
//! topological pass over the reduction gives it
//! ([`RemainingBound`](super::RemainingBound) reads it).

use std::ops::Range;

use crate::graph::{Graph, NodeId};

/// One node range's searches: the end offset of each node's successor list
/// (relative to the range's first) and the lists.
type Part = (Vec<u32>, Vec<NodeId>);

/// Runs a part-index callback once for every part (see
/// [`SameTypeDag::with_parts`]).
type PartRunner<'a> = dyn Fn(&(dyn Fn(usize) + Sync)) + 'a;

/// Same-type successors (the reduction's edges) in CSR form, plus the initial
/// in-degrees.
#[derive(Clone, Debug)]
pub struct SameTypeDag {
    succ_start: Vec<u32>,
    succ: Vec<NodeId>,
    in_degree: Vec<u32>,
    height: Vec<u32>,
    max_height: Vec<u32>,
}

impl SameTypeDag {
    /// Builds the DAG by a forward search from every node `u` of type t that
    /// visits nodes in topological order and keeps the type-t nodes it meets
    /// that no earlier-met type-t node reaches (see `search_range`). A search
    /// never enters a node from which t cannot be reached (each node's set of
    /// descendant types is computed first, in one reverse topological sweep):
    /// without that pruning a node whose type never recurs below it — an
    /// embedding lookup, a source — searched everything downstream.
    ///
    /// The searches run on rayon's current pool; see [`sequential`](Self::sequential).
    pub fn new(g: &Graph) -> Self {
        use rayon::prelude::*;
        let chunk = g.len().div_ceil(4 * rayon::current_num_threads()).max(1024);
        let parts = g.len().div_ceil(chunk).max(1);
        Self::with_parts(g, parts, &|part| {
            (0..parts).into_par_iter().for_each(part);
        })
    }

    /// [`new`](Self::new) on the calling thread alone: for a one-thread
    /// replay, where handing the work to a pool thread and waiting for it costs
    /// about 0.1 ms per run (two context switches), more than a small graph's
    /// searches.
    pub fn sequential(g: &Graph) -> Self {
        Self::with_parts(g, 1, &|part| part(0))
    }

    /// [`new`](Self::new) with the searches split into `parts ≥ 1` node
    /// ranges (near-equal, in id order; some may be empty) that `run_parts`
    /// runs: it must call its argument once with every part index in
    /// `0..parts`, on any threads, in any order. The searches are independent
    /// (each part has its own visit stamps) and the parts are concatenated in
    /// id order, so the result does not depend on `parts`. The CPU replay
    /// runs the parts on its own worker team, where handing work over costs
    /// about a microsecond (waking a rayon pool costs ~0.1 ms, more than a
    /// small graph's searches).
    pub fn with_parts(g: &Graph, parts: usize, run_parts: &PartRunner<'_>) -> Self {
        assert!(parts >= 1, "at least one part");
        let n = g.len();
        let order = TopoPos::new(g);
        let below = DescendantTypes::new(g, &order);
        let slots: Vec<std::sync::Mutex<Option<Part>>> =
            (0..parts).map(|_| std::sync::Mutex::new(None)).collect();
        run_parts(&|i| {
            let part = search_range(g, &below, &order, n * i / parts..n * (i + 1) / parts);
            *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(part);
        });
        let parts: Vec<Part> = slots
            .into_iter()
            .map(|s| {
                s.into_inner()
                    .unwrap_or_else(|e| e.into_inner())
                    .expect("run_parts ran every part")
            })
            .collect();
        let mut succ_start = Vec::with_capacity(n + 1);
        let mut succ: Vec<NodeId> = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
        succ_start.push(0);
        for (ends, s) in parts {
            let base = succ.len() as u32;
            succ_start.extend(ends.iter().map(|e| base + e));
            succ.extend(s);
        }
        let mut in_degree = vec![0u32; n];
        for w in &succ {
            in_degree[w.index()] += 1;
        }
        let mut dag = SameTypeDag {
            succ_start,
            succ,
            in_degree,
            height: vec![1; n],
            max_height: Vec::new(),
        };
        // Heights and, in the same sweep, each type's largest.
        let mut max_height = vec![0u32; g.types().len()];
        for v in order.reverse(g) {
            let h = dag
                .successors(v)
                .iter()
                .map(|w| dag.height[w.index()] + 1)
                .max()
                .unwrap_or(1);
            dag.height[v.index()] = h;
            let m = &mut max_height[g.node_type(v).index()];
            *m = (*m).max(h);
        }
        dag.max_height = max_height;
        dag
    }

    /// A DAG without edges, for policies that never read |Frontier(G^t)|
    /// ([`BatchPolicy::needs_sub_frontier`](super::BatchPolicy::needs_sub_frontier)
    /// is false): with it a [`Frontier`](super::Frontier)'s `sub_frontier` counts
    /// every unexecuted node of the type, which such policies ignore. The exact DAG
    /// can be dense on op-level graphs (millions of edges), so skipping it
    /// matters there.
    pub fn without_edges(g: &Graph) -> Self {
        let height = vec![1; g.len()];
        SameTypeDag {
            succ_start: vec![0; g.len() + 1],
            succ: Vec::new(),
            in_degree: vec![0; g.len()],
            max_height: max_heights(g, &height),
            height,
        }
    }

    /// The DAG `policy` needs: exact if it reads |Frontier(G^t)|, else empty.
    pub fn for_policy(g: &Graph, policy: &dyn super::BatchPolicy) -> Self {
        if policy.needs_sub_frontier() {
            Self::new(g)
        } else {
            Self::without_edges(g)
        }
    }

    /// Same-type successors of `v` (the type-t nodes it reaches with no other
    /// type-t node between them on any path), in id order.
    #[inline]
    pub fn successors(&self, v: NodeId) -> &[NodeId] {
        let i = v.index();
        &self.succ[self.succ_start[i] as usize..self.succ_start[i + 1] as usize]
    }

    /// Number of same-type predecessors (in the reduction) of every node.
    pub fn in_degrees(&self) -> &[u32] {
        &self.in_degree
    }

    /// h(v): nodes on the longest same-type chain starting at `v` (1 for
    /// every node of a DAG made [`without_edges`](Self::without_edges)).
    #[inline]
    pub fn height(&self, v: NodeId) -> u32 {
        self.height[v.index()]
    }

    /// Per type id, the largest h of its nodes (0 for a type without nodes).
    pub fn max_heights(&self) -> &[u32] {
        &self.max_height
    }

    /// Number of edges (for reports).
    pub fn num_edges(&self) -> usize {
        self.succ.len()
    }
}

fn max_heights(g: &Graph, height: &[u32]) -> Vec<u32> {
    let mut m = vec![0u32; g.types().len()];
    for v in g.nodes() {
        let t = g.node_type(v).index();
        m[t] = m[t].max(height[v.index()]);
    }
    m
}

/// Same-type successors of the nodes in `range`: the end offset of each
/// node's list (relative to the range's first) and the lists, sorted.
///
/// From `u` of type t, the search pops nodes in topological order (`pos`), so
/// a node is popped only after every searched node that reaches it. A type-t
/// node popped *live* is a successor; it and everything below it are marked
/// *blocked* (a type-t node below it is not minimal), blocked nodes pass the
/// mark on when popped, and live non-t nodes extend the search. The search
/// stops once no live node is queued: from there only blocked nodes follow.
/// Cost: the nodes between `u` and its successors, not everything below `u`.
fn search_range(g: &Graph, below: &DescendantTypes, order: &TopoPos, range: Range<usize>) -> Part {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // Visit stamps (the search's start) avoid clearing per search.
    let mut seen = vec![u32::MAX; g.len()];
    let mut blocked = vec![u32::MAX; g.len()];
    // Queue entries are `pos << 32 | id` in one u64: a (u32, u32) pair is
    // written as two halves and read back whole by the heap's sift, which
    // stalls store forwarding (perf: half of the search's time).
    let mut heap: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
    let key = |x: NodeId| Reverse(u64::from(order.pos(x)) << 32 | u64::from(x.0));
    let mut ends = Vec::with_capacity(range.len());
    let mut succ = Vec::new();
    for i in range {
        let u = NodeId(i as u32);
        let t = g.node_type(u);
        let first = succ.len();
        heap.clear();
        // Queued nodes not blocked.
        let mut live = 0usize;
        // Only type-t nodes and nodes above one matter: any other node can
        // neither be a successor nor block one. Queued live, such a node
        // (a loss below a chain cell, numbered after the whole chain) kept
        // the search going through everything numbered before it.
        let relevant = |x: NodeId| g.node_type(x) == t || below.reaches(x, t.index());
        if below.reaches(u, t.index()) {
            for &w in g.users(u) {
                if !relevant(w) {
                    continue;
                }
                if seen[w.index()] != u.0 {
                    seen[w.index()] = u.0;
                    heap.push(key(w));
                    live += 1;
                }
            }
        }
        while live > 0 {
            let Some(Reverse(k)) = heap.pop() else {
                break;
            };
            let w = NodeId(k as u32);
            let is_blocked = blocked[w.index()] == u.0;
            if !is_blocked {
                live -= 1;
            }
            let found = !is_blocked && g.node_type(w) == t;
            if found {
                succ.push(w);
            }
            if !below.reaches(w, t.index()) {
                continue;
            }
            for &x in g.users(w) {
                if !relevant(x) {
                    continue;
                }
                let xi = x.index();
                if is_blocked || found {
                    if blocked[xi] == u.0 {
                        continue;
                    }
                    blocked[xi] = u.0;
                    if seen[xi] == u.0 {
                        // Queued live (it cannot have been popped: it comes
                        // after `w`), now blocked.
                        live -= 1;
                    } else {
                        seen[xi] = u.0;
                        heap.push(key(x));
                    }
                } else if seen[xi] != u.0 {
                    seen[xi] = u.0;
                    heap.push(key(x));
                    live += 1;
                }
            }
        }
        // Sorted successor lists keep every later walk deterministic.
        succ[first..].sort_unstable();
        ends.push(succ.len() as u32);
    }
    (ends, succ)
}

/// Topological positions. Recorded traces number nodes after their arguments,
/// so ids are already topological there and the position is the id (no
/// table, and sweeps walk memory in order); other graphs use their
/// topological order.
struct TopoPos {
    pos: Option<Vec<u32>>,
}

impl TopoPos {
    fn new(g: &Graph) -> Self {
        TopoPos {
            pos: (!g.ids_topological()).then(|| {
                let mut pos = vec![0u32; g.len()];
                for (i, v) in g.topo_order().iter().enumerate() {
                    pos[v.index()] = i as u32;
                }
                pos
            }),
        }
    }

    #[inline]
    fn pos(&self, v: NodeId) -> u32 {
        self.pos.as_ref().map_or(v.0, |p| p[v.index()])
    }

    /// Nodes in reverse topological order (an enum, not a boxed iterator:
    /// the sweeps call `next` once per node).
    fn reverse<'g>(&self, g: &'g Graph) -> Reverse<'g> {
        match self.pos {
            None => Reverse::Ids((0..g.len() as u32).rev()),
            Some(_) => Reverse::Topo(g.topo_order().iter().rev()),
        }
    }
}

/// [`TopoPos::reverse`]'s iterator.
enum Reverse<'g> {
    Ids(std::iter::Rev<Range<u32>>),
    Topo(std::iter::Rev<std::slice::Iter<'g, NodeId>>),
}

impl Iterator for Reverse<'_> {
    type Item = NodeId;

    #[inline]
    fn next(&mut self) -> Option<NodeId> {
        match self {
            Reverse::Ids(r) => r.next().map(NodeId),
            Reverse::Topo(t) => t.next().copied(),
        }
    }
}

/// Per node, the set of types among its strict descendants (a bitset of
/// `words` u64 per node).
struct DescendantTypes {
    words: usize,
    bits: Vec<u64>,
}

impl DescendantTypes {
    fn new(g: &Graph, order: &TopoPos) -> Self {
        let words = g.types().len().div_ceil(64).max(1);
        let mut bits = vec![0u64; g.len() * words];
        if words == 1 {
            // Up to 64 types (every built-in workload): one word per node.
            for v in order.reverse(g) {
                let below = g.users(v).iter().fold(0u64, |b, &w| {
                    b | 1 << g.node_type(w).index() | bits[w.index()]
                });
                bits[v.index()] = below;
            }
            return DescendantTypes { words, bits };
        }
        for v in order.reverse(g) {
            let vi = v.index() * words;
            for &w in g.users(v) {
                let t = g.node_type(w).index();
                let wi = w.index() * words;
                bits[vi + t / 64] |= 1 << (t % 64);
                for k in 0..words {
                    bits[vi + k] |= bits[wi + k];
                }
            }
        }
        DescendantTypes { words, bits }
    }

    /// Is a node of type `t` below `v` (strictly)?
    fn reaches(&self, v: NodeId, t: usize) -> bool {
        self.bits[v.index() * self.words + t / 64] & (1 << (t % 64)) != 0
    }
}
