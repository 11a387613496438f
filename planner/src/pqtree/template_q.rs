//! Q-node templates Q1–Q3.
//!
//! A Q-node's child count is not maintained (see `Node::count`), so every
//! check is phrased in terms of the *pertinent run*: the maximal stretch of
//! pertinent children around a full child, which is walked in
//! O(pertinent children). The run must contain every full and partial child,
//! and partial children may only sit at its ends; their own orientation is
//! free (a child Q-node may be reversed), so merging one just points its full
//! end towards the run.

use super::PqTree;
use super::node::{Label, NIL};
use super::reduce::{Fail, Step};

/// The pertinent children of a Q-node as one run.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// The run's first and last child.
    end: [u32; 2],
    /// The children just outside the run (NIL at the Q-node's ends).
    outer: [u32; 2],
}

impl PqTree {
    /// Q-node `x` below the pertinent root, with parent `y`: Q1 or Q2.
    pub(crate) fn q_nonroot(&mut self, x: u32, y: u32) -> Step {
        let s = self.sc(x);
        if s.partial_count > 1 {
            return Err(Fail);
        }
        let run = self.q_run(x)?;
        if s.full_count > 0 {
            if s.partial_count == 0 && run.outer == [NIL, NIL] {
                // Q1: all children full.
                self.add_full(x, y);
                return Ok(());
            }
            // Q2: the full children must reach one end of x.
            let anchored =
                (0..2).any(|d| run.outer[d] == NIL && self.label(run.end[d]) == Label::Full);
            if !anchored {
                return Err(Fail);
            }
            if s.partial_count == 1 {
                let p = s.partial_head;
                let toward = self.pertinent_sibling(p);
                self.merge_partial(x, p, toward);
            }
        } else {
            // Q2 with a lone partial child: it must be endmost, and its full
            // end becomes x's full end. (BUBBLE already guarantees this: a
            // lone interior pertinent child stays blocked and becomes the
            // pertinent root. Checked anyway since a wrong merge would corrupt
            // the tree.)
            if !run.outer.contains(&NIL) {
                return Err(Fail);
            }
            self.merge_partial(x, s.partial_head, NIL);
        }
        self.add_partial(x, y);
        Ok(())
    }

    /// Q-node `x` that is the pertinent root (or the pseudonode): Q1, Q2, Q3.
    pub(crate) fn q_root(&mut self, x: u32) -> Step {
        let s = self.sc(x);
        if s.partial_count > 2 {
            return Err(Fail);
        }
        self.q_run(x)?;
        if s.full_count == 0 && s.partial_count < 2 {
            // A root has at least two pertinent children; nothing to merge.
            return Ok(());
        }
        let partials = self.partials(x);
        for &p in partials.iter().take(usize::from(s.partial_count)) {
            // Re-read per partial: merging the first changes the second's
            // neighbour when the two are adjacent.
            let toward = self.pertinent_sibling(p);
            self.merge_partial(x, p, toward);
        }
        Ok(())
    }

    /// The sibling of the run-end `p` that lies inside the run.
    fn pertinent_sibling(&self, p: u32) -> u32 {
        let sib = self.nodes[p as usize].sib;
        sib.into_iter()
            .find(|&s| s != NIL && self.label(s) != Label::Empty)
            .unwrap_or(NIL)
    }

    /// The pertinent run of `x`, or `Fail` if the pertinent children are not
    /// consecutive with partial children only at the ends.
    fn q_run(&self, x: u32) -> Result<Run, Fail> {
        let s = self.sc(x);
        let want = s.full_count + u32::from(s.partial_count);
        if s.full_count == 0 {
            return match s.partial_count {
                1 => {
                    let p = s.partial_head;
                    Ok(Run {
                        end: [p, p],
                        outer: self.nodes[p as usize].sib,
                    })
                }
                2 => {
                    let [p0, p1] = self.partials(x);
                    if !self.nodes[p0 as usize].sib.contains(&p1) {
                        return Err(Fail);
                    }
                    Ok(Run {
                        end: [p0, p1],
                        outer: [self.other(p0, p1), self.other(p1, p0)],
                    })
                }
                _ => Err(Fail),
            };
        }
        let c = s.full_head;
        let mut len = 1;
        let mut run = Run {
            end: [c, c],
            outer: [NIL, NIL],
        };
        for d in 0..2 {
            let (mut prev, mut cur) = (c, self.nodes[c as usize].sib[d]);
            while cur != NIL {
                let label = self.label(cur);
                if label == Label::Empty {
                    break;
                }
                len += 1;
                if len > want {
                    return Err(Fail);
                }
                let next = self.other(cur, prev);
                prev = cur;
                cur = next;
                if label == Label::Partial {
                    break;
                }
            }
            run.end[d] = prev;
            run.outer[d] = cur;
        }
        if len == want { Ok(run) } else { Err(Fail) }
    }
}
