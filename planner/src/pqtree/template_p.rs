//! P-node templates P1–P6.
//!
//! Costs are proportional to the number of full and partial children: empty
//! children are never moved. Where a template needs "a P-node of the empty
//! children", the processed node itself is reused after its full and partial
//! children have been taken out.

use super::PqTree;
use super::node::{Label, NIL, Shape};
use super::reduce::{Fail, Step};

impl PqTree {
    /// P-node `x` below the pertinent root, with parent `y`.
    pub(crate) fn p_nonroot(&mut self, x: u32, y: u32) -> Step {
        let s = self.sc(x);
        let count = self.nodes[x as usize].count;
        match s.partial_count {
            0 if s.full_count == count => {
                // P1: all children full.
                self.add_full(x, y);
                Ok(())
            }
            0 => {
                self.p3(x, y);
                Ok(())
            }
            1 => {
                self.p5(x, y, s.partial_head);
                Ok(())
            }
            _ => Err(Fail),
        }
    }

    /// P-node `x` that is the pertinent root.
    pub(crate) fn p_root(&mut self, x: u32) -> Step {
        let s = self.sc(x);
        let count = self.nodes[x as usize].count;
        match s.partial_count {
            // P1 at the root: the whole subtree is the set; nothing to do.
            0 if s.full_count == count => Ok(()),
            0 => {
                self.p2(x);
                Ok(())
            }
            1 => {
                self.p4(x, s.partial_head);
                Ok(())
            }
            2 => {
                let [q1, q2] = self.partials(x);
                self.p6(x, q1, q2);
                Ok(())
            }
            _ => Err(Fail),
        }
    }

    /// Detaches the full children of `x` and returns them as one node: the
    /// single full child, a new full P-node holding them, or NIL if none.
    fn gather_full(&mut self, x: u32) -> u32 {
        let s = self.sc(x);
        match s.full_count {
            0 => NIL,
            1 => {
                self.detach(x, s.full_head);
                s.full_head
            }
            _ => {
                let f = self.alloc(Shape::P);
                self.scm(f).label = Label::Full;
                let mut c = s.full_head;
                while c != NIL {
                    let next = self.sc(c).next;
                    self.detach(x, c);
                    self.push_end(f, c, 1);
                    c = next;
                }
                f
            }
        }
    }

    /// Given the detached P-node `x` holding only empty children, returns them
    /// as one node (`x` itself, its only child, or NIL), freeing `x` if unused.
    fn empty_part(&mut self, x: u32) -> u32 {
        match self.nodes[x as usize].count {
            0 => {
                self.release(x);
                NIL
            }
            1 => {
                let c = self.nodes[x as usize].ends[0];
                self.detach(x, c);
                self.release(x);
                c
            }
            _ => {
                self.scm(x).label = Label::Empty;
                x
            }
        }
    }

    /// P2: root with full and empty children: group the full ones under one child.
    fn p2(&mut self, x: u32) {
        if self.sc(x).full_count >= 2 {
            let f = self.gather_full(x);
            self.push_end(x, f, 1);
        }
    }

    /// P3: non-root with full and empty children becomes a partial Q-node
    /// `[empties, fulls]`.
    fn p3(&mut self, x: u32, y: u32) {
        let f = self.gather_full(x);
        let z = self.alloc(Shape::Q);
        self.replace(x, z);
        let e = self.empty_part(x);
        self.push_end(z, e, 0);
        self.push_end(z, f, 1);
        self.add_partial(z, y);
    }

    /// P4: root with one partial child `q`: the full children join `q` at its
    /// full end.
    fn p4(&mut self, x: u32, q: u32) {
        let f = self.gather_full(x);
        if f != NIL {
            let k = self.full_slot(q);
            self.push_end(q, f, k);
        }
        self.collapse_if_single(x, q);
    }

    /// P5: non-root with one partial child `q`: `q` takes `x`'s place, with the
    /// full children at its full end and the empty ones at its empty end.
    fn p5(&mut self, x: u32, y: u32, q: u32) {
        self.detach(x, q);
        let f = self.gather_full(x);
        self.replace(x, q);
        let e = self.empty_part(x);
        let k = self.full_slot(q);
        if f != NIL {
            self.push_end(q, f, k);
        }
        if e != NIL {
            self.push_end(q, e, 1 - k);
        }
        self.add_partial(q, y);
    }

    /// P6: root with two partial children: `q1`, the full children and `q2`
    /// (reversed) are concatenated into `q1`, full ends facing each other.
    fn p6(&mut self, x: u32, q1: u32, q2: u32) {
        let f = self.gather_full(x);
        let k1 = self.full_slot(q1);
        let k2 = self.full_slot(q2);
        self.detach(x, q2);
        if f != NIL {
            self.push_end(q1, f, k1);
        }
        let g = self.nodes[q1 as usize].ends[k1];
        let [f2, e2] = {
            let ends = self.nodes[q2 as usize].ends;
            [ends[k2], ends[1 - k2]]
        };
        self.relink(g, NIL, f2);
        self.relink(f2, NIL, g);
        self.w(q1).ends[k1] = e2;
        self.w(e2).parent = q1;
        self.release(q2);
        self.collapse_if_single(x, q1);
    }

    /// Replaces the root P-node `x` by `q` when `q` is its only child left.
    fn collapse_if_single(&mut self, x: u32, q: u32) {
        if self.nodes[x as usize].count == 1 {
            self.detach(x, q);
            self.replace(x, q);
            self.release(x);
        }
    }
}
