//! Whole-graph measurements: topological depth, the batch lower bound of ED-Batch
//! appendix A.3, and the per-type summary printed by `engine inspect`.

use serde::Serialize;

use super::{Graph, NodeId, TypeId};

/// Topological depth of every node: 0 for nodes without arguments, else one more
/// than the deepest argument (TF Fold's batching key).
pub fn depths(g: &Graph) -> Vec<u32> {
    let mut depth = vec![0u32; g.len()];
    for &v in g.topo_order() {
        let d = g.args(v).iter().map(|a| depth[a.index()] + 1).max();
        depth[v.index()] = d.unwrap_or(0);
    }
    depth
}

/// Lower bound on the number of batches of any valid schedule (ED-Batch Eq. 2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LowerBound {
    /// The bound: sum of `per_type`.
    pub total: u64,
    /// Contribution of each type, indexed by type id: for a batchable type the
    /// longest chain of its nodes along any path (each needs its own batch); for a
    /// non-batchable type its node count (one batch per node).
    pub per_type: Vec<u64>,
}

/// Computes [`LowerBound`]. A same-type chain may pass through nodes of other
/// types: two type-t nodes where one depends on the other, directly or not, can
/// never share a batch. One pass over the topological order per batchable type.
pub fn lower_bound(g: &Graph) -> LowerBound {
    let types = g.types();
    let mut count = vec![0u64; types.len()];
    for &t in g.node_types() {
        count[t.index()] += 1;
    }
    let mut per_type = vec![0u64; types.len()];
    let mut chain = vec![0u32; g.len()];
    for (t, op) in types.iter() {
        if count[t.index()] == 0 {
            continue;
        }
        if !op.batchable {
            per_type[t.index()] = count[t.index()];
            continue;
        }
        per_type[t.index()] = u64::from(longest_chain(g, t, &mut chain));
    }
    LowerBound {
        total: per_type.iter().sum(),
        per_type,
    }
}

fn longest_chain(g: &Graph, t: TypeId, chain: &mut [u32]) -> u32 {
    let mut best = 0;
    for &v in g.topo_order() {
        let inherited = g
            .args(v)
            .iter()
            .map(|a| chain[a.index()])
            .max()
            .unwrap_or(0);
        let c = inherited + u32::from(g.node_type(v) == t);
        chain[v.index()] = c;
        best = best.max(c);
    }
    best
}

/// One row of [`GraphStats::types`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TypeStats {
    /// Type id (index in the trace's `types`).
    pub id: u32,
    /// Signature name.
    pub name: String,
    /// Whether its nodes may be batched.
    pub batchable: bool,
    /// Number of nodes of this type.
    pub nodes: u64,
    /// This type's term of the lower bound.
    pub lower_bound: u64,
}

/// Summary of a graph, as printed by `engine inspect --json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GraphStats {
    /// Number of nodes.
    pub nodes: u64,
    /// Number of argument edges.
    pub edges: u64,
    /// Number of distinct instance ids (input samples).
    pub instances: u64,
    /// Number of topological levels (longest path, in nodes).
    pub depth: u64,
    /// Lower bound on the number of batches (ED-Batch A.3).
    pub lower_bound: u64,
    /// Per-type counts in type-id order.
    pub types: Vec<TypeStats>,
}

/// Computes [`GraphStats`].
pub fn stats(g: &Graph) -> GraphStats {
    let depth = depths(g).iter().max().map_or(0, |d| u64::from(*d) + 1);
    let lb = lower_bound(g);
    let mut count = vec![0u64; g.types().len()];
    for v in g.nodes() {
        count[g.node_type(v).index()] += 1;
    }
    let types = g
        .types()
        .iter()
        .map(|(t, op)| TypeStats {
            id: t.0,
            name: op.name.clone(),
            batchable: op.batchable,
            nodes: count[t.index()],
            lower_bound: lb.per_type[t.index()],
        })
        .collect();
    GraphStats {
        nodes: g.len() as u64,
        edges: g.num_edges() as u64,
        instances: g.num_instances() as u64,
        depth,
        lower_bound: lb.total,
        types,
    }
}

/// Node ids of type `t`, in id order (handy for tests and tools).
pub fn nodes_of_type(g: &Graph, t: TypeId) -> Vec<NodeId> {
    g.nodes().filter(|&v| g.node_type(v) == t).collect()
}
