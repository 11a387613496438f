//! REDUCE: validation, the bottom-up template pass, and commit/rollback.

use super::PqTree;
use super::bubble::Pseudo;
use super::error::PqError;
use super::node::{Label, Mark, NIL, Shape};

/// Internal "no template applies" signal, mapped to [`PqError::Infeasible`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fail;

/// Result of one template step.
pub(crate) type Step = Result<(), Fail>;

impl PqTree {
    /// Restricts the tree to the permutations in which the leaves of `set` are
    /// consecutive (Booth–Lueker REDUCE).
    ///
    /// Costs O(|set| + size of the pertinent subtree), independent of the
    /// size of the rest of the tree. Sets with 0, 1 or all leaves are always
    /// satisfiable and leave the tree unchanged.
    ///
    /// # Errors
    /// [`PqError::LeafOutOfRange`] or [`PqError::DuplicateLeaf`] for a malformed
    /// set, [`PqError::Infeasible`] when no allowed permutation keeps `set`
    /// consecutive. On any error the tree is exactly as before the call
    /// (same structure, same node ids), so a constraint can be tried safely.
    pub fn reduce(&mut self, set: &[usize]) -> Result<(), PqError> {
        self.begin();
        let n = self.leaves;
        for &leaf in set {
            if leaf >= n {
                return Err(PqError::LeafOutOfRange {
                    leaf,
                    num_leaves: n,
                });
            }
            // Leaf ids fit in u32 because `new` caps the leaf count.
            let id = leaf as u32;
            if self.stamped(id) {
                return Err(PqError::DuplicateLeaf { leaf });
            }
            self.scm(id).mark = Mark::Queued;
        }
        if set.len() <= 1 || set.len() == n {
            return Ok(());
        }
        let outcome = self
            .bubble(set)
            .and_then(|pseudo| self.reduce_pass(set, pseudo));
        match outcome {
            Ok(()) => {
                self.commit();
                Ok(())
            }
            Err(Fail) => {
                self.rollback();
                Err(PqError::Infeasible)
            }
        }
    }

    /// Alias of [`reduce`](Self::reduce), which already rolls back on failure;
    /// kept so planner code can say "try this constraint" explicitly.
    ///
    /// # Errors
    /// As [`reduce`](Self::reduce).
    pub fn try_reduce(&mut self, set: &[usize]) -> Result<(), PqError> {
        self.reduce(set)
    }

    /// Processes pertinent nodes bottom-up, each once all its pertinent
    /// children are done, applying the first matching template.
    fn reduce_pass(&mut self, set: &[usize], pseudo: Option<Pseudo>) -> Step {
        // |set| <= num_leaves <= MAX_LEAVES fits in u32.
        let total = set.len() as u32;
        self.work.queue.clear();
        for &leaf in set {
            self.scm(leaf as u32).pert_leaves = 1;
            self.work.queue.push_back(leaf as u32);
        }
        while let Some(x) = self.work.queue.pop_front() {
            let leaves = self.sc(x).pert_leaves;
            if leaves == total {
                self.template_root(x)?;
                if let Some(p) = pseudo {
                    self.unpseudo(p);
                }
                return Ok(());
            }
            // BUBBLE gave every non-root pertinent node a valid parent.
            let y = self.nodes[x as usize].parent;
            if y == NIL {
                return Err(Fail);
            }
            let s = self.scm(y);
            s.pert_leaves += leaves;
            s.pert_children -= 1;
            if s.pert_children == 0 {
                self.work.queue.push_back(y);
            }
            self.template_nonroot(x, y)?;
        }
        // The pertinent root is always reached after a successful BUBBLE.
        Err(Fail)
    }

    /// Templates for a node below the pertinent root: L1, P1, P3, P5, Q1, Q2.
    fn template_nonroot(&mut self, x: u32, y: u32) -> Step {
        match self.nodes[x as usize].shape {
            Shape::Leaf => {
                self.add_full(x, y);
                Ok(())
            }
            Shape::P => self.p_nonroot(x, y),
            Shape::Q => self.q_nonroot(x, y),
        }
    }

    /// Templates for the pertinent root: P1, P2, P4, P6, Q1, Q2, Q3.
    fn template_root(&mut self, x: u32) -> Step {
        match self.nodes[x as usize].shape {
            Shape::Leaf => Ok(()),
            Shape::P => self.p_root(x),
            Shape::Q => self.q_root(x),
        }
    }

    /// Labels `x` full and files it under its parent `y`.
    pub(crate) fn add_full(&mut self, x: u32, y: u32) {
        let head = self.scm(y).full_head;
        let s = self.scm(x);
        s.label = Label::Full;
        s.next = head;
        let p = self.scm(y);
        p.full_head = x;
        p.full_count += 1;
    }

    /// The first two partial children of `x` (NIL where absent). Read before
    /// any template runs: filing a node under a new parent reuses `next`.
    pub(crate) fn partials(&self, x: u32) -> [u32; 2] {
        let first = self.sc(x).partial_head;
        let second = if first == NIL {
            NIL
        } else {
            self.sc(first).next
        };
        [first, second]
    }

    /// Labels `x` (singly) partial and files it under its parent `y`.
    pub(crate) fn add_partial(&mut self, x: u32, y: u32) {
        let head = self.scm(y).partial_head;
        let s = self.scm(x);
        s.label = Label::Partial;
        s.next = head;
        let p = self.scm(y);
        p.partial_head = x;
        p.partial_count = p.partial_count.saturating_add(1);
    }
}
