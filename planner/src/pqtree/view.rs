//! Read API for the planner: root, kinds, children, parents, frontier.
//!
//! All methods take `&self` and never allocate beyond their result. A
//! [`NodeId`] must come from this tree since its last successful reduce;
//! an id from elsewhere gives a meaningless answer or an index panic.

use super::PqTree;
use super::node::{NIL, NodeId, NodeKind, Shape};

impl PqTree {
    /// Number of leaves (leaves are numbered `0..num_leaves()`).
    pub fn num_leaves(&self) -> usize {
        self.leaves
    }

    /// The root node (a leaf when the tree has a single leaf).
    pub fn root(&self) -> NodeId {
        NodeId(self.root)
    }

    /// The node holding leaf `leaf`, or `None` if `leaf >= num_leaves()`.
    pub fn leaf_node(&self, leaf: usize) -> Option<NodeId> {
        // Leaf ids are < MAX_LEAVES, so the cast is lossless.
        (leaf < self.leaves).then_some(NodeId(leaf as u32))
    }

    /// Kind of node `id`.
    ///
    /// # Panics
    /// If `id` is not a node index of this tree.
    pub fn kind(&self, id: NodeId) -> NodeKind {
        match self.nodes[id.index()].shape {
            Shape::Leaf => NodeKind::Leaf(id.index()),
            Shape::P => NodeKind::P,
            Shape::Q => NodeKind::Q,
        }
    }

    /// Children of `id` in stored order (a Q-node's order up to reversal; a
    /// P-node's current arbitrary but deterministic order). Empty for a leaf.
    /// O(number of children).
    ///
    /// # Panics
    /// If `id` is not a node index of this tree.
    pub fn children(&self, id: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        self.for_each_child(id.0, |c| out.push(NodeId(c)));
        out
    }

    /// Parent of `id`, `None` for the root.
    ///
    /// O(1) for children of P-nodes and endmost children of Q-nodes. Interior
    /// children of a Q-node keep no valid parent pointer (Booth–Lueker: that
    /// is what makes merging Q-nodes O(1)), so for them this walks the
    /// siblings to an end: O(number of children of the parent). A planner
    /// that needs many parents should walk down from [`root`](Self::root)
    /// with [`children`](Self::children) instead.
    ///
    /// # Panics
    /// If `id` is not a node index of this tree.
    pub fn parent(&self, id: NodeId) -> Option<NodeId> {
        let x = id.0;
        if x == self.root {
            return None;
        }
        let node = self.nodes[x as usize];
        if !node.in_q || node.sib.contains(&NIL) {
            return Some(NodeId(node.parent));
        }
        let (mut prev, mut cur) = (x, node.sib[0]);
        loop {
            let next = self.other(cur, prev);
            if next == NIL {
                return Some(NodeId(self.nodes[cur as usize].parent));
            }
            prev = cur;
            cur = next;
        }
    }

    /// The leaves in stored left-to-right order: one permutation the tree
    /// allows, satisfying every constraint reduced so far.
    pub fn frontier(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.leaves);
        let mut stack = vec![self.root];
        while let Some(x) = stack.pop() {
            if self.nodes[x as usize].shape == Shape::Leaf {
                out.push(x as usize);
                continue;
            }
            // Push in reverse so the first child is popped first.
            let start = stack.len();
            self.for_each_child(x, |c| stack.push(c));
            stack[start..].reverse();
        }
        out
    }

    /// Calls `f` on each child of `x` from `ends[0]` to `ends[1]`.
    pub(crate) fn for_each_child(&self, x: u32, mut f: impl FnMut(u32)) {
        let node = &self.nodes[x as usize];
        if node.shape == Shape::Leaf {
            return;
        }
        let (mut prev, mut cur) = (NIL, node.ends[0]);
        while cur != NIL {
            f(cur);
            let next = self.other(cur, prev);
            prev = cur;
            cur = next;
        }
    }
}
