//! The same-type dependency DAG: for each node v of type t, its *nearest* type-t
//! ancestors (type-t nodes u with a path u → v on which no other type-t node
//! lies). ED-Batch's G^t keeps only type-t nodes; v is on Frontier(G^t) exactly
//! when all of its nearest type-t ancestors have run (a farther unexecuted one
//! would keep a nearer one unexecuted too). Precomputed once per graph so that
//! a frontier step updates |Frontier(G^t)| in O(same-type out-edges).
//!
//! It also holds h(v), the number of nodes on the longest same-type chain
//! starting at v: a longest chain only steps to *nearest* same-type
//! successors, so one reverse topological pass over this DAG gives it
//! ([`RemainingBound`](super::RemainingBound) reads it).

use crate::graph::{Graph, NodeId};

/// Nearest same-type successors in CSR form, plus the initial in-degrees.
#[derive(Clone, Debug)]
pub struct SameTypeDag {
    succ_start: Vec<u32>,
    succ: Vec<NodeId>,
    in_degree: Vec<u32>,
    height: Vec<u32>,
    max_height: Vec<u32>,
}

impl SameTypeDag {
    /// Builds the DAG by a forward search from every node that stops at nodes of
    /// the start's type, and never enters a node from which the start's type
    /// cannot be reached (each node's set of descendant types is computed
    /// first, in one reverse topological sweep). Without that pruning a node
    /// whose type never recurs below it — an embedding lookup, a source —
    /// searched everything downstream, quadratic on long chains and lattices.
    pub fn new(g: &Graph) -> Self {
        use rayon::prelude::*;
        let n = g.len();
        let below = DescendantTypes::new(g);
        // The searches are independent: nodes are split into ranges searched in
        // parallel (each with its own visit stamps), then concatenated in id
        // order, so the result does not depend on the thread count.
        let chunk = n.div_ceil(4 * rayon::current_num_threads()).max(1024);
        let parts: Vec<(Vec<u32>, Vec<NodeId>)> = (0..n)
            .step_by(chunk)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|lo| search_range(g, &below, lo..(lo + chunk).min(n)))
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
        for &v in g.topo_order().iter().rev() {
            if let Some(h) = dag
                .successors(v)
                .iter()
                .map(|w| dag.height[w.index()])
                .max()
            {
                dag.height[v.index()] = h + 1;
            }
        }
        dag.max_height = max_heights(g, &dag.height);
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

    /// Nearest same-type successors of `v`, in id order.
    #[inline]
    pub fn successors(&self, v: NodeId) -> &[NodeId] {
        let i = v.index();
        &self.succ[self.succ_start[i] as usize..self.succ_start[i + 1] as usize]
    }

    /// Number of nearest same-type ancestors of every node.
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

/// Nearest same-type successors of the nodes in `range`: the end offset of
/// each node's list (relative to the range's first) and the lists, sorted.
fn search_range(
    g: &Graph,
    below: &DescendantTypes,
    range: std::ops::Range<usize>,
) -> (Vec<u32>, Vec<NodeId>) {
    // Visit stamps avoid clearing a visited set per search.
    let mut seen = vec![u32::MAX; g.len()];
    let mut stack: Vec<NodeId> = Vec::new();
    let mut ends = Vec::with_capacity(range.len());
    let mut succ = Vec::new();
    for i in range {
        let u = NodeId(i as u32);
        let t = g.node_type(u);
        stack.clear();
        if below.reaches(u, t.index()) {
            stack.extend_from_slice(g.users(u));
        }
        let first = succ.len();
        while let Some(w) = stack.pop() {
            if seen[w.index()] == u.0 {
                continue;
            }
            seen[w.index()] = u.0;
            if g.node_type(w) == t {
                succ.push(w);
            } else if below.reaches(w, t.index()) {
                stack.extend_from_slice(g.users(w));
            }
        }
        // Sorted successor lists keep every later walk deterministic.
        succ[first..].sort_unstable();
        ends.push(succ.len() as u32);
    }
    (ends, succ)
}

/// Per node, the set of types among its strict descendants (a bitset of
/// `words` u64 per node).
struct DescendantTypes {
    words: usize,
    bits: Vec<u64>,
}

impl DescendantTypes {
    fn new(g: &Graph) -> Self {
        let words = g.types().len().div_ceil(64).max(1);
        let mut bits = vec![0u64; g.len() * words];
        for &v in g.topo_order().iter().rev() {
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
