//! Structure invariants and summaries.

use engine::data::{Lattice, Pair, Sentence, Structures, Tree, TreeNode, Word};

use TreeNode::{Internal, Leaf};

#[test]
fn tree_validate_requires_strict_post_order_and_one_root() {
    let ok = Tree {
        nodes: vec![Leaf, Leaf, Internal { left: 0, right: 1 }],
        ..Default::default()
    };
    assert!(ok.validate().is_ok());
    // Children precede parents, but node 1 is not part of the subtree that
    // ends right before node 3: topological order, not post-order.
    let topo = Tree {
        nodes: vec![
            Leaf,
            Leaf,
            Leaf,
            Internal { left: 0, right: 2 },
            Internal { left: 3, right: 1 },
        ],
        ..Default::default()
    };
    assert!(topo.validate().unwrap_err().0.contains("node 3"));
    let two_roots = Tree {
        nodes: vec![Leaf, Leaf],
        ..Default::default()
    };
    assert!(
        two_roots
            .validate()
            .unwrap_err()
            .0
            .contains("2 disconnected")
    );
    assert!(Tree::default().validate().is_err());
    assert_eq!((Tree::default().depth(), Tree::default().root()), (0, 0));
}

#[test]
fn lattice_sentence_pair_validation() {
    let l = |char_arc: Vec<bool>, word_arcs| Lattice {
        nodes: 4,
        char_arc,
        word_arcs,
        ..Default::default()
    };
    assert!(
        l(vec![false, true, true, true], vec![(0, 2), (1, 3)])
            .validate()
            .is_ok()
    );
    assert!(
        l(vec![false, true, true], vec![]).validate().is_err(),
        "length"
    );
    assert!(
        l(vec![true, true, true, true], vec![]).validate().is_err(),
        "node 0"
    );
    assert!(
        l(vec![false; 4], vec![(1, 3), (0, 2)]).validate().is_err(),
        "order"
    );
    assert!(
        l(vec![false; 4], vec![(0, 1)]).validate().is_err(),
        "char span"
    );
    assert!(l(vec![false; 4], vec![(0, 4)]).validate().is_err(), "range");
    assert!(
        l(vec![false; 4], vec![(u32::MAX, 2)]).validate().is_err(),
        "overflow"
    );

    let w = Word {
        chars: 0,
        rare: false,
    };
    assert!(
        Sentence {
            words: vec![w],
            ..Default::default()
        }
        .validate()
        .is_err()
    );
    assert!(Sentence::default().validate().is_err());
    assert!(Pair { src: 1, tgt: 0 }.validate().is_err());
}

#[test]
fn summary_reports_per_kind_measures() {
    let s = Structures::Pairs(vec![Pair { src: 2, tgt: 5 }, Pair { src: 4, tgt: 1 }]);
    assert_eq!(
        s.summary().to_string(),
        "2 samples; source tokens: mean 3.00, min 2, max 4, total 6; \
         target tokens: mean 3.00, min 1, max 5, total 6"
    );
    let t = Structures::Trees(vec![Tree {
        nodes: vec![Leaf, Leaf, Internal { left: 0, right: 1 }],
        ..Default::default()
    }]);
    let m = t.summary().measures;
    assert_eq!(m[0].name, "leaves per tree");
    assert_eq!(
        (m[0].stats.total, m[1].stats.total, m[2].stats.max),
        (2, 3, 2)
    );
    assert_eq!(
        Structures::Trees(vec![]).summary().measures[0].stats.mean(),
        0.0
    );
}
