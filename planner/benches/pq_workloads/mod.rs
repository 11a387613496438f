//! Seeded constraint workloads shared by the PQ-tree benchmark and the
//! `pq_scaling` example, so both measure the same thing.

use planner::pqtree::PqTree;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Fixed seed: the same `n` always yields the same constraint list.
pub const SEED: u64 = 0x5eed_0f9e;

/// The n-1 pairs `{i, i+1}` in a seeded random order (ends as one Q-node).
pub fn sliding_pairs(n: usize) -> Vec<Vec<usize>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(SEED);
    let mut sets: Vec<Vec<usize>> = (0..n.saturating_sub(1)).map(|i| vec![i, i + 1]).collect();
    sets.shuffle(&mut rng);
    sets
}

/// `n` random windows of length 2..=8 over a hidden random permutation, so
/// the whole family is feasible.
pub fn hidden_intervals(n: usize) -> Vec<Vec<usize>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(SEED ^ 1);
    let mut hidden: Vec<usize> = (0..n).collect();
    hidden.shuffle(&mut rng);
    (0..n)
        .map(|_| {
            let len = rng.random_range(2..=8.min(n));
            let a = rng.random_range(0..=n - len);
            hidden[a..a + len].to_vec()
        })
        .collect()
}

/// Reduces every set into a fresh tree; returns it so the work is not elided.
///
/// # Panics
/// If a set is rejected: both workloads are feasible by construction.
pub fn run(n: usize, sets: &[Vec<usize>]) -> PqTree {
    let mut t = PqTree::new(n).expect("n >= 1");
    for s in sets {
        t.reduce(s).expect("workload is feasible by construction");
    }
    t
}
