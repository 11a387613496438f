//! Seeded synthetic inputs, for workloads and sizes the real data sets do
//! not cover (scaling sweeps, complete trees, dense lattices).
//!
//! Every generator is a pure function of its arguments and the RNG state, so
//! the same seed gives the same structures. The order of random draws is
//! documented per generator because it is part of that contract: changing it
//! changes every seeded experiment. Out-of-range arguments are clamped to
//! the nearest meaningful value (documented per item) rather than rejected,
//! so that sweeps never abort halfway.

use rand::{Rng, RngExt};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

use crate::data::error::SyntheticError;
use crate::data::fixtures::MAX_LATTICE_NODES;
use crate::data::structures::{Lattice, Pair, Sentence, Tree, TreeNode, Word};

/// Largest tree the generators build (`2 * MAX_TREE_LEAVES - 1` nodes,
/// about 400 MB), so node indices always fit `u32` with room to spare.
pub const MAX_TREE_LEAVES: u32 = 1 << 24;

/// Synthetic word lengths are uniform on `1..=MAX_WORD_CHARS`; the mean
/// (4.5) is close to WikiNER's 4.37 characters per word.
pub const MAX_WORD_CHARS: u32 = 8;

/// A distribution of sequence lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LengthDist {
    /// Always this length.
    Fixed(u32),
    /// Uniform on `min..=max` (the bounds are swapped if `min > max`).
    Uniform {
        /// Smallest length.
        min: u32,
        /// Largest length.
        max: u32,
    },
}

impl LengthDist {
    /// Draws a length; `Fixed` draws nothing from `rng`, `Uniform` draws once.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        match *self {
            LengthDist::Fixed(n) => n,
            LengthDist::Uniform { min, max } => rng.random_range(min.min(max)..=min.max(max)),
        }
    }
}

/// Clamps a probability into `[0, 1]`; NaN becomes 0.
fn prob(p: f64) -> f64 {
    if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) }
}

/// `count` sentences. Per sentence: its length from `len` (0 is raised to 1:
/// sentences are never empty), then per word its length uniform on
/// `1..=MAX_WORD_CHARS` followed by its rare flag with probability
/// `rare_prob` (clamped into `[0, 1]`).
pub fn sentences(
    rng: &mut Xoshiro256PlusPlus,
    count: usize,
    len: LengthDist,
    rare_prob: f64,
) -> Vec<Sentence> {
    let p = prob(rare_prob);
    (0..count)
        .map(|_| {
            let n = len.sample(rng).max(1);
            let words = (0..n)
                .map(|_| {
                    let chars = rng.random_range(1..=MAX_WORD_CHARS);
                    let rare = rng.random_bool(p);
                    Word { chars, rare }
                })
                .collect();
            Sentence::new(words)
        })
        .collect()
}

/// `count` pairs; per pair the source length is drawn before the target
/// length. Lengths of 0 are raised to 1 (pairs have non-empty sides).
pub fn pairs(
    rng: &mut Xoshiro256PlusPlus,
    count: usize,
    src: LengthDist,
    tgt: LengthDist,
) -> Vec<Pair> {
    (0..count)
        .map(|_| {
            let s = src.sample(rng).max(1);
            let t = tgt.sample(rng).max(1);
            Pair { src: s, tgt: t }
        })
        .collect()
}

/// A random binary tree with `leaves` leaves (clamped to
/// `1..=MAX_TREE_LEAVES`) under the *uniform split* law: a subtree of `n > 1`
/// leaves gets a left subtree of `k` leaves, `k` uniform on `1..=n-1`, and a
/// right subtree of `n - k`, recursively and independently. (This is not
/// uniform over tree shapes; it favours more balanced trees than the
/// Catalan law.) Splits are drawn in pre-order: a node's split, then its
/// whole left subtree's, then its right subtree's.
pub fn random_tree(rng: &mut Xoshiro256PlusPlus, leaves: u32) -> Tree {
    build(leaves.clamp(1, MAX_TREE_LEAVES), |n| rng.random_range(1..n))
}

/// The complete binary tree with `leaves` leaves, which must be a power of
/// two in `1..=MAX_TREE_LEAVES`. Its depth is `log2(leaves) + 1`.
pub fn complete_tree(leaves: u32) -> Result<Tree, SyntheticError> {
    if !leaves.is_power_of_two() {
        return Err(SyntheticError::NotPowerOfTwo { leaves });
    }
    if leaves > MAX_TREE_LEAVES {
        return Err(SyntheticError::TooLarge {
            leaves,
            max: MAX_TREE_LEAVES,
        });
    }
    Ok(build(leaves, |n| n / 2))
}

enum Task {
    /// Build a subtree with this many leaves.
    Expand(u32),
    /// Join the two subtrees completed last.
    Join,
}

/// Builds a tree in post-order; `split(n)` gives the left subtree's leaf
/// count for `n >= 2` leaves and must lie in `1..n`. Iterative, so deep
/// (caterpillar) trees cannot overflow the stack.
fn build(leaves: u32, mut split: impl FnMut(u32) -> u32) -> Tree {
    let mut nodes: Vec<TreeNode> = Vec::with_capacity(2 * leaves as usize - 1);
    let mut done: Vec<u32> = Vec::new();
    let mut tasks = vec![Task::Expand(leaves)];
    while let Some(task) = tasks.pop() {
        // Indices fit u32: at most 2 * MAX_TREE_LEAVES - 1 nodes.
        let id = nodes.len() as u32;
        match task {
            Task::Expand(1) => {
                nodes.push(TreeNode::Leaf);
                done.push(id);
            }
            Task::Expand(n) => {
                let k = split(n);
                // LIFO: the left subtree is expanded (and completed) first.
                tasks.extend([Task::Join, Task::Expand(n - k), Task::Expand(k)]);
            }
            Task::Join => {
                // Each Join is queued under two Expands that each complete
                // exactly one subtree before it runs, so both pops succeed.
                let right = done.pop().unwrap_or(0);
                let left = done.pop().unwrap_or(0);
                nodes.push(TreeNode::Internal { left, right });
                done.push(id);
            }
        }
    }
    Tree::new(nodes)
}

/// A random lattice with `nodes` nodes (clamped to
/// `1..=MAX_LATTICE_NODES`), a char arc into every node `i > 0`, and each
/// possible word arc `(to - span, to)` with `2 <= span <= max_word_len`
/// present independently with probability `word_prob` (clamped into
/// `[0, 1]`). Draws go by increasing `to`, then decreasing `span` (i.e. the
/// output order).
pub fn random_lattice(
    rng: &mut Xoshiro256PlusPlus,
    nodes: u32,
    word_prob: f64,
    max_word_len: u32,
) -> Lattice {
    let nodes = nodes.clamp(1, MAX_LATTICE_NODES);
    let p = prob(word_prob);
    let mut char_arc = vec![true; nodes as usize];
    char_arc[0] = false;
    let mut word_arcs = Vec::new();
    for to in 2..nodes {
        for span in (2..=max_word_len.min(to)).rev() {
            if rng.random_bool(p) {
                word_arcs.push((to - span, to));
            }
        }
    }
    Lattice::new(nodes, char_arc, word_arcs)
}
