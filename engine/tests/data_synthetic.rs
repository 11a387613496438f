//! Synthetic generators: determinism and structural invariants.

use engine::data::synthetic::{
    LengthDist, MAX_WORD_CHARS, complete_tree, pairs, random_lattice, random_tree, sentences,
};
use engine::data::{Structures, SyntheticError, TreeNode, fixture_header, format_fixture};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

#[test]
fn same_seed_same_output_different_seed_differs() {
    let gen_all = |seed| {
        let mut r = rng(seed);
        let s = sentences(&mut r, 20, LengthDist::Uniform { min: 1, max: 30 }, 0.3);
        let p = pairs(
            &mut r,
            20,
            LengthDist::Uniform { min: 1, max: 50 },
            LengthDist::Fixed(7),
        );
        let t: Vec<_> = (1..40).map(|n| random_tree(&mut r, n)).collect();
        let l: Vec<_> = (1..20)
            .map(|n| random_lattice(&mut r, n * 5, 0.3, 6))
            .collect();
        [
            format_fixture(&Structures::Sentences(s), &[]),
            format_fixture(&Structures::Pairs(p), &[]),
            format_fixture(&Structures::Trees(t), &[]),
            format_fixture(&Structures::Lattices(l), &[]),
        ]
    };
    let a = gen_all(7);
    assert_eq!(a, gen_all(7));
    let b = gen_all(8);
    for (x, y) in a.iter().zip(&b) {
        assert_ne!(x, y);
    }
}

#[test]
fn complete_tree_of_256_leaves() {
    let t = complete_tree(256).unwrap();
    assert_eq!(t.len(), 511);
    assert_eq!(t.leaves(), 256);
    assert_eq!(t.depth(), 9);
    t.validate().unwrap();
    // Post-order of a complete tree: the root's children are the roots of the
    // two 255-node halves.
    assert_eq!(
        t.nodes[510],
        TreeNode::Internal {
            left: 254,
            right: 509
        }
    );
    let one = complete_tree(1).unwrap();
    assert_eq!((one.len(), one.depth()), (1, 1));
    assert_eq!(
        complete_tree(0),
        Err(SyntheticError::NotPowerOfTwo { leaves: 0 })
    );
    assert_eq!(
        complete_tree(6),
        Err(SyntheticError::NotPowerOfTwo { leaves: 6 })
    );
    assert!(matches!(
        complete_tree(1 << 30),
        Err(SyntheticError::TooLarge { .. })
    ));
}

#[test]
fn random_trees_are_valid_post_order_with_the_requested_leaves() {
    let mut r = rng(1);
    for n in [1u32, 2, 3, 10, 100, 1000] {
        let t = random_tree(&mut r, n);
        assert_eq!(t.leaves(), n as usize);
        assert_eq!(t.len(), 2 * n as usize - 1);
        t.validate().unwrap();
        assert!(t.depth() > (n as f64).log2().ceil() as usize);
        assert!(t.depth() <= n as usize);
    }
    assert_eq!(
        random_tree(&mut r, 0).leaves(),
        1,
        "0 leaves is clamped to 1"
    );
}

#[test]
fn random_tree_split_law_is_uniform() {
    // The root's left-subtree size must be uniform on 1..=n-1: for n = 5 each
    // of the 4 sizes should get about a quarter of 4000 draws.
    let mut r = rng(3);
    let mut hist = [0usize; 5];
    for _ in 0..4000 {
        let t = random_tree(&mut r, 5);
        let TreeNode::Internal { left, .. } = t.nodes[t.root() as usize] else {
            panic!("root of a 5-leaf tree is internal");
        };
        // The left subtree occupies nodes 0..=left, with (left + 2) / 2 leaves.
        hist[(left as usize + 2) / 2] += 1;
    }
    assert_eq!(hist[0], 0);
    for &h in &hist[1..] {
        assert!((850..1150).contains(&h), "{hist:?}");
    }
}

#[test]
fn sentences_and_pairs_respect_their_distributions() {
    let mut r = rng(5);
    let s = sentences(&mut r, 500, LengthDist::Uniform { min: 3, max: 6 }, 0.25);
    assert!(s.iter().all(|s| (3..=6).contains(&s.words.len())));
    let words: Vec<_> = s.iter().flat_map(|s| &s.words).collect();
    assert!(
        words
            .iter()
            .all(|w| (1..=MAX_WORD_CHARS).contains(&w.chars))
    );
    let rare = words.iter().filter(|w| w.rare).count() as f64 / words.len() as f64;
    assert!((0.2..0.3).contains(&rare), "{rare}");
    // Degenerate arguments are clamped, not panics.
    let s = sentences(&mut r, 3, LengthDist::Fixed(0), f64::NAN);
    assert!(s.iter().all(|s| s.words.len() == 1 && !s.words[0].rare));
    assert!(
        sentences(&mut r, 50, LengthDist::Fixed(2), 7.0)
            .iter()
            .all(|s| s.words.iter().all(|w| w.rare))
    );

    let p = pairs(
        &mut r,
        200,
        LengthDist::Uniform { min: 9, max: 2 },
        LengthDist::Fixed(0),
    );
    assert!(p.iter().all(|p| (2..=9).contains(&p.src) && p.tgt == 1));
    assert!(p.iter().any(|p| p.src == 2) && p.iter().any(|p| p.src == 9));
}

#[test]
fn random_lattices_are_valid_with_bounded_spans() {
    let mut r = rng(9);
    for nodes in [1u32, 2, 3, 50, 200] {
        let l = random_lattice(&mut r, nodes, 0.4, 5);
        l.validate().unwrap();
        assert_eq!(l.nodes, nodes);
        assert!(
            l.char_arc[1..].iter().all(|&c| c),
            "every node i > 0 has a char arc"
        );
        assert!(l.word_arcs.iter().all(|&(f, t)| (2..=5).contains(&(t - f))));
    }
    let full = random_lattice(&mut r, 10, 1.0, 3);
    // Spans 2 and 3 ending at 2..=9: 8 of span 2, 7 of span 3.
    assert_eq!(full.word_arcs.len(), 15);
    assert!(random_lattice(&mut r, 10, 0.0, 3).word_arcs.is_empty());
    assert!(random_lattice(&mut r, 10, 0.9, 1).word_arcs.is_empty());
    assert_eq!(random_lattice(&mut r, 0, 0.5, 3).nodes, 1);
}

#[test]
fn synthetic_structures_round_trip_through_fixtures() {
    let mut r = rng(11);
    let all = [
        Structures::Trees((1..30).map(|n| random_tree(&mut r, n)).collect()),
        Structures::Sentences(sentences(
            &mut r,
            10,
            LengthDist::Uniform { min: 1, max: 9 },
            0.5,
        )),
        Structures::Pairs(pairs(
            &mut r,
            10,
            LengthDist::Fixed(3),
            LengthDist::Fixed(4),
        )),
        Structures::Lattices(
            (1..10)
                .map(|n| random_lattice(&mut r, n * 3, 0.5, 4))
                .collect(),
        ),
    ];
    for s in all {
        let text = format_fixture(&s, &["synthetic".into()]);
        assert_eq!(fixture_header(&text), vec!["synthetic"]);
        let back = engine::data::parse_fixture(&text, s.kind(), "mem").unwrap();
        assert_eq!(back, s);
    }
}

#[test]
fn length_dist_serde_shape() {
    let d: LengthDist = serde_json::from_str(r#"{"uniform":{"min":2,"max":5}}"#).unwrap();
    assert_eq!(d, LengthDist::Uniform { min: 2, max: 5 });
    assert_eq!(
        serde_json::to_string(&LengthDist::Fixed(4)).unwrap(),
        r#"{"fixed":4}"#
    );
}
