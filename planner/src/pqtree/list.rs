//! Child-list primitives over the unordered sibling links.
//!
//! Every operation is O(1) and goes through the logged writer, so templates
//! built from them are automatically undoable. Parent pointers are written
//! only where the Booth–Lueker invariant needs them valid: children of
//! P-nodes and endmost children of Q-nodes.

use super::PqTree;
use super::node::{Label, NIL, Shape};

impl PqTree {
    /// The sibling of `node` that is not `prev` (walks a list from either end).
    pub(crate) fn other(&self, node: u32, prev: u32) -> u32 {
        let s = self.nodes[node as usize].sib;
        if s[0] == prev { s[1] } else { s[0] }
    }

    /// Replaces the link `old` of `node` by `new` (`old` may be NIL: a free slot).
    pub(crate) fn relink(&mut self, node: u32, old: u32, new: u32) {
        let s = &mut self.w(node).sib;
        if s[0] == old {
            s[0] = new;
        } else {
            debug_assert_eq!(s[1], old, "relink: {old} is not a sibling of {node}");
            s[1] = new;
        }
    }

    /// Removes `child` from the child list of the P-node `parent`.
    pub(crate) fn detach(&mut self, parent: u32, child: u32) {
        debug_assert_eq!(self.nodes[parent as usize].shape, Shape::P);
        let [a, b] = self.nodes[child as usize].sib;
        if a != NIL {
            self.relink(a, child, b);
        }
        if b != NIL {
            self.relink(b, child, a);
        }
        // Only an endmost child can be in `ends`; its single neighbour (or NIL
        // for an only child) becomes the new end.
        let neighbour = if a == NIL { b } else { a };
        let ends = self.nodes[parent as usize].ends;
        for (k, &end) in ends.iter().enumerate() {
            if end == child {
                self.w(parent).ends[k] = neighbour;
            }
        }
        self.w(parent).count -= 1;
        self.w(child).sib = [NIL, NIL];
    }

    /// Appends the detached `child` at end `k` of `parent`'s child list.
    pub(crate) fn push_end(&mut self, parent: u32, child: u32, k: usize) {
        let old = self.nodes[parent as usize].ends[k];
        if old == NIL {
            self.w(parent).ends = [child, child];
            self.w(child).sib = [NIL, NIL];
        } else {
            self.relink(old, NIL, child);
            self.w(child).sib = [old, NIL];
            self.w(parent).ends[k] = child;
        }
        let in_q = self.nodes[parent as usize].shape == Shape::Q;
        let c = self.w(child);
        c.parent = parent;
        c.in_q = in_q;
        self.w(parent).count += 1;
    }

    /// Puts the detached node `new` in `old`'s place (in its parent, or as root).
    pub(crate) fn replace(&mut self, old: u32, new: u32) {
        let o = self.nodes[old as usize];
        for s in o.sib {
            if s != NIL {
                self.relink(s, old, new);
            }
        }
        if old == self.root {
            self.root = new;
        } else if o.sib.contains(&NIL) {
            // `old` is endmost (or a P-child), so its parent pointer is valid.
            let p = o.parent;
            let ends = self.nodes[p as usize].ends;
            for (k, &end) in ends.iter().enumerate() {
                if end == old {
                    self.w(p).ends[k] = new;
                }
            }
        }
        let n = self.w(new);
        n.sib = o.sib;
        n.parent = o.parent;
        n.in_q = o.in_q;
        let d = self.w(old);
        d.sib = [NIL, NIL];
        d.parent = NIL;
        d.in_q = false;
    }

    /// Which end slot of the partial Q-node `q` holds its full endmost child.
    pub(crate) fn full_slot(&self, q: u32) -> usize {
        let ends = self.nodes[q as usize].ends;
        if self.label(ends[0]) == Label::Full {
            0
        } else {
            debug_assert_eq!(
                self.label(ends[1]),
                Label::Full,
                "partial node {q} has no full end"
            );
            1
        }
    }

    /// Splices the children of the partial Q-node `p` into the Q-node `x` in
    /// `p`'s place, full end next to `toward` (one of `p`'s siblings, or NIL to
    /// put the full end at `x`'s end). Frees `p`.
    pub(crate) fn merge_partial(&mut self, x: u32, p: u32, toward: u32) {
        let k = self.full_slot(p);
        let ends = self.nodes[p as usize].ends;
        let away = self.other(p, toward);
        self.attach_in_place(x, p, ends[k], toward);
        self.attach_in_place(x, p, ends[1 - k], away);
        self.release(p);
    }

    /// Links `p`'s endmost child `c` to `p`'s former neighbour `nb`, or makes
    /// it an end of `x` when `nb` is NIL.
    fn attach_in_place(&mut self, x: u32, p: u32, c: u32, nb: u32) {
        if nb != NIL {
            self.relink(nb, p, c);
            self.relink(c, NIL, nb);
        } else {
            let ends = self.nodes[x as usize].ends;
            debug_assert!(ends.contains(&p), "{p} is not an end of {x}");
            let slot = if ends[0] == p { 0 } else { 1 };
            self.w(x).ends[slot] = c;
            self.w(c).parent = x;
        }
    }
}
