//! Bit-set view of a small graph for the exact search: per node its argument set
//! and its same-type ancestors, per type its nodes. A search state is just the
//! set of executed nodes, so readiness, |Frontier(G^t)| and the remaining lower
//! bound are a few word operations per node instead of a walk over lists.

use engine::graph::Graph;

/// Words per set: graphs up to `64 * WORDS` nodes.
pub(crate) const WORDS: usize = 4;

/// A set of node indices.
pub(crate) type Bits = [u64; WORDS];

/// The empty set.
pub(crate) const EMPTY: Bits = [0; WORDS];

#[inline]
pub(crate) fn insert(s: &mut Bits, v: usize) {
    s[v / 64] |= 1 << (v % 64);
}

#[inline]
pub(crate) fn union(a: &Bits, b: &Bits) -> Bits {
    std::array::from_fn(|i| a[i] | b[i])
}

#[inline]
fn intersects(a: &Bits, b: &Bits) -> bool {
    a.iter().zip(b).any(|(x, y)| x & y != 0)
}

#[inline]
fn is_subset(a: &Bits, b: &Bits) -> bool {
    a.iter().zip(b).all(|(x, y)| x & !y == 0)
}

/// Node indices in `s`, ascending.
pub(crate) fn members(s: &Bits) -> impl Iterator<Item = usize> + '_ {
    s.iter().enumerate().flat_map(|(w, &word)| {
        let mut rest = word;
        std::iter::from_fn(move || {
            if rest == 0 {
                return None;
            }
            let b = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            Some(w * 64 + b)
        })
    })
}

/// Number of elements of `s`.
pub(crate) fn count(s: &Bits) -> u32 {
    s.iter().map(|w| w.count_ones()).sum()
}

/// The graph as bit sets.
pub(crate) struct Masks {
    /// Arguments of every node.
    args: Vec<Bits>,
    /// Strict ancestors of every node that share its type.
    same_anc: Vec<Bits>,
    /// Nodes of every type.
    pub of_type: Vec<Bits>,
    /// Batchability of every type.
    pub batchable: Vec<bool>,
    /// Every node.
    pub all: Bits,
}

impl Masks {
    /// Builds the sets; the caller has checked `g.len() <= 64 * WORDS`.
    pub fn new(g: &Graph) -> Masks {
        let n = g.len();
        let types = g.types().len();
        let mut args = vec![EMPTY; n];
        let mut anc = vec![EMPTY; n];
        let mut of_type = vec![EMPTY; types];
        let mut all = EMPTY;
        for &v in g.topo_order() {
            let mut a = EMPTY;
            let mut up = EMPTY;
            for &u in g.args(v) {
                insert(&mut a, u.index());
                insert(&mut up, u.index());
                // Arguments precede v in topological order, so anc[u] is final.
                up = union(&up, &anc[u.index()]);
            }
            args[v.index()] = a;
            anc[v.index()] = up;
            insert(&mut of_type[g.node_type(v).index()], v.index());
            insert(&mut all, v.index());
        }
        let same_anc = (0..n)
            .map(|v| {
                let t = &of_type[g.node_types()[v].index()];
                std::array::from_fn(|i| anc[v][i] & t[i])
            })
            .collect();
        Masks {
            args,
            same_anc,
            of_type,
            batchable: g.types().iter().map(|(_, op)| op.batchable).collect(),
            all,
        }
    }

    /// Unexecuted nodes all of whose arguments are executed.
    pub fn ready(&self, exec: &Bits) -> Bits {
        let mut r = EMPTY;
        let todo: Bits = std::array::from_fn(|i| self.all[i] & !exec[i]);
        for v in members(&todo) {
            if is_subset(&self.args[v], exec) {
                insert(&mut r, v);
            }
        }
        r
    }

    /// |Frontier(G^t)|: unexecuted type-t nodes with no unexecuted type-t ancestor.
    pub fn sub_frontier(&self, t: usize, exec: &Bits) -> u32 {
        let todo: Bits = std::array::from_fn(|i| self.of_type[t][i] & !exec[i]);
        members(&todo)
            .filter(|&v| !intersects(&self.same_anc[v], &todo))
            .count() as u32
    }

    /// Lower bound on the batches still needed once `exec` has run: per batchable
    /// type the longest same-type chain among unexecuted nodes (ED-Batch Eq. 2 on
    /// the remaining graph), per non-batchable type its unexecuted node count.
    /// The longest chain is counted by peeling minimal elements (Mirsky): each
    /// round removes the unexecuted type-t nodes with no unexecuted type-t
    /// ancestor, and a chain loses exactly one node per round.
    pub fn remaining_bound(&self, exec: &Bits) -> u32 {
        let mut total = 0;
        for (t, of) in self.of_type.iter().enumerate() {
            let mut todo: Bits = std::array::from_fn(|i| of[i] & !exec[i]);
            if !self.batchable[t] {
                total += count(&todo);
                continue;
            }
            while todo != EMPTY {
                let mut layer = EMPTY;
                for v in members(&todo) {
                    if !intersects(&self.same_anc[v], &todo) {
                        insert(&mut layer, v);
                    }
                }
                todo = std::array::from_fn(|i| todo[i] & !layer[i]);
                total += 1;
            }
        }
        total
    }
}
