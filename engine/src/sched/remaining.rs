//! The lower bound of the *remaining* graph (ED-Batch A.3 applied to the
//! unexecuted nodes), kept up to date as a [`Frontier`] steps, and which ready
//! types are *critical*: batching them now lowers it.
//!
//! For a batchable type t the longest chain of unexecuted type-t nodes starts
//! on Frontier(G^t) (executed sets are closed under ancestors), so its length
//! is the largest h(v) over v ∈ Frontier(G^t), where h(v) counts the nodes of
//! the longest same-type chain starting at v. A longest chain only steps to
//! *nearest* same-type successors, so h comes from one reverse pass over the
//! [`SameTypeDag`]. Per type, histograms of h over Frontier(G^t) and over the
//! ready type-t nodes give, in O(1):
//!
//! - the term of t: the top height `top[t]` (it never increases — a node
//!   entering Frontier(G^t) is a same-type successor of one leaving it, hence
//!   lower — so the pointer walks down in amortised O(1));
//! - whether t is critical: every Frontier(G^t) node at the top height is
//!   ready, so one batch of t removes them all and the term drops by one.
//!
//! A non-batchable type's term is its count of unexecuted nodes (one batch
//! each); running one always lowers it. The bound never drops by more than one
//! per batch, so batches so far + bound is a consistent estimate: the offline
//! optimiser ranks states by it, the trainer shapes rewards with it (a
//! potential), and the `sort-crit` encodings mark critical types.
//!
//! Updates cost O(1) per executed node and per same-type edge leaving it, the
//! same as the frontier step itself; a query costs O(1).

use std::sync::Arc;

use super::frontier::Frontier;
use super::same_type::SameTypeDag;
use crate::graph::{Graph, NodeId, TypeId};

/// Per-graph data: h(v) of every node, and where each type's histogram sits.
#[derive(Clone, Debug)]
pub struct Heights {
    height: Vec<u32>,
    hist_start: Vec<u32>,
}

impl Heights {
    /// One reverse topological pass over `st`: O(nodes + same-type edges).
    pub fn new(g: &Graph, st: &SameTypeDag) -> Self {
        let mut height = vec![1u32; g.len()];
        for &v in g.topo_order().iter().rev() {
            if let Some(h) = st.successors(v).iter().map(|w| height[w.index()]).max() {
                height[v.index()] = h + 1;
            }
        }
        let mut max_h = vec![0u32; g.types().len()];
        for v in g.nodes() {
            let t = g.node_type(v).index();
            max_h[t] = max_h[t].max(height[v.index()]);
        }
        let mut hist_start = Vec::with_capacity(max_h.len() + 1);
        let mut at = 0u32;
        for m in &max_h {
            hist_start.push(at);
            at += m + 1;
        }
        hist_start.push(at);
        Heights { height, hist_start }
    }

    /// h(v): nodes on the longest same-type chain starting at v.
    #[inline]
    pub fn height(&self, v: NodeId) -> u32 {
        self.height[v.index()]
    }

    #[inline]
    fn slot(&self, t: TypeId, h: u32) -> usize {
        self.hist_start[t.index()] as usize + h as usize
    }
}

fn graph_key(g: &Graph) -> (usize, usize) {
    (std::ptr::from_ref(g) as usize, g.len())
}

/// The remaining lower bound of one frontier (see the module docs). Call
/// [`after_step`](Self::after_step) after each step (`Frontier::step` or
/// `step_filtered`) and [`reset`](Self::reset) after `Frontier::reset`.
#[derive(Clone, Debug)]
pub struct RemainingBound {
    heights: Arc<Heights>,
    sub_hist: Vec<u32>,
    ready_hist: Vec<u32>,
    top: Vec<u32>,
    /// Per type: how many of `f.ready(t)` (a prefix) are in `ready_hist`.
    seen: Vec<u32>,
    bound: u32,
    entering: Vec<NodeId>,
    /// Address and size of the graph the heights were computed for (compared,
    /// never dereferenced: see [`is_for`](Self::is_for)).
    graph: (usize, usize),
}

impl RemainingBound {
    /// A tracker for `f`'s graph (computing its [`Heights`]), at `f`'s state.
    pub fn new(f: &Frontier) -> Self {
        Self::with_heights(f, Arc::new(Heights::new(f.graph(), f.same_type_dag())))
    }

    /// A tracker sharing precomputed heights (which must be `f`'s graph's).
    pub fn with_heights(f: &Frontier, heights: Arc<Heights>) -> Self {
        let size = *heights.hist_start.last().unwrap_or(&0) as usize;
        let types = f.graph().types().len();
        let mut b = RemainingBound {
            heights,
            sub_hist: vec![0; size],
            ready_hist: vec![0; size],
            top: vec![0; types],
            seen: vec![0; types],
            bound: 0,
            entering: Vec::new(),
            graph: graph_key(f.graph()),
        };
        b.reset(f);
        b
    }

    /// Whether this tracker was made for `f`'s graph (the same graph object,
    /// of the same size), so [`reset`](Self::reset) may reuse its heights.
    pub fn is_for(&self, f: &Frontier) -> bool {
        self.graph == graph_key(f.graph())
    }

    /// The heights in use.
    pub fn heights(&self) -> &Arc<Heights> {
        &self.heights
    }

    /// Recomputes everything from `f` (O(nodes)), which must be in its initial
    /// state (fresh or just reset: nothing executed).
    pub fn reset(&mut self, f: &Frontier) {
        debug_assert_eq!(
            f.executed(),
            0,
            "RemainingBound::reset needs an initial frontier"
        );
        let g = f.graph();
        self.sub_hist.iter_mut().for_each(|c| *c = 0);
        self.ready_hist.iter_mut().for_each(|c| *c = 0);
        self.top.iter_mut().for_each(|c| *c = 0);
        self.seen.iter_mut().for_each(|c| *c = 0);
        let h = &self.heights;
        for v in g.nodes() {
            if f.same_type_pending(v) == 0 {
                let t = g.node_type(v);
                self.sub_hist[h.slot(t, h.height(v))] += 1;
                self.top[t.index()] = self.top[t.index()].max(h.height(v));
            }
        }
        self.sync_ready(f);
        self.bound = (0..self.top.len())
            .map(|t| self.term(f, TypeId(t as u32)))
            .sum();
    }

    /// Counts nodes that became ready since the last call.
    fn sync_ready(&mut self, f: &Frontier) {
        for (t, seen) in self.seen.iter_mut().enumerate() {
            let t = TypeId(t as u32);
            let ready = f.ready(t);
            for &v in &ready[*seen as usize..] {
                self.ready_hist[self.heights.slot(t, self.heights.height(v))] += 1;
            }
            *seen = ready.len() as u32;
        }
    }

    /// Updates after `f.step(t, ..)` ran `batch` (the nodes it appended).
    pub fn after_step(&mut self, f: &Frontier, t: TypeId, batch: &[NodeId]) {
        // The term before the step: `top` is not updated yet; the frontier's
        // remaining count already is.
        let before = if f.graph().types().batchable(t) {
            self.top[t.index()]
        } else {
            f.remaining(t) + batch.len() as u32
        };
        let h = Arc::clone(&self.heights);
        for &v in batch {
            let s = h.slot(t, h.height(v));
            self.sub_hist[s] -= 1;
            self.ready_hist[s] -= 1;
        }
        // Every step kind (all ready nodes, a filtered subset, one node) keeps
        // the type's other ready nodes in order at the front of its list and
        // appends nodes that became ready after them.
        let seen = &mut self.seen[t.index()];
        *seen = seen.saturating_sub(batch.len() as u32);
        // Same-type successors whose last nearest same-type ancestor ran now
        // enter Frontier(G^t); one may follow several batch nodes: dedup.
        self.entering.clear();
        let st = f.same_type_dag();
        for &v in batch {
            for &w in st.successors(v) {
                if f.same_type_pending(w) == 0 {
                    self.entering.push(w);
                }
            }
        }
        self.entering.sort_unstable();
        self.entering.dedup();
        for &w in &self.entering {
            self.sub_hist[h.slot(t, h.height(w))] += 1;
        }
        let top = &mut self.top[t.index()];
        while *top > 0 && self.sub_hist[h.slot(t, *top)] == 0 {
            *top -= 1;
        }
        self.sync_ready(f);
        self.bound = self.bound - before + self.term(f, t);
    }

    /// The lower bound of the remaining graph.
    #[inline]
    pub fn bound(&self) -> u32 {
        self.bound
    }

    /// Type t's term of the bound.
    #[inline]
    pub fn term(&self, f: &Frontier, t: TypeId) -> u32 {
        if f.graph().types().batchable(t) {
            self.top[t.index()]
        } else {
            f.remaining(t)
        }
    }

    /// Whether batching the ready type t now lowers the bound (by one).
    #[inline]
    pub fn is_critical(&self, f: &Frontier, t: TypeId) -> bool {
        if !f.graph().types().batchable(t) {
            return f.ready_count(t) > 0;
        }
        let top = self.top[t.index()];
        let s = self.heights.slot(t, top);
        top > 0 && self.ready_hist[s] == self.sub_hist[s]
    }
}
