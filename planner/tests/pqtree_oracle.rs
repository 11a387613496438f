//! Cross-check against the `pq-tree` 0.1 crate (test oracle only) on trees
//! of 20..=200 leaves: same accept/reject decision for every constraint, and
//! the same tree up to equivalence after every accepted one.

mod pqtree_support;

use planner::pqtree::PqTree;
use pq_tree::PQTree;
use pqtree_support::{canonical, check_invariants, is_consecutive, parse};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Constraint family mixing intervals of a hidden permutation (mostly
/// feasible), small random sets and intervals of the identity (mostly
/// conflicting with the hidden order). `short` limits hidden intervals to
/// 2..=5 leaves, which grows long Q-nodes (and pseudonodes) instead of
/// nested P-nodes.
fn constraints(n: usize, seed: u64, short: bool) -> Vec<Vec<usize>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut hidden: Vec<usize> = (0..n).collect();
    hidden.shuffle(&mut rng);
    let count = rng.random_range(n / 2..=2 * n);
    let max_len = if short { 5 } else { (n / 4).max(2) };
    (0..count)
        .map(|_| match rng.random_range(0..10) {
            0..=6 => {
                let len = rng.random_range(2..=max_len);
                let a = rng.random_range(0..=n - len);
                hidden[a..a + len].to_vec()
            }
            7 | 8 => {
                let mut s: Vec<usize> = (0..n).collect();
                s.shuffle(&mut rng);
                s.truncate(rng.random_range(2..=5));
                s
            }
            _ => {
                let len = rng.random_range(2..=(n / 3).max(2));
                let a = rng.random_range(0..=n - len);
                (a..a + len).collect()
            }
        })
        .collect()
}

fn oracle_canonical(t: &PQTree<usize>) -> String {
    canonical(&parse(&t.to_string())).0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn agrees_with_pq_tree_crate(n in 20usize..=200, seed in any::<u64>(), short in any::<bool>()) {
        let sets = constraints(n, seed, short);
        let leaves: Vec<usize> = (0..n).collect();
        let mut oracle = PQTree::from_leaves(&leaves).unwrap();
        let mut tree = PqTree::new(n).unwrap();
        let mut accepted = Vec::new();
        for set in &sets {
            let ours = tree.reduce(set);
            match oracle.clone().reduction(set) {
                Ok(next) => {
                    prop_assert!(ours.is_ok(), "oracle accepts {:?}, we reject; tree {}", set, tree);
                    oracle = next;
                    accepted.push(set.clone());
                    prop_assert_eq!(tree.canonical_string(), oracle_canonical(&oracle));
                }
                Err(_) => prop_assert!(ours.is_err(), "oracle rejects {:?}, we accept", set),
            }
        }
        check_invariants(&tree);
        let frontier = tree.frontier();
        for set in &accepted {
            prop_assert!(is_consecutive(&frontier, set), "{:?} split in {:?}", set, frontier);
        }
        prop_assert_eq!(canonical(&parse(&tree.to_string())).0, tree.canonical_string());
    }
}
