//! Hand-made cases for each Booth–Lueker template, the ED-Batch example, and
//! the read API. Expected trees are written in canonical bracket notation.

mod pqtree_support;

use planner::pqtree::{MAX_LEAVES, NodeKind, PqError, PqTree};
use pqtree_support::{build, check_invariants, is_consecutive, leaf, represented_count};

/// Builds a tree and checks its canonical form and invariants.
fn assert_tree(n: usize, sets: &[&[usize]], want: &str) -> PqTree {
    let t = build(n, sets);
    check_invariants(&t);
    assert_eq!(
        t.canonical_string(),
        want,
        "after {sets:?}, stored form {t}"
    );
    t
}

#[test]
fn new_tree_is_one_p_node() {
    let t = assert_tree(3, &[], "{0 1 2}");
    assert_eq!(t.to_string(), "{0 1 2}");
    assert_eq!(t.kind(t.root()), NodeKind::P);
    assert_eq!(represented_count(&t), 6);
}

#[test]
fn single_leaf_tree_is_the_leaf() {
    let mut t = PqTree::new(1).unwrap();
    assert_eq!(t.kind(t.root()), NodeKind::Leaf(0));
    assert_eq!(t.to_string(), "0");
    assert_eq!(t.reduce(&[0]), Ok(()));
    assert_eq!(t.frontier(), vec![0]);
}

#[test]
fn p2_groups_full_children_of_root() {
    assert_tree(4, &[&[1, 2]], "{0 {1 2} 3}");
}

#[test]
fn p1_full_p_child_then_p2() {
    assert_tree(5, &[&[2, 3], &[1, 2, 3]], "{0 {1 {2 3}} 4}");
}

#[test]
fn p3_then_p4() {
    assert_tree(5, &[&[0, 1, 2], &[2, 3]], "{[{0 1} 2 3] 4}");
}

#[test]
fn p5_partial_child_replaces_p_node() {
    assert_tree(
        6,
        &[&[0, 1, 2], &[0, 1, 2, 3], &[2, 4]],
        "{[3 {0 1} 2 4] 5}",
    );
}

#[test]
fn p6_two_partial_children_merge() {
    assert_tree(6, &[&[0, 1], &[2, 3], &[1, 2]], "{[0 1 2 3] 4 5}");
}

#[test]
fn p4_collapses_root_with_single_child() {
    // The root P-node is left with only the grown Q-node, which replaces it.
    let t = assert_tree(4, &[&[0, 1], &[1, 2], &[2, 3]], "[0 1 2 3]");
    assert_eq!(t.kind(t.root()), NodeKind::Q);
}

#[test]
fn q1_full_q_child() {
    assert_tree(5, &[&[0, 1], &[1, 2], &[0, 1, 2, 3]], "{{[0 1 2] 3} 4}");
}

#[test]
fn q2_non_root_extends_at_full_end() {
    assert_tree(6, &[&[0, 1], &[1, 2], &[2, 3]], "{[0 1 2 3] 4 5}");
}

#[test]
fn q2_non_root_merges_partial_child() {
    assert_tree(5, &[&[0, 1, 2], &[2, 3], &[1, 2, 3, 4]], "[0 1 2 3 4]");
}

#[test]
fn q2_root_merges_one_partial_child() {
    assert_tree(5, &[&[0, 1, 2], &[2, 3], &[1, 2]], "{[0 1 2 3] 4}");
}

#[test]
fn q3_root_merges_partial_children_at_both_ends() {
    assert_tree(
        7,
        &[&[0, 1, 2], &[2, 3, 4], &[1, 2, 3]],
        "{[0 1 2 3 4] 5 6}",
    );
}

#[test]
fn pseudonode_for_interior_run_of_q_children() {
    // 1, 2, 3 are interior children of the root Q-node: BUBBLE blocks them.
    let mut t = assert_tree(5, &[&[0, 1], &[1, 2], &[2, 3], &[3, 4]], "[0 1 2 3 4]");
    let before = t.to_string();
    t.reduce(&[1, 2, 3]).unwrap();
    check_invariants(&t);
    assert_eq!(
        t.to_string(),
        before,
        "an already consecutive run must keep its order"
    );
}

#[test]
fn pseudonode_with_partial_child_is_restructured() {
    let sets: [&[usize]; 4] = [&[1, 2], &[0, 1, 2], &[1, 2, 3], &[3, 4]];
    let mut t = assert_tree(5, &sets, "[0 {1 2} 3 4]");
    t.reduce(&[2, 3]).unwrap();
    check_invariants(&t);
    assert_eq!(t.canonical_string(), "[0 1 2 3 4]");
}

#[test]
fn q_node_rejects_split_and_interior_partial() {
    let mut t = build(5, &[&[0, 1], &[1, 2], &[2, 3], &[3, 4]]);
    assert_eq!(t.reduce(&[0, 2]), Err(PqError::Infeasible));
    assert_eq!(t.reduce(&[1, 3]), Err(PqError::Infeasible));
    // Doubly partial below the root: {1,2} full inside [0 1 2 3] with 5 outside.
    let mut t = build(6, &[&[0, 1], &[1, 2], &[2, 3]]);
    assert_eq!(t.reduce(&[1, 2, 5]), Err(PqError::Infeasible));
    // Three partial children of a P-node.
    let mut t = build(6, &[&[0, 1], &[2, 3], &[4, 5]]);
    assert_eq!(t.reduce(&[1, 2, 4]), Err(PqError::Infeasible));
}

#[test]
fn ed_batch_section3_example() {
    // x1..x8 are leaves 0..7; constraints from ED-Batch §3.2, batches B1, B2.
    let sets: [&[usize]; 5] = [&[3, 4], &[0, 2], &[1, 0], &[7, 5, 6], &[2, 3, 4]];
    let t = assert_tree(8, &sets, "{[1 0 2 {3 4}] {5 6 7}}");
    let f = t.frontier();
    for s in sets {
        assert!(is_consecutive(&f, s), "{s:?} not consecutive in {f:?}");
    }
    // The paper's x2 x1 x3 x4 x5 x8 x6 x7 is one of the represented orders.
    assert!(is_consecutive(&[1, 0, 2, 3, 4, 7, 5, 6], &[2, 3, 4]));
    assert_eq!(represented_count(&t), 2 * 2 * 6 * 2);
    // The broadcast constraint {x6, x7} of the paper nests {x6, x7} inside P1.
    let mut t = t;
    t.reduce(&[5, 6]).unwrap();
    assert_eq!(t.canonical_string(), "{[1 0 2 {3 4}] {{5 6} 7}}");
}

#[test]
fn trivial_sets_leave_tree_unchanged() {
    let mut t = build(5, &[&[1, 2]]);
    let before = t.clone();
    for s in [&[][..], &[3], &[4, 0, 1, 2, 3]] {
        assert_eq!(t.reduce(s), Ok(()));
        assert_eq!(t, before);
    }
}

#[test]
fn malformed_sets_are_typed_errors() {
    let mut t = PqTree::new(4).unwrap();
    let before = t.clone();
    assert_eq!(
        t.reduce(&[1, 4]),
        Err(PqError::LeafOutOfRange {
            leaf: 4,
            num_leaves: 4
        })
    );
    assert_eq!(
        t.reduce(&[2, 1, 2]),
        Err(PqError::DuplicateLeaf { leaf: 2 })
    );
    assert_eq!(
        t.try_reduce(&[0, 0]),
        Err(PqError::DuplicateLeaf { leaf: 0 })
    );
    assert_eq!(t, before);
    // A duplicate must not be mistaken for one in an earlier call.
    assert_eq!(t.reduce(&[1, 2]), Ok(()));
    assert_eq!(t.reduce(&[2, 3]), Ok(()));
}

#[test]
fn construction_errors() {
    assert_eq!(PqTree::new(0), Err(PqError::NoLeaves));
    assert_eq!(
        PqTree::new(MAX_LEAVES + 1),
        Err(PqError::TooManyLeaves {
            requested: MAX_LEAVES + 1,
            max: MAX_LEAVES
        })
    );
}

#[test]
fn read_api_on_nested_tree() {
    // Root Q [0 1 2 3 4 5] over {5, 6}: interior Q children need the walk.
    let t = build(
        7,
        &[
            &[0, 1],
            &[1, 2],
            &[2, 3],
            &[3, 4],
            &[4, 5],
            &[0, 1, 2, 3, 4, 5],
        ],
    );
    check_invariants(&t);
    assert_eq!(t.canonical_string(), "{[0 1 2 3 4 5] 6}");
    let root = t.root();
    let q = t.parent(leaf(&t, 3)).unwrap();
    assert_eq!(t.kind(q), NodeKind::Q);
    assert_eq!(t.parent(q), Some(root));
    let kids: Vec<NodeKind> = t.children(q).into_iter().map(|c| t.kind(c)).collect();
    let leaves: Vec<usize> = kids
        .iter()
        .map(|k| match k {
            NodeKind::Leaf(l) => *l,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert!(
        leaves == [0, 1, 2, 3, 4, 5] || leaves == [5, 4, 3, 2, 1, 0],
        "{leaves:?}"
    );
    assert_eq!(t.leaf_node(7), None);
    assert_eq!(t.leaf_node(6).map(|id| id.index()), Some(6));
    assert_eq!(t.num_leaves(), 7);
    assert!(t.children(leaf(&t, 2)).is_empty());
}

#[test]
fn display_uses_stored_order_and_brackets() {
    let t = build(6, &[&[0, 1, 2], &[2, 3]]);
    let s = t.to_string();
    assert!(s.starts_with('{') && s.contains('['), "{s}");
    assert_eq!(s.matches('[').count(), 1);
    // Printing must follow the same order as the frontier.
    let digits: Vec<usize> = s
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(digits, t.frontier());
}
