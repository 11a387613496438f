//! Arena records of the PQ-tree and the per-reduction scratch record.
//!
//! Structure (`Node`) and per-reduction bookkeeping (`Scratch`) live in two
//! parallel vectors so that the undo log only has to snapshot the former: the
//! scratch record is invalidated wholesale by bumping a generation counter,
//! never by resetting it node by node.

/// Sentinel for "no node" in the compact `u32` links of the arena.
pub(crate) const NIL: u32 = u32::MAX;

/// Handle of a node in a [`PqTree`](super::PqTree) arena.
///
/// Leaf `i` always has the id with index `i`. Ids of internal nodes are
/// recycled after a successful reduce frees them, so an internal id is only
/// meaningful until the next successful [`reduce`](super::PqTree::reduce).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) u32);

impl NodeId {
    /// Arena index of the node, for keying planner side tables stored in a `Vec`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a node is, as seen by the planner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A leaf carrying its leaf number (`0..num_leaves`).
    Leaf(usize),
    /// A P-node: its (at least 2) children may appear in any order.
    P,
    /// A Q-node: its (at least 3) children appear in the stored order or its reverse.
    Q,
}

/// Internal node kind; a leaf's number is its arena index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Leaf,
    P,
    Q,
}

/// One arena slot. `Copy` so the undo log can store pre-images by value;
/// aligned to 32 bytes so a node never straddles two cache lines.
///
/// Children form a doubly linked list whose two sibling links are *unordered*
/// (`sib[0]` is not "left"): concatenating or splicing a sub-list in either
/// orientation is then O(1), which the Q-node templates rely on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(align(32))]
pub(crate) struct Node {
    pub(crate) shape: Shape,
    /// True when the parent is a Q-node; only then do the sibling links count
    /// as "immediate siblings" for BUBBLE.
    pub(crate) in_q: bool,
    /// Valid for the root (NIL), children of P-nodes and endmost children of
    /// Q-nodes; may be stale for interior children of Q-nodes.
    pub(crate) parent: u32,
    pub(crate) sib: [u32; 2],
    /// The two endmost children; a Q-node's order runs from `ends[0]` to `ends[1]`.
    pub(crate) ends: [u32; 2],
    /// Number of children; maintained for P-nodes only (a Q-node's real parent
    /// can be unknown when its children are spliced, so its count is not kept).
    pub(crate) count: u32,
}

impl Node {
    pub(crate) fn new(shape: Shape) -> Node {
        Node {
            shape,
            in_q: false,
            parent: NIL,
            sib: [NIL, NIL],
            ends: [NIL, NIL],
            count: 0,
        }
    }
}

/// BUBBLE's marks (Booth & Lueker's UNMARKED / QUEUED / BLOCKED / UNBLOCKED).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Mark {
    #[default]
    Unmarked,
    Queued,
    Blocked,
    Unblocked,
}

/// REDUCE's labels. Doubly partial nodes are never labelled: they can only be
/// the pertinent root, which needs no label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Label {
    #[default]
    Empty,
    Full,
    Partial,
}

/// Per-reduction state of one node; meaningful only while `stamp` equals the
/// tree's current generation, otherwise it reads as the default.
///
/// Kept to 32 aligned bytes: on large trees a reduction's cost is dominated by
/// cache misses on the node and scratch records of the set's leaves.
#[derive(Clone, Copy, Debug)]
#[repr(align(32))]
pub(crate) struct Scratch {
    pub(crate) stamp: u32,
    pub(crate) mark: Mark,
    pub(crate) label: Label,
    pub(crate) pert_children: u32,
    pub(crate) pert_leaves: u32,
    /// Head of the intrusive list of full children (linked through `next`).
    pub(crate) full_head: u32,
    pub(crate) full_count: u32,
    /// Head of the intrusive list of partial children (linked through `next`).
    pub(crate) partial_head: u32,
    /// Saturating: only "0, 1, 2 or more" matters.
    pub(crate) partial_count: u8,
    /// Next sibling in the parent's full or partial list (a node is filed in
    /// exactly one of them, once).
    pub(crate) next: u32,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            stamp: 0,
            mark: Mark::Unmarked,
            label: Label::Empty,
            pert_children: 0,
            pert_leaves: 0,
            full_head: NIL,
            full_count: 0,
            partial_head: NIL,
            partial_count: 0,
            next: NIL,
        }
    }
}

impl Scratch {
    /// Fresh state for generation `generation`.
    pub(crate) fn reset(&mut self, generation: u32) {
        *self = Scratch {
            stamp: generation,
            ..Scratch::default()
        };
    }
}
