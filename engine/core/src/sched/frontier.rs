//! The batching environment's state (ED-Batch Algorithm 1): which nodes are ready,
//! per type, and |Frontier(G^t)| per type, maintained incrementally so that a step
//! costs O(batch + its out-edges), not O(graph).

use super::same_type::SameTypeDag;
use crate::graph::{Graph, NodeId, TypeId};

/// Frontier state of one graph during scheduling. Ready lists keep insertion
/// order (nodes become ready in the order their last argument ran, sources in
/// id order), so batches are deterministic.
#[derive(Clone, Debug)]
pub struct Frontier<'g> {
    g: &'g Graph,
    st: &'g SameTypeDag,
    pending: Vec<u32>,
    same_pending: Vec<u32>,
    ready: Vec<Vec<NodeId>>,
    sub_frontier: Vec<u32>,
    remaining: Vec<u32>,
    executed: usize,
    batches: usize,
    /// Nodes that entered Frontier(G^t) in the last step.
    entered: Vec<NodeId>,
}

impl<'g> Frontier<'g> {
    /// The initial state: sources ready.
    pub fn new(g: &'g Graph, st: &'g SameTypeDag) -> Self {
        let t = g.types().len();
        let mut f = Frontier {
            g,
            st,
            pending: Vec::with_capacity(g.len()),
            same_pending: Vec::with_capacity(g.len()),
            ready: vec![Vec::new(); t],
            sub_frontier: vec![0; t],
            remaining: vec![0; t],
            executed: 0,
            batches: 0,
            entered: Vec::new(),
        };
        f.reset();
        f
    }

    /// Back to the initial state, reusing the buffers (one training episode each).
    pub fn reset(&mut self) {
        let g = self.g;
        self.pending.clear();
        self.pending
            .extend(g.nodes().map(|v| g.args(v).len() as u32));
        self.same_pending.clear();
        self.same_pending.extend_from_slice(self.st.in_degrees());
        for r in &mut self.ready {
            r.clear();
        }
        self.sub_frontier.iter_mut().for_each(|c| *c = 0);
        self.remaining.iter_mut().for_each(|c| *c = 0);
        for v in g.nodes() {
            let t = g.node_type(v).index();
            self.remaining[t] += 1;
            if self.pending[v.index()] == 0 {
                self.ready[t].push(v);
            }
            if self.same_pending[v.index()] == 0 {
                self.sub_frontier[t] += 1;
            }
        }
        self.executed = 0;
        self.batches = 0;
        self.entered.clear();
    }

    /// The graph.
    pub fn graph(&self) -> &'g Graph {
        self.g
    }

    /// True once every node has run.
    pub fn is_done(&self) -> bool {
        self.executed == self.g.len()
    }

    /// Ready nodes of type `t` (|Frontier_t(G)| = its length).
    #[inline]
    pub fn ready(&self, t: TypeId) -> &[NodeId] {
        &self.ready[t.index()]
    }

    /// |Frontier_t(G)|.
    #[inline]
    pub fn ready_count(&self, t: TypeId) -> u32 {
        self.ready[t.index()].len() as u32
    }

    /// |Frontier(G^t)|: unexecuted type-t nodes with no unexecuted type-t ancestor.
    #[inline]
    pub fn sub_frontier(&self, t: TypeId) -> u32 {
        self.sub_frontier[t.index()]
    }

    /// Unexecuted nodes of type `t`.
    #[inline]
    pub fn remaining(&self, t: TypeId) -> u32 {
        self.remaining[t.index()]
    }

    /// Unexecuted same-type predecessors of `v` in the [`SameTypeDag`]: 0
    /// exactly when `v` is executed or on Frontier(G^t) of its type t. Lets a
    /// caller that mirrors |Frontier(G^t)| per node (the offline optimiser's
    /// remaining lower bound) see which nodes a step moved onto it.
    #[inline]
    pub fn same_type_pending(&self, v: NodeId) -> u32 {
        self.same_pending[v.index()]
    }

    /// Nodes that entered Frontier(G^t) of their type t in the last step (their
    /// last unexecuted same-type predecessor ran in it), each once.
    pub fn entered_sub_frontier(&self) -> &[NodeId] {
        &self.entered
    }

    /// The same-type DAG this frontier maintains |Frontier(G^t)| with.
    pub fn same_type_dag(&self) -> &'g SameTypeDag {
        self.st
    }

    /// Nodes executed so far.
    pub fn executed(&self) -> usize {
        self.executed
    }

    /// Batches executed so far.
    pub fn batches(&self) -> usize {
        self.batches
    }

    /// Types with at least one ready node, in id order.
    pub fn ready_types(&self) -> impl Iterator<Item = TypeId> + '_ {
        self.ready
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.is_empty())
            .map(|(t, _)| TypeId(t as u32))
    }

    /// The Eq. 1 ratio |Frontier_t(G)| / |Frontier(G^t)| for a ready type (1.0
    /// means every type-t node not blocked by another type-t node is ready:
    /// ED-Batch Lemma 2.1's sufficient condition).
    #[inline]
    pub fn ratio(&self, t: TypeId) -> f64 {
        let sub = self.sub_frontier(t);
        if sub == 0 {
            return 0.0;
        }
        f64::from(self.ready_count(t)) / f64::from(sub)
    }

    /// Executes one batch of type `t` — every ready node of it, or the oldest one
    /// for a non-batchable type — and appends its nodes to `out`. Returns the batch
    /// size (0, and nothing done, if no node of `t` is ready).
    pub fn step(&mut self, t: TypeId, out: &mut Vec<NodeId>) -> usize {
        let start = out.len();
        let list = &mut self.ready[t.index()];
        if list.is_empty() {
            return 0;
        }
        if self.g.types().batchable(t) {
            out.append(list);
        } else {
            out.push(list.remove(0));
        }
        self.finish_batch(t, out, start)
    }

    /// Executes the ready nodes of `t` for which `keep` holds (the rest stay
    /// ready, in order), appending them to `out`: for filtered policies such as
    /// depth-based batching. A non-batchable type still runs one node.
    pub fn step_filtered(
        &mut self,
        t: TypeId,
        keep: impl Fn(NodeId) -> bool,
        out: &mut Vec<NodeId>,
    ) -> usize {
        let start = out.len();
        let batchable = self.g.types().batchable(t);
        let list = &mut self.ready[t.index()];
        let old = std::mem::take(list);
        for v in old {
            if keep(v) && (batchable || out.len() == start) {
                out.push(v);
            } else {
                list.push(v);
            }
        }
        self.finish_batch(t, out, start)
    }

    /// Switches to the same-type DAG `st` mid-run (the first started edgeless,
    /// see [`run_policy_on_demand`](super::run_policy_on_demand)): recounts
    /// every node's unexecuted same-type predecessors and |Frontier(G^t)| per
    /// type from the nodes executed so far, in O(nodes + edges of `st`).
    pub fn attach(&mut self, st: &'g SameTypeDag) {
        let g = self.g;
        // Executed: every argument ran and the node is not waiting in a ready
        // list (ready nodes have no pending arguments either).
        let mut waiting = vec![false; g.len()];
        for r in &self.ready {
            for v in r {
                waiting[v.index()] = true;
            }
        }
        let done = |v: NodeId| self.pending[v.index()] == 0 && !waiting[v.index()];
        self.same_pending.clear();
        self.same_pending.extend_from_slice(st.in_degrees());
        for v in g.nodes().filter(|&v| done(v)) {
            for &w in st.successors(v) {
                self.same_pending[w.index()] -= 1;
            }
        }
        let mut sub = vec![0u32; self.sub_frontier.len()];
        for v in g.nodes() {
            if !done(v) && self.same_pending[v.index()] == 0 {
                sub[g.node_type(v).index()] += 1;
            }
        }
        self.sub_frontier = sub;
        self.entered.clear();
        self.st = st;
    }

    fn finish_batch(&mut self, t: TypeId, out: &[NodeId], start: usize) -> usize {
        self.entered.clear();
        let n = out.len() - start;
        if n == 0 {
            return 0;
        }
        for &v in &out[start..] {
            self.finish_node(v, t);
        }
        self.batches += 1;
        n
    }

    #[inline]
    fn finish_node(&mut self, v: NodeId, t: TypeId) {
        let g = self.g;
        self.executed += 1;
        self.remaining[t.index()] -= 1;
        // v was ready, hence on Frontier(G^t); it leaves it.
        self.sub_frontier[t.index()] -= 1;
        for &u in g.users(v) {
            let p = &mut self.pending[u.index()];
            *p -= 1;
            if *p == 0 {
                self.ready[g.node_type(u).index()].push(u);
            }
        }
        for &w in self.st.successors(v) {
            let p = &mut self.same_pending[w.index()];
            *p -= 1;
            if *p == 0 {
                self.sub_frontier[g.node_type(w).index()] += 1;
                self.entered.push(w);
            }
        }
    }
}
