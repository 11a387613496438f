//! A read-only copy of a PQ-tree with parents, leaf spans and positions.
//!
//! The alignment passes need lowest common ancestors, the leaves under each
//! node and parent pointers for every node; the PQ-tree keeps valid parents
//! only for some nodes (Booth–Lueker) and its node ids die at the next
//! reduction. A snapshot, rebuilt after each change, gives all of it in O(n):
//! nodes are numbered in pre-order, so the leaves below a node are one
//! contiguous *span* of the stored frontier.

use crate::pqtree::{NodeKind, PqTree};

/// Sentinel parent of the root.
pub(crate) const NONE: u32 = u32::MAX;

/// Kind of a snapshot node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SKind {
    Leaf(usize),
    P,
    Q,
}

/// A pre-order copy of a tree; node 0 is the root.
#[derive(Debug, Clone)]
pub(crate) struct Snap {
    pub kind: Vec<SKind>,
    pub children: Vec<Vec<u32>>,
    pub parent: Vec<u32>,
    /// `[start, end)` of the node's leaves in `frontier`.
    pub span: Vec<(u32, u32)>,
    /// Leaves in stored order.
    pub frontier: Vec<usize>,
    /// Position of each leaf in `frontier`.
    pub pos: Vec<u32>,
    /// Snapshot node of each leaf.
    pub leaf: Vec<u32>,
}

/// A node, or a run of consecutive children of a Q-node: the subtree that
/// holds exactly one operand's variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    pub node: u32,
    /// Children `first..=last` of `node`; the whole node when they are all
    /// of them (and 0..=0 for a leaf).
    pub first: usize,
    pub last: usize,
}

impl Snap {
    pub fn new(tree: &PqTree) -> Snap {
        let n = tree.num_leaves();
        let mut s = Snap {
            kind: Vec::with_capacity(2 * n),
            children: Vec::with_capacity(2 * n),
            parent: Vec::with_capacity(2 * n),
            span: Vec::with_capacity(2 * n),
            frontier: Vec::with_capacity(n),
            pos: vec![0; n],
            leaf: vec![0; n],
        };
        let mut stack = vec![(tree.root(), NONE)];
        while let Some((id, parent)) = stack.pop() {
            let me = s.kind.len() as u32;
            if parent != NONE {
                s.children[parent as usize].push(me);
            }
            s.parent.push(parent);
            s.children.push(Vec::new());
            let start = s.frontier.len() as u32;
            s.span.push((start, start));
            match tree.kind(id) {
                NodeKind::Leaf(v) => {
                    s.kind.push(SKind::Leaf(v));
                    s.pos[v] = start;
                    s.leaf[v] = me;
                    s.frontier.push(v);
                }
                kind => {
                    s.kind.push(if kind == NodeKind::P {
                        SKind::P
                    } else {
                        SKind::Q
                    });
                    for c in tree.children(id).into_iter().rev() {
                        stack.push((c, me));
                    }
                }
            }
        }
        // Pre-order: children have larger ids, so a reverse sweep sees each
        // node after all of its descendants.
        for x in (0..s.kind.len()).rev() {
            if let Some(&last) = s.children[x].last() {
                s.span[x].1 = s.span[last as usize].1;
            } else {
                s.span[x].1 = s.span[x].0 + 1;
            }
        }
        s
    }

    pub fn len(&self) -> usize {
        self.kind.len()
    }

    pub fn is_leaf(&self, x: u32) -> bool {
        matches!(self.kind[x as usize], SKind::Leaf(_))
    }

    /// The region holding exactly `vars` (at least two distinct leaves), or
    /// `None` if they are not consecutive in this tree.
    pub fn region(&self, vars: &[usize]) -> Option<Region> {
        let lo = vars.iter().map(|&v| self.pos[v]).min()?;
        let hi = vars.iter().map(|&v| self.pos[v]).max()?;
        if (hi - lo + 1) as usize != vars.len() {
            return None;
        }
        let mut x = self.leaf[self.frontier[lo as usize]];
        while self.span[x as usize].1 <= hi {
            x = self.parent[x as usize];
            if x == NONE {
                return None;
            }
        }
        let kids = &self.children[x as usize];
        if self.span[x as usize] == (lo, hi + 1) {
            return Some(Region {
                node: x,
                first: 0,
                last: kids.len().saturating_sub(1),
            });
        }
        // A proper part of a node is consecutive in every frontier only if
        // the node is a Q-node and the part is a run of its children.
        if self.kind[x as usize] != SKind::Q {
            return None;
        }
        let first = kids.iter().position(|&c| self.span[c as usize].0 == lo)?;
        let last = kids
            .iter()
            .position(|&c| self.span[c as usize].1 == hi + 1)?;
        Some(Region {
            node: x,
            first,
            last,
        })
    }

    /// The children of a region, in stored order.
    pub fn region_children(&self, r: Region) -> &[u32] {
        let kids = &self.children[r.node as usize];
        if kids.is_empty() {
            return kids;
        }
        &kids[r.first..=r.last]
    }

    /// Whether the region is the whole node.
    pub fn is_whole(&self, r: Region) -> bool {
        r.first == 0 && r.last + 1 >= self.children[r.node as usize].len()
    }
}
