//! Candidate paths for the supersequence bound, and their type strings.
//!
//! Every schedule runs the nodes of a path in strictly increasing batches, so
//! its batches of the types in a group S, in order, contain the path's string
//! of S-types as a subsequence; the bound needs paths whose strings are long
//! and disagree in order. Candidates come from longest-path dynamic programs
//! over the topological order, one per weighting of the types of S — each
//! type alone (the A.3 witnesses), all of S alike, and a few seeded random
//! weightings — keeping for each the best path ending in each of the `per`
//! best instances (samples), so that paths of different samples, which share
//! no node, are among the candidates.

use engine::graph::{Graph, NodeId};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Strings of candidate paths for the group `in_group` (indexed by type id);
/// letters are type ids. Deduplicated, in a fixed order.
pub(crate) fn candidates(
    g: &Graph,
    in_group: &[bool],
    random_weightings: usize,
    per: usize,
    seed: u64,
) -> Vec<Vec<u16>> {
    let types: Vec<usize> = (0..in_group.len()).filter(|&t| in_group[t]).collect();
    let mut weightings: Vec<Vec<u64>> = Vec::new();
    for &t in &types {
        let mut w = vec![0u64; in_group.len()];
        w[t] = 1;
        weightings.push(w);
    }
    weightings.push(in_group.iter().map(|&x| u64::from(x)).collect());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..random_weightings {
        weightings.push(
            in_group
                .iter()
                .map(|&x| if x { rng.random_range(1..=8u64) } else { 0 })
                .collect(),
        );
    }
    let mut out: Vec<Vec<u16>> = Vec::new();
    let mut score = vec![0u64; g.len()];
    let mut pred = vec![u32::MAX; g.len()];
    for w in &weightings {
        for &v in g.topo_order() {
            let (mut best, mut from) = (0u64, u32::MAX);
            for &a in g.args(v) {
                let s = score[a.index()];
                if from == u32::MAX || s > best || (s == best && a.0 < from) {
                    best = s;
                    from = a.0;
                }
            }
            score[v.index()] = best + w[g.node_type(v).index()];
            pred[v.index()] = from;
        }
        // Best end per instance (nodes of no instance form their own group).
        let mut ends: Vec<(u64, u32, u32)> = Vec::new(); // (score, instance, node)
        for v in g.nodes() {
            let inst = g.instance(v).unwrap_or(u32::MAX);
            let s = score[v.index()];
            match ends.iter_mut().find(|e| e.1 == inst) {
                Some(e) if s > e.0 => *e = (s, inst, v.0),
                Some(_) => {}
                None => ends.push((s, inst, v.0)),
            }
        }
        ends.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
        for &(s, _, end) in ends.iter().take(per) {
            if s == 0 {
                continue;
            }
            let mut path = Vec::new();
            let mut at = end;
            while at != u32::MAX {
                let t = g.node_type(NodeId(at));
                if in_group[t.index()] {
                    path.push(t.0 as u16);
                }
                at = pred[at as usize];
            }
            path.reverse();
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}
