//! A search state of the offline optimiser: a [`Frontier`], the lower bound
//! of its remaining graph ([`RemainingBound`], which the beam ranks by), and a
//! Zobrist hash of the executed set, to merge states reached in different
//! orders.

use engine::graph::{Graph, NodeId, TypeId};
use engine::sched::{Frontier, RemainingBound, SameTypeDag};

/// Per-graph data shared by every state.
pub(crate) struct Ctx<'g> {
    pub g: &'g Graph,
    pub st: &'g SameTypeDag,
    /// Zobrist key of every node.
    zobrist: Vec<u64>,
}

impl<'g> Ctx<'g> {
    pub fn new(g: &'g Graph, st: &'g SameTypeDag) -> Self {
        Ctx {
            g,
            st,
            zobrist: (0..g.len() as u64).map(splitmix64).collect(),
        }
    }
}

/// SplitMix64: a fixed, well-mixed key per node (no hash-order dependence).
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What one move would do, computed without making it.
#[derive(Copy, Clone, Debug)]
pub(crate) struct MovePreview {
    /// Remaining bound after the move.
    pub bound: u32,
    /// Nodes executed after the move.
    pub executed: u32,
    /// Hash of the executed set after the move.
    pub hash: u64,
}

/// One search state.
#[derive(Clone)]
pub(crate) struct State<'g> {
    pub f: Frontier<'g>,
    pub b: RemainingBound,
    /// Zobrist hash of the executed set.
    pub hash: u64,
}

impl<'g> State<'g> {
    /// The initial state.
    pub fn root(c: &Ctx<'g>) -> Self {
        let f = Frontier::new(c.g, c.st);
        let b = RemainingBound::new(&f);
        State { f, b, hash: 0 }
    }

    /// The move "batch type t" previewed (t must have a ready node): O(batch).
    pub fn preview(&self, c: &Ctx, t: TypeId) -> MovePreview {
        let ready = self.f.ready(t);
        let nodes = if c.g.types().batchable(t) {
            ready
        } else {
            &ready[..1]
        };
        let hash = nodes
            .iter()
            .fold(self.hash, |h, v| h ^ c.zobrist[v.index()]);
        MovePreview {
            bound: self.b.bound() - u32::from(self.b.is_critical(&self.f, t)),
            executed: (self.f.executed() + nodes.len()) as u32,
            hash,
        }
    }

    /// Makes the move "batch type t"; `buf` is scratch for the batch's nodes.
    pub fn apply(&mut self, c: &Ctx<'g>, t: TypeId, buf: &mut Vec<NodeId>) {
        buf.clear();
        self.f.step(t, buf);
        for v in buf.iter() {
            self.hash ^= c.zobrist[v.index()];
        }
        self.b.after_step(&self.f, t, buf);
    }
}
