//! Per-reduction working state: generation stamps and the undo log.
//!
//! Every structural write during a reduction goes through [`PqTree::w`], which
//! pushes the node's pre-image to the log the first time the node is touched in
//! that reduction. Nodes appended to the arena need no pre-image (rollback
//! truncates the arena), nodes taken from the free list are recorded so they
//! can be handed back, and nodes freed by a template are only queued
//! (`to_free`) until the reduction commits. Rolling back therefore restores the
//! exact arena, root and free list of the call's start, at a cost proportional
//! to the number of nodes touched, i.e. to the pertinent subtree.

use std::collections::VecDeque;

use super::PqTree;
use super::node::{Label, Mark, Node, Scratch, Shape};

/// One undo-log entry.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Undo {
    /// Pre-image of a node that existed when the reduction started.
    Node(u32, Node),
    /// A node id popped from the free list.
    FreePop(u32),
}

/// Buffers reused across reductions so a reduction allocates nothing in the
/// steady state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Work {
    /// Current reduction's generation (>= 1 once a reduction started);
    /// scratch records with another stamp are stale. `u32` keeps the scratch
    /// record small (cache misses dominate on large trees).
    pub(crate) generation: u32,
    pub(crate) scratch: Vec<Scratch>,
    /// Per node, the generation in which its pre-image was logged (kept apart
    /// from `scratch` because only writes need it).
    pub(crate) logged: Vec<u32>,
    pub(crate) log: Vec<Undo>,
    /// Arena length when the reduction started.
    pub(crate) arena_len: usize,
    pub(crate) root_before: u32,
    /// Nodes released by templates, recycled only once the reduction commits.
    pub(crate) to_free: Vec<u32>,
    pub(crate) queue: VecDeque<u32>,
    /// Nodes BUBBLE dequeued, searched for the blocked ones of a pseudonode.
    pub(crate) processed: Vec<u32>,
}

impl PqTree {
    /// Opens a reduction: new generation, empty log.
    pub(crate) fn begin(&mut self) {
        let work = &mut self.work;
        if work.generation == u32::MAX {
            // Once per 2^32 reductions: clear all stamps so that stale ones
            // cannot alias the restarted generation numbers.
            for s in &mut work.scratch {
                s.stamp = 0;
            }
            work.logged.fill(0);
            work.generation = 0;
        }
        work.generation += 1;
        work.log.clear();
        work.to_free.clear();
        work.arena_len = self.nodes.len();
        work.root_before = self.root;
        if work.scratch.len() < self.nodes.len() {
            work.scratch.resize(self.nodes.len(), Scratch::default());
            work.logged.resize(self.nodes.len(), 0);
        }
    }

    /// Whether `id` has been touched in the current reduction.
    pub(crate) fn stamped(&self, id: u32) -> bool {
        self.work.scratch[id as usize].stamp == self.work.generation
    }

    /// Copy of the node's scratch record (the default when stale).
    pub(crate) fn sc(&self, id: u32) -> Scratch {
        let s = self.work.scratch[id as usize];
        if s.stamp == self.work.generation {
            s
        } else {
            Scratch::default()
        }
    }

    /// The node's scratch record for writing, reset first when stale.
    pub(crate) fn scm(&mut self, id: u32) -> &mut Scratch {
        let generation = self.work.generation;
        let s = &mut self.work.scratch[id as usize];
        if s.stamp != generation {
            s.reset(generation);
        }
        s
    }

    pub(crate) fn label(&self, id: u32) -> Label {
        self.sc(id).label
    }

    pub(crate) fn mark(&self, id: u32) -> Mark {
        self.sc(id).mark
    }

    /// Structural write access, logging the pre-image on first touch.
    pub(crate) fn w(&mut self, id: u32) -> &mut Node {
        let i = id as usize;
        if i < self.work.arena_len {
            let generation = self.work.generation;
            let logged = &mut self.work.logged[i];
            if *logged != generation {
                *logged = generation;
                self.work.log.push(Undo::Node(id, self.nodes[i]));
            }
        }
        &mut self.nodes[i]
    }

    /// A fresh detached node, recycled from the free list when possible.
    pub(crate) fn alloc(&mut self, shape: Shape) -> u32 {
        let id = match self.free.pop() {
            Some(id) => {
                self.work.log.push(Undo::FreePop(id));
                *self.w(id) = Node::new(shape);
                id
            }
            None => {
                // Cannot overflow u32: `new` caps the leaf count so that the
                // arena (< 2 * leaves + a few temporaries) stays below NIL.
                let id = self.nodes.len() as u32;
                self.nodes.push(Node::new(shape));
                if self.work.scratch.len() < self.nodes.len() {
                    self.work.scratch.push(Scratch::default());
                    self.work.logged.push(0);
                }
                id
            }
        };
        let generation = self.work.generation;
        self.work.scratch[id as usize].reset(generation);
        id
    }

    /// Frees `id` once the reduction commits.
    pub(crate) fn release(&mut self, id: u32) {
        self.work.to_free.push(id);
    }

    /// Makes the reduction permanent.
    pub(crate) fn commit(&mut self) {
        self.free.append(&mut self.work.to_free);
        self.work.log.clear();
    }

    /// Restores the arena, root and free list of the reduction's start.
    pub(crate) fn rollback(&mut self) {
        while let Some(entry) = self.work.log.pop() {
            match entry {
                Undo::Node(id, node) => self.nodes[id as usize] = node,
                Undo::FreePop(id) => self.free.push(id),
            }
        }
        self.nodes.truncate(self.work.arena_len);
        self.root = self.work.root_before;
        self.work.to_free.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::super::PqTree;

    /// Regression guard for the u32 generation counter wrapping around.
    #[test]
    fn generation_wraparound_keeps_results() {
        let sets: [&[usize]; 6] = [&[0, 1], &[2, 3], &[1, 2], &[0, 2], &[4, 5], &[3, 4]];
        let mut fresh = PqTree::new(6).unwrap();
        let mut wrapped = PqTree::new(6).unwrap();
        wrapped.work.generation = u32::MAX - 2;
        for s in sets {
            assert_eq!(fresh.reduce(s), wrapped.reduce(s));
        }
        assert!(wrapped.work.generation < 10, "counter did not wrap");
        assert!(fresh == wrapped);
        // Stamps from before the wrap must not look like duplicates now.
        assert_eq!(wrapped.reduce(&[5, 4]), Ok(()));
    }
}
