//! Bracket notation: P-node `{a b c}`, Q-node `[a b c]`, leaves as numbers.
//!
//! `Display` prints the stored order. [`PqTree::canonical_string`] prints a
//! normal form that is equal for equivalent trees (same P/Q structure up to
//! permuting P-children and reversing Q-nodes), for tests and debugging.

use std::fmt;

use super::PqTree;
use super::node::Shape;

impl PqTree {
    /// Bracket notation with P-children sorted by their smallest leaf and each
    /// Q-node oriented so the end with the smaller smallest leaf comes first.
    /// O(n log n).
    pub fn canonical_string(&self) -> String {
        let min_leaf = self.min_leaves();
        let mut out = String::new();
        self.write_brackets(&mut out, |x, kids| match self.nodes[x as usize].shape {
            Shape::P => kids.sort_by_key(|&c| min_leaf[c as usize]),
            Shape::Q => {
                if let (Some(&a), Some(&b)) = (kids.first(), kids.last())
                    && min_leaf[b as usize] < min_leaf[a as usize]
                {
                    kids.reverse();
                }
            }
            Shape::Leaf => {}
        });
        out
    }

    /// Smallest leaf below each reachable node, indexed by arena id.
    fn min_leaves(&self) -> Vec<usize> {
        let mut min_leaf = vec![usize::MAX; self.nodes.len()];
        // Pre-order, then children-before-parents by walking it backwards.
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut stack = vec![self.root];
        while let Some(x) = stack.pop() {
            order.push(x);
            self.for_each_child(x, |c| stack.push(c));
        }
        for &x in order.iter().rev() {
            let m = if self.nodes[x as usize].shape == Shape::Leaf {
                x as usize
            } else {
                let mut m = usize::MAX;
                self.for_each_child(x, |c| m = m.min(min_leaf[c as usize]));
                m
            };
            min_leaf[x as usize] = m;
        }
        min_leaf
    }

    /// Writes the tree, letting `arrange` reorder each node's children.
    fn write_brackets(&self, out: &mut String, mut arrange: impl FnMut(u32, &mut Vec<u32>)) {
        use fmt::Write;
        // An explicit stack: trees can be as deep as they have leaves.
        enum Item {
            Open(u32, bool),
            Close(char),
        }
        let mut stack = vec![Item::Open(self.root, true)];
        let mut kids = Vec::new();
        while let Some(item) = stack.pop() {
            let (x, first) = match item {
                Item::Close(c) => {
                    out.push(c);
                    continue;
                }
                Item::Open(x, first) => (x, first),
            };
            if !first {
                out.push(' ');
            }
            let shape = self.nodes[x as usize].shape;
            let (open, close) = match shape {
                Shape::Leaf => {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "{x}");
                    continue;
                }
                Shape::P => ('{', '}'),
                Shape::Q => ('[', ']'),
            };
            out.push(open);
            kids.clear();
            self.for_each_child(x, |c| kids.push(c));
            arrange(x, &mut kids);
            stack.push(Item::Close(close));
            for (i, &c) in kids.iter().enumerate().rev() {
                stack.push(Item::Open(c, i == 0));
            }
        }
    }
}

impl fmt::Display for PqTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        self.write_brackets(&mut out, |_, _| {});
        f.write_str(&out)
    }
}
