//! Exact bounds on small pieces of the graph.
//!
//! Take any set U of nodes whose types lie in a group S. The batches of a
//! schedule, restricted to U, are a schedule of G[U] — U ordered by
//! reachability in G — so the schedule has at least OPT(G[U]) batches of
//! S-types. With U the S-nodes of one sample (instance), or of a few samples
//! together, G[U] is small enough for the exhaustive search of
//! [`crate::optimal`], whose deepening bound is certified even when its budget
//! runs out.

use engine::graph::{Graph, GraphBuilder, NodeId};

use crate::optimal::{NODE_LIMIT, OptimalConfig, deepening_bound};

/// G[U] for `nodes` (ids of `g`, in topological order of `g`): one node per
/// member, its arguments the nearest members it is reachable from. Types keep
/// their names and batchability.
pub(crate) fn induced(g: &Graph, nodes: &[NodeId]) -> Option<Graph> {
    let mut local = vec![u32::MAX; g.len()];
    for (i, v) in nodes.iter().enumerate() {
        local[v.index()] = i as u32;
    }
    // Nearest members below each member: forward search stopping at members.
    let mut preds: Vec<Vec<NodeId>> = vec![Vec::new(); nodes.len()];
    let mut seen = vec![u32::MAX; g.len()];
    let mut stack: Vec<NodeId> = Vec::new();
    for (i, &u) in nodes.iter().enumerate() {
        stack.clear();
        stack.extend_from_slice(g.users(u));
        while let Some(w) = stack.pop() {
            if seen[w.index()] == i as u32 {
                continue;
            }
            seen[w.index()] = i as u32;
            match local[w.index()] {
                u32::MAX => stack.extend_from_slice(g.users(w)),
                j => preds[j as usize].push(NodeId(i as u32)),
            }
        }
    }
    let mut b = GraphBuilder::new();
    let mut ty = vec![None; g.types().len()];
    for (i, &v) in nodes.iter().enumerate() {
        let t = g.node_type(v);
        let lt = match ty[t.index()] {
            Some(lt) => lt,
            None => {
                let op = g.types().op(t);
                let lt = b.types_mut().push(&op.name, op.batchable).ok()?;
                ty[t.index()] = Some(lt);
                lt
            }
        };
        preds[i].sort_unstable();
        b.add_node(lt, &preds[i], g.instance(v));
    }
    b.finish().ok()
}

/// Nodes of `g` whose type is in the group, per instance, in topological order
/// (instances in id order; nodes of no instance left out).
pub(crate) fn by_instance(g: &Graph, in_group: &[bool]) -> Vec<Vec<NodeId>> {
    let mut out: Vec<(u32, Vec<NodeId>)> = Vec::new();
    for &v in g.topo_order() {
        if !in_group[g.node_type(v).index()] {
            continue;
        }
        let Some(i) = g.instance(v) else { continue };
        match out.binary_search_by_key(&i, |x| x.0) {
            Ok(k) => out[k].1.push(v),
            Err(k) => out.insert(k, (i, vec![v])),
        }
    }
    out.into_iter().map(|x| x.1).collect()
}

/// The best exact bound over single instances and one greedy union of them
/// (filled with the instances of highest single bound, up to the search's
/// node limit). `budget`: expansions per search. Returns 0 when no piece fits.
pub(crate) fn piece_bound(
    g: &Graph,
    in_group: &[bool],
    budget: u64,
    deadline: std::time::Instant,
) -> u64 {
    let pieces = by_instance(g, in_group);
    let cfg = OptimalConfig {
        max_nodes: NODE_LIMIT,
        budget,
        lemma: true,
    };
    let exact = |nodes: &[NodeId]| -> u64 {
        induced(g, nodes)
            .and_then(|sub| deepening_bound(&sub, &cfg).ok())
            .map_or(0, |b| b.bound)
    };
    let mut singles: Vec<(u64, usize)> = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        if std::time::Instant::now() >= deadline {
            break;
        }
        if p.len() <= NODE_LIMIT {
            singles.push((exact(p), i));
        }
    }
    let mut best = singles.iter().map(|s| s.0).max().unwrap_or(0);
    singles.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut union: Vec<NodeId> = Vec::new();
    let mut parts = 0;
    for &(_, i) in &singles {
        if union.len() + pieces[i].len() <= NODE_LIMIT {
            union.extend_from_slice(&pieces[i]);
            parts += 1;
        }
    }
    if parts > 1 && std::time::Instant::now() < deadline {
        // Instances share no node; order the union topologically in g.
        let mut pos = vec![0u32; g.len()];
        for (k, v) in g.topo_order().iter().enumerate() {
            pos[v.index()] = k as u32;
        }
        union.sort_by_key(|v| pos[v.index()]);
        best = best.max(exact(&union));
    }
    best
}
