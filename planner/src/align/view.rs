//! Flat, printable copies of the PQ-tree for `planner explain`.
//!
//! Stored flat (not as nested enums) so that deep trees neither overflow the
//! stack when printed nor when dropped.

use super::decide::{Decisions, ordered_children};
use super::snapshot::{SKind, Snap};

/// Kind of a [`TreeView`] node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewKind {
    /// A variable.
    Leaf(usize),
    /// Children in any order, printed `{a b}`.
    P,
    /// Children in this order or its reverse, printed `[a b c]`.
    Q,
}

/// One node of a [`TreeView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewNode {
    /// What the node is.
    pub kind: ViewKind,
    /// Child node indices, in the order printed.
    pub children: Vec<usize>,
    /// For a decided tree: `true` when the node's children are printed in
    /// an order other than the stored one (a reversed Q-node, a permuted
    /// P-node).
    pub reordered: bool,
}

/// A PQ-tree as printable data; node 0 is the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeView {
    /// Nodes; node 0 is the root.
    pub nodes: Vec<ViewNode>,
}

impl TreeView {
    /// The tree in stored order.
    pub(crate) fn stored(snap: &Snap) -> TreeView {
        let nodes = (0..snap.len())
            .map(|x| ViewNode {
                kind: view_kind(snap.kind[x]),
                children: snap.children[x].iter().map(|&c| c as usize).collect(),
                reordered: false,
            })
            .collect();
        TreeView { nodes }
    }

    /// The tree with each node's children in decided order.
    pub(crate) fn decided(snap: &Snap, d: &mut Decisions) -> TreeView {
        let nodes = (0..snap.len())
            .map(|x| {
                let kids = ordered_children(snap, d, x as u32);
                ViewNode {
                    kind: view_kind(snap.kind[x]),
                    reordered: kids != snap.children[x],
                    children: kids.into_iter().map(|c| c as usize).collect(),
                }
            })
            .collect();
        TreeView { nodes }
    }

    /// Bracket notation with each leaf printed by `name`; a reordered node
    /// gets a trailing `*`.
    pub fn render(&self, name: &dyn Fn(usize) -> String) -> String {
        enum Item {
            Open(usize, bool),
            Close(&'static str),
        }
        let mut out = String::new();
        if self.nodes.is_empty() {
            return out;
        }
        let mut stack = vec![Item::Open(0, true)];
        while let Some(item) = stack.pop() {
            let (x, first) = match item {
                Item::Close(c) => {
                    out.push_str(c);
                    continue;
                }
                Item::Open(x, first) => (x, first),
            };
            if !first {
                out.push(' ');
            }
            let node = &self.nodes[x];
            let (open, close) = match (&node.kind, node.reordered) {
                (ViewKind::Leaf(v), _) => {
                    out.push_str(&name(*v));
                    continue;
                }
                (ViewKind::P, false) => ("{", "}"),
                (ViewKind::P, true) => ("{", "}*"),
                (ViewKind::Q, false) => ("[", "]"),
                (ViewKind::Q, true) => ("[", "]*"),
            };
            out.push_str(open);
            stack.push(Item::Close(close));
            for (i, &c) in node.children.iter().enumerate().rev() {
                stack.push(Item::Open(c, i == 0));
            }
        }
        out
    }
}

fn view_kind(k: SKind) -> ViewKind {
    match k {
        SKind::Leaf(v) => ViewKind::Leaf(v),
        SKind::P => ViewKind::P,
        SKind::Q => ViewKind::Q,
    }
}
