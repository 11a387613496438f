//! Exhaustive cross-check on small trees (n <= 8): after every constraint the
//! tree must accept exactly the constraints that keep the family feasible,
//! represent exactly the permutations that satisfy the accepted family, and
//! its frontier must satisfy every accepted set.

mod pqtree_support;

use planner::pqtree::PqTree;
use pqtree_support::{check_invariants, is_consecutive, represented_count};
use proptest::prelude::*;

/// One generated constraint: an interval of the hidden permutation (so that
/// feasible families are common) or an arbitrary subset given by a bitmask.
#[derive(Debug, Clone)]
enum Spec {
    Interval { start: usize, len: usize },
    Mask(u16),
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        3 => (0usize..8, 0usize..9).prop_map(|(start, len)| Spec::Interval { start, len }),
        1 => any::<u16>().prop_map(Spec::Mask),
    ]
}

fn case() -> impl Strategy<Value = (usize, Vec<usize>, Vec<Spec>)> {
    (1usize..=8).prop_flat_map(|n| {
        (
            Just(n),
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            prop::collection::vec(spec(), 0..10),
        )
    })
}

fn to_set(n: usize, hidden: &[usize], s: &Spec) -> Vec<usize> {
    match *s {
        Spec::Interval { start, len } => {
            let a = start % n;
            hidden[a..(a + len).min(n)].to_vec()
        }
        Spec::Mask(m) => (0..n).filter(|&i| m & (1 << i) != 0).collect(),
    }
}

/// For every permutation of `0..n`, the bitmask of `sets` it keeps consecutive.
fn consecutive_masks(n: usize, sets: &[Vec<usize>]) -> Vec<u32> {
    let mut perm: Vec<usize> = (0..n).collect();
    let mut out = Vec::new();
    let mut pos = vec![0; n];
    loop {
        for (i, &l) in perm.iter().enumerate() {
            pos[l] = i;
        }
        let mut mask = 0u32;
        for (k, s) in sets.iter().enumerate() {
            let lo = s.iter().map(|&l| pos[l]).min().unwrap_or(0);
            let hi = s.iter().map(|&l| pos[l]).max().unwrap_or(0);
            if s.len() <= 1 || hi - lo + 1 == s.len() {
                mask |= 1 << k;
            }
        }
        out.push(mask);
        // Lexicographic successor.
        let Some(i) = (1..n).rev().find(|&i| perm[i - 1] < perm[i]) else {
            return out;
        };
        let j = (i..n).rev().find(|&j| perm[j] > perm[i - 1]).unwrap_or(i);
        perm.swap(i - 1, j);
        perm[i..].reverse();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn matches_brute_force((n, hidden, specs) in case()) {
        let sets: Vec<Vec<usize>> = specs.iter().map(|s| to_set(n, &hidden, s)).collect();
        let masks = consecutive_masks(n, &sets);
        let mut tree = PqTree::new(n).unwrap();
        let mut accepted = 0u32;
        for (k, set) in sets.iter().enumerate() {
            let want = accepted | (1 << k);
            let feasible = masks.iter().any(|&m| m & want == want);
            let before = tree.clone();
            let result = tree.reduce(set);
            prop_assert_eq!(result.is_ok(), feasible, "set {:?} on tree {}", set, before);
            if result.is_ok() {
                accepted = want;
            } else {
                prop_assert!(tree == before, "failed reduce changed {} into {}", before, tree);
            }
            let expected = masks.iter().filter(|&&m| m & accepted == accepted).count() as u128;
            prop_assert_eq!(represented_count(&tree), expected, "tree {} after {:?}", tree, set);
            check_invariants(&tree);
        }
        let frontier = tree.frontier();
        for (k, set) in sets.iter().enumerate() {
            if accepted & (1 << k) != 0 {
                prop_assert!(is_consecutive(&frontier, set), "{:?} split in {:?}", set, frontier);
            }
        }
    }

    #[test]
    fn feasible_family_never_fails((n, hidden, specs) in case()) {
        // Only intervals of one hidden permutation: always feasible together.
        let mut tree = PqTree::new(n).unwrap();
        let sets: Vec<Vec<usize>> = specs
            .iter()
            .filter(|s| matches!(s, Spec::Interval { .. }))
            .map(|s| to_set(n, &hidden, s))
            .collect();
        for set in &sets {
            prop_assert!(tree.reduce(set).is_ok(), "{:?} rejected by {}", set, tree);
        }
        let frontier = tree.frontier();
        for set in &sets {
            prop_assert!(is_consecutive(&frontier, set));
        }
        prop_assert!(represented_count(&tree) >= 2 || n == 1);
    }
}
