//! The lower bound of the *remaining* graph (ED-Batch A.3 applied to the
//! unexecuted nodes), kept up to date as a [`Frontier`] steps, and which ready
//! types are *critical*: batching them now lowers it.
//!
//! For a batchable type t the longest chain of unexecuted type-t nodes starts
//! on Frontier(G^t) (executed sets are closed under ancestors), so its length
//! is the largest h(v) over v ∈ Frontier(G^t), where h(v) counts the nodes of
//! the longest same-type chain starting at v. A longest chain never skips a
//! type-t node it could pass through, so it only takes edges of the per-type
//! transitive reduction and h comes from one reverse pass over the
//! [`SameTypeDag`](super::SameTypeDag), which keeps h. Per type, histograms of h over Frontier(G^t) and over the
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

use super::frontier::Frontier;
use crate::graph::{NodeId, TypeId};

/// The remaining lower bound of one frontier (see the module docs). Call
/// [`after_step`](Self::after_step) after each step (`Frontier::step` or
/// `step_filtered`) and [`reset`](Self::reset) after `Frontier::reset`. The
/// heights h come from the frontier's [`SameTypeDag`](super::SameTypeDag).
#[derive(Clone, Debug)]
pub struct RemainingBound {
    /// Start of type t's histograms (t's slots: h = 0 ..= max height of t).
    hist_start: Vec<u32>,
    sub_hist: Vec<u32>,
    ready_hist: Vec<u32>,
    top: Vec<u32>,
    /// Per type: how many of `f.ready(t)` (a prefix) are in `ready_hist`.
    seen: Vec<u32>,
    bound: u32,
}

/// Histogram layout for the heights of `f`'s same-type DAG.
fn layout(f: &Frontier) -> Vec<u32> {
    let max = f.same_type_dag().max_heights();
    let mut start = Vec::with_capacity(max.len() + 1);
    let mut at = 0u32;
    for m in max {
        start.push(at);
        at += m + 1;
    }
    start.push(at);
    start
}

impl RemainingBound {
    /// A tracker at `f`'s state, which must be the initial one. O(types +
    /// nodes).
    pub fn new(f: &Frontier) -> Self {
        let hist_start = layout(f);
        let size = *hist_start.last().unwrap_or(&0) as usize;
        let types = f.graph().types().len();
        let mut b = RemainingBound {
            hist_start,
            sub_hist: vec![0; size],
            ready_hist: vec![0; size],
            top: vec![0; types],
            seen: vec![0; types],
            bound: 0,
        };
        b.reset(f);
        b
    }

    /// Whether this tracker's buffers fit `f`'s graph (same histogram
    /// layout), so [`reset`](Self::reset) can reuse them.
    pub fn fits(&self, f: &Frontier) -> bool {
        self.top.len() == f.graph().types().len() && self.hist_start == layout(f)
    }

    #[inline]
    fn slot(&self, f: &Frontier, t: TypeId, v: NodeId) -> usize {
        self.hist_start[t.index()] as usize + f.same_type_dag().height(v) as usize
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
        let st = f.same_type_dag();
        for v in g.nodes() {
            if f.same_type_pending(v) == 0 {
                let t = g.node_type(v);
                let s = self.slot(f, t, v);
                self.sub_hist[s] += 1;
                self.top[t.index()] = self.top[t.index()].max(st.height(v));
            }
        }
        self.sync_ready(f);
        self.bound = (0..self.top.len())
            .map(|t| self.term(f, TypeId(t as u32)))
            .sum();
    }

    /// Counts nodes that became ready since the last call.
    fn sync_ready(&mut self, f: &Frontier) {
        let st = f.same_type_dag();
        for t in 0..self.seen.len() {
            let ready = f.ready(TypeId(t as u32));
            let base = self.hist_start[t] as usize;
            for &v in &ready[self.seen[t] as usize..] {
                self.ready_hist[base + st.height(v) as usize] += 1;
            }
            self.seen[t] = ready.len() as u32;
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
        let st = f.same_type_dag();
        let base = self.hist_start[t.index()] as usize;
        for &v in batch {
            let s = base + st.height(v) as usize;
            self.sub_hist[s] -= 1;
            self.ready_hist[s] -= 1;
        }
        // Every step kind (all ready nodes, a filtered subset, one node) keeps
        // the type's other ready nodes in order at the front of its list and
        // appends nodes that became ready after them.
        let seen = &mut self.seen[t.index()];
        *seen = seen.saturating_sub(batch.len() as u32);
        // Nodes entering Frontier(G^t): same-type successors of the batch.
        for &w in f.entered_sub_frontier() {
            self.sub_hist[base + st.height(w) as usize] += 1;
        }
        let top = &mut self.top[t.index()];
        while *top > 0 && self.sub_hist[base + *top as usize] == 0 {
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
        let s = self.hist_start[t.index()] as usize + top as usize;
        top > 0 && self.ready_hist[s] == self.sub_hist[s]
    }
}
