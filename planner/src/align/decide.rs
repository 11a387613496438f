//! DECIDENODESORDER and GETLEAFORDER (ED-Batch Algorithm 2 lines 24–38,
//! Algorithms 4–6).
//!
//! For each batch, the subtrees of its operands are walked in parallel from
//! their regions down: children correspond when they hold the same op
//! positions. Each corresponding pair of nodes yields an order relation
//! (same/reversed direction for Q-nodes and two-child P-nodes, a child
//! permutation for wider P-nodes) that goes into a union–find; the first
//! operand of a batch is the reference the others are related to. Pairs
//! whose shapes still differ (a broadcast left them non-isomorphic) are
//! counted as mismatches and skipped. Finally a depth-first walk emits the
//! leaves, each node's children in the order its class implies (class roots
//! keep their stored order).

use super::snapshot::{NONE, Region, SKind, Snap};
use super::unionfind::{ParityUf, PermUf};

/// How a node's order is represented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Leaf,
    Parity,
    Perm,
}

fn class(snap: &Snap, x: u32) -> Class {
    match snap.kind[x as usize] {
        SKind::Leaf(_) => Class::Leaf,
        SKind::Q => Class::Parity,
        SKind::P if snap.children[x as usize].len() == 2 => Class::Parity,
        SKind::P => Class::Perm,
    }
}

fn whole(snap: &Snap, x: u32) -> Region {
    Region {
        node: x,
        first: 0,
        last: snap.children[x as usize].len().saturating_sub(1),
    }
}

/// The order decisions for one snapshot.
pub(crate) struct Decisions {
    parity: ParityUf,
    perm: PermUf,
    /// Relations accepted by a union–find.
    pub relations: usize,
    /// Relations refused as contradicting earlier ones.
    pub conflicts: usize,
    /// Node pairs whose shapes did not correspond.
    pub mismatches: usize,
}

/// Parses and unions the order relations of every live batch.
pub(crate) fn decide(snap: &Snap, operands: &[Vec<Vec<usize>>], alive: &[bool]) -> Decisions {
    let mut d = Decisions {
        parity: ParityUf::new(snap.len()),
        perm: PermUf::new(snap.len()),
        relations: 0,
        conflicts: 0,
        mismatches: 0,
    };
    let n = snap.pos.len();
    let mut idx0 = vec![NONE; n];
    let mut idx1 = vec![NONE; n];
    for (b, ops) in operands.iter().enumerate() {
        if !alive[b] {
            continue;
        }
        let regions: Vec<(usize, Region)> = ops
            .iter()
            .enumerate()
            .filter_map(|(j, o)| snap.region(o).map(|r| (j, r)))
            .collect();
        let Some(&(j0, r0)) = regions.first() else {
            continue;
        };
        set_index(&mut idx0, &ops[j0], true);
        for &(j, r) in &regions[1..] {
            set_index(&mut idx1, &ops[j], true);
            relate(snap, &mut d, (r0, &idx0), (r, &idx1));
            set_index(&mut idx1, &ops[j], false);
        }
        set_index(&mut idx0, &ops[j0], false);
    }
    d
}

fn set_index(idx: &mut [u32], o: &[usize], on: bool) {
    for (i, &v) in o.iter().enumerate() {
        idx[v] = if on { i as u32 } else { NONE };
    }
}

/// Sorted op positions of the leaves below `x`.
fn positions(snap: &Snap, x: u32, idx: &[u32]) -> Vec<u32> {
    let (s, e) = snap.span[x as usize];
    let mut p: Vec<u32> = snap.frontier[s as usize..e as usize]
        .iter()
        .map(|&v| idx[v])
        .collect();
    p.sort_unstable();
    p
}

/// Relates region `a` (positions by `idx_a`) to region `b`, recursively.
fn relate(snap: &Snap, d: &mut Decisions, a: (Region, &[u32]), b: (Region, &[u32])) {
    let (idx_a, idx_b) = (a.1, b.1);
    let mut stack = vec![(a.0, b.0)];
    while let Some((ra, rb)) = stack.pop() {
        let (ca, cb) = (snap.region_children(ra), snap.region_children(rb));
        if ca.len() != cb.len() {
            d.mismatches += 1;
            continue;
        }
        // Children partition the region's positions, so the smallest
        // position names a child; the full lists confirm the match.
        let mut keys_b: Vec<(Vec<u32>, u32)> = cb
            .iter()
            .enumerate()
            .map(|(p, &c)| (positions(snap, c, idx_b), p as u32))
            .collect();
        keys_b.sort_unstable();
        let mut pi = Vec::with_capacity(ca.len());
        for &c in ca {
            let key = positions(snap, c, idx_a);
            match keys_b.binary_search_by(|(k, _)| k.as_slice().cmp(&key)) {
                Ok(i) => pi.push(keys_b[i].1),
                Err(_) => break,
            }
        }
        if pi.len() != ca.len() {
            d.mismatches += 1;
            continue;
        }
        let accepted = match (class(snap, ra.node), class(snap, rb.node)) {
            (Class::Parity, Class::Parity) => {
                let up = pi.windows(2).all(|w| w[0] < w[1]);
                let down = pi.windows(2).all(|w| w[0] > w[1]);
                if up || down {
                    Some(d.parity.union(ra.node, rb.node, down))
                } else {
                    None
                }
            }
            (Class::Perm, Class::Perm) if snap.is_whole(ra) && snap.is_whole(rb) => {
                Some(d.perm.union(ra.node, rb.node, &pi))
            }
            _ => None,
        };
        match accepted {
            Some(true) => d.relations += 1,
            Some(false) => d.conflicts += 1,
            None => d.mismatches += 1,
        }
        for (j, &x) in ca.iter().enumerate() {
            let y = cb[pi[j] as usize];
            match (snap.is_leaf(x), snap.is_leaf(y)) {
                (true, true) => {}
                (false, false) => stack.push((whole(snap, x), whole(snap, y))),
                _ => d.mismatches += 1,
            }
        }
    }
}

/// Children of `x` in the order its class decides.
pub(crate) fn ordered_children(snap: &Snap, d: &mut Decisions, x: u32) -> Vec<u32> {
    let ch = &snap.children[x as usize];
    match class(snap, x) {
        Class::Leaf => Vec::new(),
        Class::Parity => {
            let mut out = ch.clone();
            if d.parity.find(x).1 {
                out.reverse();
            }
            out
        }
        Class::Perm => {
            let (_, g) = d.perm.find(x, ch.len());
            g.iter().map(|&j| ch[j as usize]).collect()
        }
    }
}

/// GETLEAFORDER: the leaves in decided order.
pub(crate) fn leaf_order(snap: &Snap, d: &mut Decisions) -> Vec<usize> {
    let mut out = Vec::with_capacity(snap.pos.len());
    let mut stack = vec![0u32];
    while let Some(x) = stack.pop() {
        if let SKind::Leaf(v) = snap.kind[x as usize] {
            out.push(v);
            continue;
        }
        let kids = ordered_children(snap, d, x);
        stack.extend(kids.into_iter().rev());
    }
    out
}
