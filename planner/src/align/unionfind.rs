//! Union–find over node orders with transformations (ED-Batch Algorithm 5).
//!
//! Each element is an internal tree node; its *order* is the sequence in
//! which its children are emitted, written as stored-child indices. An edge
//! says "this node's order is `g` applied to its parent's order"
//! (`ord_x[p] = g[ord_parent[p]]`), so every node's order is a fixed
//! function of its class root's order. Two orders that must correspond
//! (the same op positions in two operands of a batch) are unioned; a
//! relation contradicting what a class already implies is refused, and the
//! copy accounting later charges whatever it leaves misaligned. Roots keep
//! their stored order, so the result is deterministic.
//!
//! Q-nodes (and P-nodes with two children) only ever need identity or
//! reversal, so they use the cheap [`ParityUf`]; wider P-nodes use the
//! permutation group ([`PermUf`]).

/// Union–find where each relation is "same direction" or "reversed".
#[derive(Debug, Clone)]
pub(crate) struct ParityUf {
    parent: Vec<u32>,
    /// Parity relative to the parent.
    flip: Vec<bool>,
}

impl ParityUf {
    pub fn new(n: usize) -> Self {
        ParityUf {
            parent: (0..n as u32).collect(),
            flip: vec![false; n],
        }
    }

    /// Root of `x` and whether `x` is reversed relative to it.
    pub fn find(&mut self, x: u32) -> (u32, bool) {
        let mut path = Vec::new();
        let mut r = x;
        while self.parent[r as usize] != r {
            path.push(r);
            r = self.parent[r as usize];
        }
        // Walk back from the node nearest the root, compressing.
        let mut acc = false;
        for &y in path.iter().rev() {
            acc ^= self.flip[y as usize];
            self.flip[y as usize] = acc;
            self.parent[y as usize] = r;
        }
        (
            r,
            if path.is_empty() {
                false
            } else {
                self.flip[x as usize]
            },
        )
    }

    /// Records `dir(b) = dir(a) xor flip`; false if it contradicts the classes.
    pub fn union(&mut self, a: u32, b: u32, flip: bool) -> bool {
        let (ra, pa) = self.find(a);
        let (rb, pb) = self.find(b);
        if ra == rb {
            return pa ^ pb == flip;
        }
        // dir(rb) = dir(b) xor pb = dir(a) xor flip xor pb = dir(ra) xor pa xor flip xor pb.
        self.parent[rb as usize] = ra;
        self.flip[rb as usize] = pa ^ flip ^ pb;
        true
    }
}

/// Union–find where each relation is a permutation of child indices.
#[derive(Debug, Clone)]
pub(crate) struct PermUf {
    parent: Vec<u32>,
    /// `g` relative to the parent; empty for a root (identity).
    g: Vec<Vec<u32>>,
}

/// `(f ∘ h)[j] = f[h[j]]`.
fn compose(f: &[u32], h: &[u32]) -> Vec<u32> {
    h.iter().map(|&j| f[j as usize]).collect()
}

fn inverse(f: &[u32]) -> Vec<u32> {
    let mut inv = vec![0; f.len()];
    for (i, &j) in f.iter().enumerate() {
        inv[j as usize] = i as u32;
    }
    inv
}

impl PermUf {
    pub fn new(n: usize) -> Self {
        PermUf {
            parent: (0..n as u32).collect(),
            g: vec![Vec::new(); n],
        }
    }

    /// Root of `x` and `G` with `ord_x = G ∘ ord_root`; `arity` is the
    /// number of children of `x` (the identity's length for a root).
    pub fn find(&mut self, x: u32, arity: usize) -> (u32, Vec<u32>) {
        let mut path = Vec::new();
        let mut r = x;
        while self.parent[r as usize] != r {
            path.push(r);
            r = self.parent[r as usize];
        }
        // G of the node nearest the root is its own g; each node below
        // composes its g with its parent's G.
        let mut acc: Option<Vec<u32>> = None;
        for &y in path.iter().rev() {
            let gy = std::mem::take(&mut self.g[y as usize]);
            let total = match &acc {
                None => gy,
                Some(gp) => compose(&gy, gp),
            };
            self.g[y as usize] = total.clone();
            self.parent[y as usize] = r;
            acc = Some(total);
        }
        (r, acc.unwrap_or_else(|| (0..arity as u32).collect()))
    }

    /// Records `ord_b = pi ∘ ord_a` (`pi` maps `a`'s child indices to `b`'s);
    /// false if it contradicts the classes or the arities differ.
    pub fn union(&mut self, a: u32, b: u32, pi: &[u32]) -> bool {
        let (ra, ga) = self.find(a, pi.len());
        let (rb, gb) = self.find(b, pi.len());
        if ga.len() != pi.len() || gb.len() != pi.len() {
            return false;
        }
        if ra == rb {
            return gb == compose(pi, &ga);
        }
        // ord_rb = gb^-1 ∘ pi ∘ ga ∘ ord_ra.
        self.g[rb as usize] = compose(&inverse(&gb), &compose(pi, &ga));
        self.parent[rb as usize] = ra;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parity_chains_compose_and_contradictions_are_refused() {
        let mut uf = ParityUf::new(4);
        assert!(uf.union(0, 1, true));
        assert!(uf.union(1, 2, true));
        assert!(!(uf.find(2).1 ^ uf.find(0).1), "two flips cancel");
        assert!(uf.union(0, 2, false), "implied relation is compatible");
        assert!(!uf.union(0, 2, true), "contradiction is refused");
        assert!(uf.union(3, 3, false) && !uf.union(3, 3, true));
    }

    #[test]
    fn permutations_compose_through_the_root() {
        let mut uf = PermUf::new(3);
        // ord_1 = [1,2,0] ∘ ord_0; ord_2 = [2,0,1] ∘ ord_1 = identity ∘ ord_0.
        assert!(uf.union(0, 1, &[1, 2, 0]));
        assert!(uf.union(1, 2, &[2, 0, 1]));
        let (r0, g0) = uf.find(0, 3);
        let (r2, g2) = uf.find(2, 3);
        assert_eq!(r0, r2);
        assert_eq!(g0, g2, "node 2 must follow node 0 exactly");
        assert!(uf.union(0, 2, &[0, 1, 2]));
        assert!(!uf.union(0, 2, &[1, 0, 2]));
    }
}
