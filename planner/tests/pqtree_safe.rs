//! Safe reduce: a failing reduce leaves the tree exactly as before, even when
//! templates had already rewritten part of it, and later reductions behave as
//! if the failed call had never happened.

mod pqtree_support;

use planner::pqtree::{PqError, PqTree};
use pqtree_support::{build, check_invariants};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Asserts every observable and the exact representation are unchanged.
fn assert_same(after: &PqTree, before: &PqTree) {
    assert_eq!(after.to_string(), before.to_string());
    assert_eq!(after.frontier(), before.frontier());
    assert_eq!(after.root(), before.root());
    assert!(after == before, "representation changed by a failed reduce");
}

#[test]
fn failure_after_lower_templates_rolls_back() {
    // Root {[{0 1} 2 {3 4}] 5 6}: P3 rewrites both P children of the Q-node
    // into partial Q-nodes before the Q-node finds two partial children.
    let mut t = build(7, &[&[0, 1, 2], &[2, 3, 4]]);
    assert_eq!(t.canonical_string(), "{[{0 1} 2 {3 4}] 5 6}");
    let before = t.clone();
    assert_eq!(t.reduce(&[1, 2, 3, 5]), Err(PqError::Infeasible));
    assert_same(&t, &before);
    check_invariants(&t);
}

#[test]
fn failure_after_pseudonode_rolls_back() {
    // Root Q [0 1 {2 3} 4 5]. For {1, 2, 4} the children 1, {2 3}, 4 are all
    // interior, so BUBBLE cuts them out into a pseudonode; P3 then rewrites
    // {2 3} before the pseudonode finds a partial child inside its run.
    let mut t = build(6, &[&[2, 3], &[1, 2, 3], &[2, 3, 4], &[0, 1], &[4, 5]]);
    assert_eq!(t.canonical_string(), "[0 1 {2 3} 4 5]");
    let before = t.clone();
    assert_eq!(t.reduce(&[1, 2, 4]), Err(PqError::Infeasible));
    assert_same(&t, &before);
    check_invariants(&t);
}

#[test]
fn failed_reduce_then_success_matches_fresh_path() {
    let mut t = build(8, &[&[0, 1, 2], &[2, 3, 4], &[5, 6]]);
    let mut twin = t.clone();
    assert_eq!(t.reduce(&[1, 2, 3, 5]), Err(PqError::Infeasible));
    t.reduce(&[4, 5]).unwrap();
    twin.reduce(&[4, 5]).unwrap();
    assert!(t == twin, "{t} vs {twin}");
}

/// A random tree over `n` leaves built from intervals of a hidden order,
/// then random constraints (many of them infeasible).
fn scenario(n: usize, seed: u64) -> (PqTree, Vec<Vec<usize>>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut hidden: Vec<usize> = (0..n).collect();
    hidden.shuffle(&mut rng);
    let mut t = PqTree::new(n).unwrap();
    for _ in 0..n {
        let len = rng.random_range(2..=4);
        let a = rng.random_range(0..=n - len);
        t.reduce(&hidden[a..a + len]).unwrap();
    }
    let probes = (0..40)
        .map(|_| {
            let mut s: Vec<usize> = (0..n).collect();
            s.shuffle(&mut rng);
            s.truncate(rng.random_range(2..n));
            s
        })
        .collect();
    (t, probes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn failed_reduce_is_invisible(n in 6usize..=60, seed in any::<u64>()) {
        let (mut t, probes) = scenario(n, seed);
        for probe in &probes {
            let before = t.clone();
            match t.reduce(probe) {
                Err(PqError::Infeasible) => {
                    assert_same(&t, &before);
                    // The next reduction must behave as on the untouched clone.
                    let mut twin = before;
                    let next = &probe[..2];
                    prop_assert_eq!(t.reduce(next).is_ok(), twin.reduce(next).is_ok());
                    prop_assert!(t == twin);
                }
                Err(other) => prop_assert!(false, "unexpected {other}"),
                Ok(()) => {}
            }
        }
        check_invariants(&t);
    }
}
