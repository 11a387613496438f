//! BROADCASTCONSTRAINT (ED-Batch Algorithm 2 lines 1–23, Algorithm 3).
//!
//! After construction every operand of a batch is consecutive, but their
//! subtrees can differ in shape: B2's source `x3 x4 x5` sits under
//! `[.. x3 {x4 x5}]` while its result `x8 x6 x7` is a flat `{x6 x7 x8}`, so
//! nothing ties `x6 x7` together the way `x4 x5` are. This pass reads each
//! operand's subtree as consecutive constraints (a P-node's leaves; each
//! adjacent pair of a Q-node's children), translates them to op positions,
//! and applies every position set to every operand of the batch. A batch
//! whose broadcast constraints fail is dropped (its constraints from this
//! pass are rolled back). Whenever the tree changes, every live batch is
//! queued again, until a full sweep changes nothing.

use std::collections::{BTreeSet, VecDeque};

use super::snapshot::{SKind, Snap};
use crate::pqtree::PqTree;

/// Marker for "not in this operand" in the variable → position scratch map.
const NO_INDEX: u32 = u32::MAX;

/// Outcome of the pass.
pub(crate) struct BroadcastStats {
    /// Batches processed (queue pops).
    pub steps: usize,
    /// Batches dropped because a broadcast constraint failed, in order.
    pub dropped: Vec<usize>,
}

/// Runs the pass; `alive[b]` is cleared for every batch it drops.
pub(crate) fn broadcast(
    tree: &mut PqTree,
    operands: &[Vec<Vec<usize>>],
    alive: &mut [bool],
) -> BroadcastStats {
    let n = tree.num_leaves();
    let mut idx = vec![NO_INDEX; n];
    let mut snap = Snap::new(tree);
    let mut canon = tree.canonical_string();
    let mut queue: VecDeque<usize> = (0..operands.len()).filter(|&b| alive[b]).collect();
    let mut queued = alive.to_vec();
    // Each change strictly shrinks the set of allowed frontiers and there are
    // at most O(n) such changes (each adds a node or turns a P into a Q), and
    // between changes each batch is popped at most once; the cap is a guard.
    let cap = (n + 2).saturating_mul(operands.len() + 1);
    let mut stats = BroadcastStats {
        steps: 0,
        dropped: Vec::new(),
    };
    while let Some(b) = queue.pop_front() {
        queued[b] = false;
        if !alive[b] || stats.steps >= cap {
            continue;
        }
        stats.steps += 1;
        let Some(cons) = uniform_constraints(&snap, &operands[b], &mut idx) else {
            continue;
        };
        if cons.is_empty() {
            continue;
        }
        let before = tree.clone();
        let ok = operands[b].iter().all(|o| {
            cons.iter().all(|c| {
                let set: Vec<usize> = c.iter().map(|&i| o[i as usize]).collect();
                tree.reduce(&set).is_ok()
            })
        });
        if !ok {
            *tree = before;
            alive[b] = false;
            stats.dropped.push(b);
            continue;
        }
        let now = tree.canonical_string();
        if now != canon {
            canon = now;
            snap = Snap::new(tree);
            for (c, q) in queued.iter_mut().enumerate() {
                if alive[c] && !*q {
                    *q = true;
                    queue.push_back(c);
                }
            }
        }
    }
    stats
}

/// The position sets implied by the subtrees of all operands of one batch
/// (ParseConstraints / GetSubtreeCons), without the trivial ones (fewer than
/// two positions, or all `k`). `None` if an operand is not consecutive.
fn uniform_constraints(
    snap: &Snap,
    operands: &[Vec<usize>],
    idx: &mut [u32],
) -> Option<BTreeSet<Vec<u32>>> {
    let mut out = BTreeSet::new();
    for o in operands {
        let region = snap.region(o)?;
        for (i, &v) in o.iter().enumerate() {
            idx[v] = i as u32;
        }
        let mut spans = Vec::new();
        let kids = snap.region_children(region);
        if snap.kind[region.node as usize] == SKind::Q {
            spans.extend(kids.windows(2).map(|w| pair_span(snap, w[0], w[1])));
        }
        let mut stack: Vec<u32> = kids.to_vec();
        while let Some(x) = stack.pop() {
            let ch = &snap.children[x as usize];
            match snap.kind[x as usize] {
                SKind::Leaf(_) => {}
                SKind::P => spans.push(snap.span[x as usize]),
                SKind::Q => spans.extend(ch.windows(2).map(|w| pair_span(snap, w[0], w[1]))),
            }
            stack.extend_from_slice(ch);
        }
        for (s, e) in spans {
            let len = (e - s) as usize;
            if len < 2 || len >= o.len() {
                continue;
            }
            let mut set: Vec<u32> = snap.frontier[s as usize..e as usize]
                .iter()
                .map(|&v| idx[v])
                .collect();
            set.sort_unstable();
            out.insert(set);
        }
        for &v in o {
            idx[v] = NO_INDEX;
        }
    }
    Some(out)
}

/// Span covering two adjacent siblings.
fn pair_span(snap: &Snap, a: u32, b: u32) -> (u32, u32) {
    (snap.span[a as usize].0, snap.span[b as usize].1)
}
