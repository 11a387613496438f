//! PQ-trees (Booth & Lueker 1976) for the memory planner.
//!
//! A PQ-tree over leaves `0..n` represents a set of permutations of the
//! leaves: the frontiers obtained by permuting the children of any P-node
//! arbitrarily and reversing the children of any Q-node. Starting from a
//! single P-node (all permutations), [`PqTree::reduce`] restricts the set to
//! the permutations in which a given subset is consecutive. ED-Batch (§3.2,
//! Algorithm 2, Appendix B) uses it for adjacency constraints: every batch's
//! operands must be adjacent in memory; the planner later walks the P/Q nodes
//! to align orders and sometimes *tries* a constraint that may fail.
//!
//! # Algorithm
//!
//! REDUCE has two passes over the *pertinent subtree* (the nodes with a leaf
//! of the set below them, up to the *pertinent root*, the lowest node holding
//! all of them).
//!
//! 1. BUBBLE (`bubble.rs`) walks up from the set's leaves, queueing each
//!    parent once, and counts each node's pertinent children. Interior
//!    children of Q-nodes may have stale parent pointers, so they get a valid
//!    one from an unblocked neighbour; runs that never meet one form a block.
//!    One leftover block of several nodes is the pertinent children of an
//!    unknown Q-node and becomes a temporary *pseudonode* root; more blocks
//!    (or a block plus a path off the top) mean infeasible.
//! 2. The template pass processes nodes bottom-up, a node once all its
//!    pertinent children are done, and applies the first template that
//!    matches (labels: full = all leaves below in the set, empty, partial):
//!    - L1: a leaf of the set is full.
//!    - P1: P-node with all children full is full.
//!    - P2 (root): full children are grouped under one new P child.
//!    - P3 (non-root, no partial child): becomes a partial Q-node
//!      `[P(empties), P(fulls)]`.
//!    - P4 (root, one partial Q child): the full children move to its full end.
//!    - P5 (non-root, one partial child): that child replaces the node, with
//!      `P(fulls)` at its full end and `P(empties)` at its empty end.
//!    - P6 (root, two partial children): `q1 + P(fulls) + reversed q2` merge.
//!    - Q1: Q-node with all children full is full.
//!    - Q2: Q-node whose pertinent children are consecutive from one end, at
//!      most one partial child at the inner end of that run: the partial
//!      child's children are spliced in, full end towards the run; the node
//!      becomes partial.
//!    - Q3 (root): pertinent children consecutive anywhere, partial children
//!      only at both ends of the run: both are spliced in.
//!
//!    A pertinent node matching no template, or a non-root node that would
//!    be doubly partial, makes the constraint infeasible.
//!
//! Sets of size 0, 1 or n are satisfiable by every tree and return early.
//!
//! # Complexity
//!
//! A reduction costs O(|S| + size of the pertinent subtree): no pass touches
//! the whole tree. Per-reduction marks, labels and counters live in a scratch
//! array stamped with a generation number, so starting a reduction is one
//! increment instead of a reset. Each template is O(1) plus the number of
//! full and partial children of the node: empty children are never moved (the
//! processed P-node itself is reused as the "P-node of the empty children"),
//! partial Q-nodes are merged by relinking two list ends, and Q-node checks
//! walk only the pertinent run. Sibling links are unordered pairs so a child
//! list can be spliced in either orientation in O(1). Summed over a sequence
//! of reductions this gives Booth & Lueker's O(n + m + Σ|S|) bound.
//!
//! # Parent pointers
//!
//! As in Booth–Lueker, only children of P-nodes and the two endmost children
//! of a Q-node keep valid parent pointers; splicing a Q-node's children into
//! another would otherwise cost O(its children). BUBBLE recovers the parents
//! it needs. Consequently [`PqTree::parent`] is O(1) except for interior
//! children of Q-nodes, where it walks the sibling list (O(siblings)).
//!
//! # Safe reduce
//!
//! A reduction can fail after some templates have already rewritten the
//! tree. Every structural write goes through an undo log (`undo.rs`)
//! holding each touched node's pre-image, node allocations from the free list
//! and the old root; freed nodes are recycled only on success. On failure the
//! log is replayed backwards, so the tree (arena, root, free list, node ids)
//! is exactly as before; the log's size is bounded by the nodes touched.
//! [`PartialEq`] compares this exact representation; use
//! [`PqTree::canonical_string`] to compare trees up to equivalence.
//!
//! # Example
//!
//! ```
//! use planner::pqtree::{NodeKind, PqError, PqTree};
//!
//! // ED-Batch §3.2: x1..x8 are leaves 0..7.
//! let mut tree = PqTree::new(8)?;
//! for set in [&[3, 4][..], &[0, 2], &[1, 0], &[7, 5, 6], &[2, 3, 4]] {
//!     tree.reduce(set)?;
//! }
//! assert_eq!(tree.canonical_string(), "{[1 0 2 {3 4}] {5 6 7}}");
//! // A constraint that would split x1..x5 is rejected and changes nothing.
//! let before = tree.clone();
//! assert_eq!(tree.reduce(&[0, 5]), Err(PqError::Infeasible));
//! assert!(tree == before);
//! assert_eq!(tree.kind(tree.root()), NodeKind::P);
//! # Ok::<(), PqError>(())
//! ```

mod bubble;
mod display;
mod error;
mod list;
mod node;
mod reduce;
mod template_p;
mod template_q;
mod undo;
mod view;

pub use error::PqError;
pub use node::{NodeId, NodeKind};

use node::{NIL, Node, Shape};
use undo::Work;

/// Largest supported number of leaves: internal ids are `u32`, and the arena
/// holds fewer than `2 * leaves` nodes plus a few per-reduction temporaries.
pub const MAX_LEAVES: usize = 1 << 30;

/// A PQ-tree over the leaves `0..num_leaves()`, stored in an arena.
#[derive(Clone, Debug)]
pub struct PqTree {
    leaves: usize,
    nodes: Vec<Node>,
    root: u32,
    /// Recycled arena slots.
    free: Vec<u32>,
    work: Work,
}

impl PqTree {
    /// The tree over `n` leaves allowing every permutation: a single P-node
    /// with children `0..n` in order (or the lone leaf when `n == 1`).
    ///
    /// # Errors
    /// [`PqError::NoLeaves`] if `n == 0`, [`PqError::TooManyLeaves`] if
    /// `n > MAX_LEAVES`.
    pub fn new(n: usize) -> Result<Self, PqError> {
        if n == 0 {
            return Err(PqError::NoLeaves);
        }
        if n > MAX_LEAVES {
            return Err(PqError::TooManyLeaves {
                requested: n,
                max: MAX_LEAVES,
            });
        }
        let mut nodes = Vec::with_capacity(2 * n);
        // n <= MAX_LEAVES < u32::MAX, so every id below fits.
        let root = if n == 1 { 0 } else { n as u32 };
        for i in 0..n as u32 {
            let mut leaf = Node::new(Shape::Leaf);
            if n > 1 {
                leaf.parent = root;
                leaf.sib = [
                    if i == 0 { NIL } else { i - 1 },
                    if i + 1 == n as u32 { NIL } else { i + 1 },
                ];
            }
            nodes.push(leaf);
        }
        if n > 1 {
            let mut p = Node::new(Shape::P);
            p.ends = [0, n as u32 - 1];
            p.count = n as u32;
            nodes.push(p);
        }
        Ok(PqTree {
            leaves: n,
            nodes,
            root,
            free: Vec::new(),
            work: Work::default(),
        })
    }
}

/// Exact representation equality (arena, root, free list); scratch state is
/// ignored. Two equivalent trees built differently may compare unequal.
impl PartialEq for PqTree {
    fn eq(&self, other: &Self) -> bool {
        self.leaves == other.leaves
            && self.root == other.root
            && self.nodes == other.nodes
            && self.free == other.free
    }
}

impl Eq for PqTree {}
