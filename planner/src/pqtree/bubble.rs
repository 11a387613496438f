//! BUBBLE: find the pertinent subtree and give its nodes valid parent pointers.
//!
//! Interior children of a Q-node may hold stale parent pointers, so a node
//! learns its parent from an unblocked sibling or, if it is endmost or a
//! P-child, from its own pointer; otherwise it stays *blocked* until a
//! neighbour unblocks the whole consecutive run. Only pertinent nodes (and
//! their immediate siblings, read but not walked) are visited.
//!
//! If the run ends with exactly one block of several blocked nodes, they are
//! the consecutive pertinent children of an unidentified Q-node: they are cut
//! out into a temporary Q *pseudonode* which then acts as the pertinent root,
//! and are spliced back afterwards ([`Pseudo`]).

use super::PqTree;
use super::node::{Mark, NIL, Shape};
use super::reduce::Fail;

/// A pseudonode standing in for the unknown Q-node around a blocked run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pseudo {
    pub(crate) node: u32,
    /// The run's end nodes when it was cut out.
    pub(crate) inner: [u32; 2],
    /// Their neighbours outside the run (never NIL: see `make_pseudo`).
    pub(crate) outer: [u32; 2],
}

impl PqTree {
    /// Runs BUBBLE over the (validated, already `Queued`-marked) leaves of `set`.
    pub(crate) fn bubble(&mut self, set: &[usize]) -> Result<Option<Pseudo>, Fail> {
        self.work.queue.clear();
        self.work.processed.clear();
        // Leaf ids are < num_leaves <= MAX_LEAVES, so they fit in u32.
        self.work.queue.extend(set.iter().map(|&l| l as u32));
        let mut block_count = 0usize;
        let mut blocked_nodes = 0usize;
        let mut off_the_top = false;
        while self.work.queue.len() + block_count + usize::from(off_the_top) > 1 {
            let Some(x) = self.work.queue.pop_front() else {
                return Err(Fail);
            };
            self.work.processed.push(x);
            self.scm(x).mark = Mark::Blocked;
            let node = self.nodes[x as usize];
            let siblings = if node.in_q { node.sib } else { [NIL, NIL] };
            let (mut blocked_sib, mut blocked_sibs, mut unblocked_sib, mut sib_count) =
                (NIL, 0usize, NIL, 0usize);
            for s in siblings.into_iter().filter(|&s| s != NIL) {
                sib_count += 1;
                match self.mark(s) {
                    Mark::Blocked => {
                        blocked_sib = s;
                        blocked_sibs += 1;
                    }
                    Mark::Unblocked => unblocked_sib = s,
                    Mark::Unmarked | Mark::Queued => {}
                }
            }
            let unblocked = if unblocked_sib != NIL {
                let p = self.nodes[unblocked_sib as usize].parent;
                self.w(x).parent = p;
                true
            } else {
                sib_count < 2
            };
            if !unblocked {
                // x starts a block, extends one, or joins two into one.
                block_count = block_count + 1 - blocked_sibs;
                blocked_nodes += 1;
                continue;
            }
            self.scm(x).mark = Mark::Unblocked;
            let y = self.nodes[x as usize].parent;
            if blocked_sib != NIL {
                // An unblocked node has at most one blocked sibling: it is
                // endmost, or its other sibling is the unblocked one.
                block_count -= 1;
                let (mut prev, mut cur) = (x, blocked_sib);
                while cur != NIL && self.mark(cur) == Mark::Blocked {
                    self.scm(cur).mark = Mark::Unblocked;
                    self.w(cur).parent = y;
                    self.scm(y).pert_children += 1;
                    blocked_nodes -= 1;
                    let next = self.other(cur, prev);
                    prev = cur;
                    cur = next;
                }
            }
            if y == NIL {
                off_the_top = true;
            } else {
                let s = self.scm(y);
                s.pert_children += 1;
                if s.mark == Mark::Unmarked {
                    s.mark = Mark::Queued;
                    self.work.queue.push_back(y);
                }
            }
        }
        // The loop left queue + blocks + off_the_top <= 1, so Booth–Lueker's
        // final "several blocks, or a block and a path off the top" failure is
        // already covered by the empty-queue exit above. One block of several
        // nodes is the pertinent children of an unknown Q-node; a single
        // blocked node is simply the pertinent root.
        if block_count == 1 && blocked_nodes > 1 {
            return Ok(Some(self.make_pseudo()));
        }
        Ok(None)
    }

    /// Cuts the single remaining block out into a pseudonode.
    fn make_pseudo(&mut self) -> Pseudo {
        let start = self
            .work
            .processed
            .iter()
            .copied()
            .find(|&p| self.mark(p) == Mark::Blocked)
            // block_count == 1: some dequeued node is still blocked.
            .unwrap_or(NIL);
        debug_assert_ne!(start, NIL, "block_count == 1 but no blocked node");
        let mut inner = [start; 2];
        let mut outer = [NIL; 2];
        for d in 0..2 {
            let (mut prev, mut cur) = (start, self.nodes[start as usize].sib[d]);
            while cur != NIL && self.mark(cur) == Mark::Blocked {
                let next = self.other(cur, prev);
                prev = cur;
                cur = next;
            }
            inner[d] = prev;
            outer[d] = cur;
        }
        // A blocked node has two immediate siblings (an endmost one would have
        // been unblocked), so both outer neighbours exist.
        debug_assert!(!outer.contains(&NIL));
        let ps = self.alloc(Shape::Q);
        self.relink(inner[0], outer[0], NIL);
        self.relink(inner[1], outer[1], NIL);
        self.w(ps).ends = inner;
        let (mut prev, mut cur, mut len) = (NIL, inner[0], 0u32);
        while cur != NIL {
            let c = self.w(cur);
            c.parent = ps;
            len += 1;
            let next = self.other(cur, prev);
            prev = cur;
            cur = next;
        }
        let s = self.scm(ps);
        s.pert_children = len;
        s.mark = Mark::Queued;
        Pseudo {
            node: ps,
            inner,
            outer,
        }
    }

    /// Splices the pseudonode's (possibly restructured) children back between
    /// the recorded outer neighbours and frees it.
    pub(crate) fn unpseudo(&mut self, p: Pseudo) {
        let ends = self.nodes[p.node as usize].ends;
        for ((outer, inner), end) in p.outer.into_iter().zip(p.inner).zip(ends) {
            self.relink(outer, inner, end);
            self.relink(end, NIL, outer);
        }
        self.release(p.node);
    }
}
