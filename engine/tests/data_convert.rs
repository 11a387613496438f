//! Converters from raw ED-Batch formats, on small inline snippets.

use std::path::{Path, PathBuf};

mod common;

use engine::data::convert::{
    self, iwslt_pairs, iwslt_pairs_detailed, sst_trees, sst_trees_detailed, sst_trees_ranked,
    sst_vocab, weibo_lattices, weibo_lattices_detailed, weibo_lattices_ranked, weibo_vocab,
    wikiner_sentences,
};
use engine::data::{
    Dataset, Lattice, Pair, StructureKind, Structures, Tree, TreeNode, format_fixture,
};

fn tree_text(t: &Tree) -> String {
    let s = format_fixture(&Structures::Trees(vec![t.clone()]), &[]);
    s.lines().nth(1).unwrap().to_owned()
}

#[test]
fn sst_keeps_shape_labels_and_frequency_ranks() {
    // "movie" and "." occur twice, "movie" first: ranks 0 and 1; the words seen
    // once follow in reading order.
    let raw = "(1 (2 I) (0 (0 hate) (2 (2 this) (2 movie))))\n\n(3 (2 An) (2 .))\n\
               (2 (2 movie) (2 .))\n";
    let (t, st) = sst_trees_detailed(raw, "raw.txt").unwrap();
    assert_eq!(t.len(), 3);
    assert_eq!(tree_text(&t[0]), "(1 (2 w2) (0 (0 w3) (2 (2 w4) (2 w0))))");
    assert_eq!(tree_text(&t[1]), "(3 (2 w5) (2 w1))");
    assert_eq!(tree_text(&t[2]), "(2 (2 w0) (2 w1))");
    assert_eq!(t[0].labels, vec![2, 0, 2, 2, 2, 0, 1], "post-order");
    assert_eq!(st.blank_lines, 1);
    assert_eq!(st.unary_collapsed, 0);
}

#[test]
fn sst_dev_words_are_ranked_by_train() {
    let vocab = sst_vocab("(1 (2 a) (2 (2 b) (2 a)))\n", "train.txt").unwrap();
    assert_eq!((vocab.len(), vocab.unseen()), (2, 2));
    let (t, _) = sst_trees_ranked("(3 (2 b) (2 (1 zebra) (2 a)))\n", "dev.txt", &vocab).unwrap();
    assert_eq!(t[0].word_ids, vec![1, 2, 0], "zebra is not in train: id 2");
}

#[test]
fn sst_word_with_no_break_space_is_one_leaf() {
    // Regression: "8\u{a0}1\/2" (a film title) must not split into two words.
    let t = sst_trees("(2 (2 and) (2 8\u{a0}1\\/2))", "raw").unwrap();
    assert_eq!(tree_text(&t[0]), "(2 (2 w0) (2 w1))");
}

#[test]
fn sst_collapses_unary_nodes_and_counts_them() {
    // A collapsed unary node gives way to its child, label included.
    let (t, st) = sst_trees_detailed("(1 (2 (3 a) (3 (4 b))))\n(2 (3 w))\n", "raw").unwrap();
    assert_eq!(st.unary_collapsed, 3);
    assert_eq!(tree_text(&t[0]), "(2 (3 w0) (4 w1))");
    assert_eq!(t[1].nodes, vec![TreeNode::Leaf]);
    assert_eq!(tree_text(&t[1]), "(3 w2)");
    assert!(t.iter().all(|t| t.validate().is_ok()));
}

#[test]
fn sst_rejects_malformed_lines_with_file_and_line() {
    let cases = [
        (
            "(1 (2 a) (2 b) (2 c))",
            "opened at column 1 has more than two children",
        ),
        ("(1 (2 a) (2 b)", "expected ')' at end of line"),
        ("(1 (2 a) (2 b)))", "trailing characters"),
        ("(1 a b)", "unexpected word at column 6"),
        ("(1 a (2 b))", "column 1 has a word followed by a subtree"),
        ("((2 a) (2 b))", "expected a label before '(' at column 2"),
        ("()", "no label"),
        ("(1)", "no word or subtree"),
        ("word", "expected '(' at column 1"),
        (")", "unmatched ')'"),
        (
            "(2 (7 a) (2 b))",
            "label \"7\" at column 5 is not a sentiment class 0..=4",
        ),
        ("(+1 a)", "label \"+1\" at column 2"),
        ("(pos a)", "label \"pos\" at column 2"),
    ];
    for (raw, want) in cases {
        let e = sst_trees(&format!("(2 x)\n{raw}\n"), "raw.txt")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("raw.txt:2: "), "{raw}: {e}");
        assert!(e.contains(want), "{raw}: {e}");
    }
}

const WEIBO: &str =
    "2\n4\n0 1 2 3\n0 \n1 0 62\n2 1 480 0 3395\n3 2 1 0 7 1 9\n\n3\n1 1 1\n0\n0\n1 1 5\n";

#[test]
fn weibo_lattices_split_char_and_word_arcs() {
    let (l, st) = weibo_lattices_detailed(WEIBO, "w.txt").unwrap();
    assert_eq!(
        l,
        vec![
            // Char ids 62, 480, 1, 5 and word ids 3395, 7, 9 each occur
            // once: ranked in reading order.
            Lattice {
                nodes: 4,
                char_arc: vec![false, true, true, true],
                word_arcs: vec![(0, 2), (0, 3), (1, 3)],
                tags: vec![0, 1, 2, 3],
                char_ids: vec![0, 1, 2],
                word_ids: vec![0, 1, 2],
            },
            Lattice {
                nodes: 3,
                char_arc: vec![false, false, true],
                word_arcs: vec![],
                tags: vec![1, 1, 1],
                char_ids: vec![3],
                word_ids: vec![],
            },
        ]
    );
    assert_eq!(st.start_nodes, 1);
    assert_eq!(st.duplicate_arcs, 0);
    assert!(l.iter().all(|l| l.validate().is_ok()));
}

#[test]
fn weibo_merges_duplicate_word_arcs() {
    let raw = "1\n3\n0 0 0\n0\n1 0 5\n3 1 6 0 7 0 8\n";
    let (l, st) = weibo_lattices_detailed(raw, "w").unwrap();
    assert_eq!(l[0].word_arcs, vec![(0, 2)]);
    assert_eq!(st.duplicate_arcs, 1);
    // The first of the duplicates keeps its id: 7, not 8.
    let vocab = weibo_vocab("1\n3\n0 0 0\n0\n1 0 8\n2 1 6 0 7\n", "train").unwrap();
    let (l, _) = weibo_lattices_ranked(raw, "w", &vocab).unwrap();
    assert_eq!(l[0].word_ids, vec![0]);
    assert_eq!(
        l[0].char_ids,
        vec![vocab.chars.unseen(), 1],
        "5 unseen, 6 second"
    );
}

#[test]
fn weibo_rejects_malformed_input() {
    let cases = [
        ("", 0, "empty file"),
        ("x\n", 1, "sample count"),
        ("2\n1\n0\n0\n", 0, "file ends after 1 samples"),
        ("1\n2\n0\n0\n1 0 5\n", 3, "1 tags for a sample of length 2"),
        ("1\n2\n0 a\n0\n1 0 5\n", 3, "tag \"a\""),
        (
            "1\n2\n0 0\n0\n2 0 5\n",
            5,
            "node 1: 2 arcs announced but 2 numbers follow",
        ),
        ("1\n2\n0 0\n0\n1 1 5\n", 5, "node 1: arc from node 1"),
        ("1\n2\n0 0\n1 0 4\n1 0 5\n", 4, "node 0: arc from node 0"),
        ("1\n2\n0 0\n0\n1 0 x\n", 5, "word/char id"),
        ("1\n2\n0 0\n0\n", 0, "file ends at node 1"),
        ("1\n2\n0 0\n0\n\n", 5, "blank node line"),
        ("1\n0\n\n", 2, "outside 1..="),
        (
            "1\n1\n0\n0\n7\n",
            5,
            "content after the 1 announced samples",
        ),
    ];
    for (raw, line, want) in cases {
        let e = weibo_lattices(raw, "w.txt").unwrap_err();
        assert_eq!(e.line(), line, "{raw:?}: {e}");
        assert!(e.to_string().contains(want), "{raw:?}: {e}");
        assert!(e.to_string().starts_with(&format!("w.txt:{line}: ")));
    }
}

#[test]
fn wikiner_lengths_and_rare_flags() {
    // "the" occurs 5 times (not rare), "The" once (case-sensitive: rare),
    // "café" has 4 chars, a|b|O is the word "a|b".
    let raw = "the|O the|O The|O\nthe|O café|I-LOC\n\n the|O  the|O a|b|O\n";
    let s = wikiner_sentences(raw, "t").unwrap();
    // Ranks: the (5 times), then The, café, a|b in reading order. Tags index
    // WIKINER_TAGS (O = 0, I-LOC = 4).
    let ids: Vec<_> = s
        .iter()
        .map(|s| (s.word_ids.clone(), s.tags.clone()))
        .collect();
    assert_eq!(
        ids,
        vec![
            (vec![0, 0, 1], vec![0, 0, 0]),
            (vec![0, 2], vec![0, 4]),
            (vec![0, 0, 3], vec![0, 0, 0]),
        ]
    );
    let got: Vec<Vec<(u32, bool)>> = s
        .iter()
        .map(|s| s.words.iter().map(|w| (w.chars, w.rare)).collect())
        .collect();
    assert_eq!(
        got,
        vec![
            vec![(3, false), (3, false), (3, true)],
            vec![(3, false), (4, true)],
            vec![(3, false), (3, false), (3, true)],
        ]
    );
}

#[test]
fn wikiner_rejects_malformed_tokens() {
    for (raw, want) in [
        ("a|O b\n", "\"b\": expected 'word|TAG'"),
        ("|O\n", "empty word"),
        ("a|\n", "empty tag"),
        (
            "a|O b|B-FOO\n",
            "\"b|B-FOO\": unknown tag \"B-FOO\" (expected one of O, B-PER",
        ),
    ] {
        let e = wikiner_sentences(&format!("x|O\n{raw}"), "t.txt")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("t.txt:2: "), "{e}");
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn iwslt_counts_tokens_and_skips_bad_lines() {
    let raw =
        "<s> a b c </s> ||| <s> d e </s>\nno separator\n\n<s> </s> ||| <s> x </s>\nx y ||| z\n";
    let (p, skipped) = iwslt_pairs(raw, "i").unwrap();
    assert_eq!(p, vec![Pair { src: 3, tgt: 2 }, Pair { src: 2, tgt: 1 }]);
    assert_eq!(skipped, 3);
    let (_, st) = iwslt_pairs_detailed(raw, "i").unwrap();
    assert_eq!((st.no_separator, st.empty_side), (2, 1));
    let e = iwslt_pairs("a ||| b\na ||| b ||| c\n", "i.txt")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "i.txt:2: more than one ' ||| ' separator");
}

fn fake_source(dir: &Path) {
    let files: [(&str, &str); 6] = [
        ("trees/train.txt", "(1 (2 a) (2 b))\n"),
        ("trees/dev.txt", "(1 (2 a) (2 (2 b) (3 c)))\n"),
        ("trees/test.txt", "(1 (2 (2 a) (2 b)) (3 c))\n"),
        ("tags/dev.txt", "a|O bb|I-PER\n"),
        (
            "iwslt15/tst2012.en-vi.capped",
            "<s> a </s> ||| <s> b c </s>\n",
        ),
        ("lattice/train.txt", WEIBO),
    ];
    for (p, text) in files {
        let path = dir.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    for split in ["dev", "test"] {
        std::fs::write(dir.join(format!("lattice/{split}.txt")), WEIBO).unwrap();
    }
}

/// `name`, emptied, in this test process's own folder (`common::tmp`): two
/// test runs at once (two `cargo test` in one checkout) must not delete each
/// other's files.
fn tmp(name: &str) -> PathBuf {
    let d = common::tmp(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn convert_all_writes_every_fixture_atomically() {
    let src = tmp("data_convert_src");
    let out = tmp("data_convert_out");
    fake_source(&src);
    let reports = convert::convert_all(&src, &out).unwrap();
    assert_eq!(
        reports.iter().map(|r| r.dataset).collect::<Vec<_>>(),
        Dataset::ALL
    );
    for r in &reports {
        let path = out.join(r.dataset.file_name());
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, r.bytes);
        let s = engine::data::load_fixture_file(&path).unwrap();
        assert_eq!(s.len(), r.samples);
        assert_eq!(s.kind(), r.dataset.kind());
    }
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let sst_dev = std::fs::read_to_string(out.join("sst-dev.trees")).unwrap();
    // Ranked by the train split "(1 (2 a) (2 b))": c is unseen there (id 2).
    assert!(
        sst_dev.ends_with("# samples: 1\n(1 (2 w0) (2 (2 w1) (3 w2)))\n"),
        "{sst_dev}"
    );
    assert!(sst_dev.starts_with("# batchlab fixture v2 trees\n"));
    let pairs = std::fs::read_to_string(out.join("iwslt12-en-vi.pairs")).unwrap();
    assert!(pairs.ends_with("\n1 2\n"));
    std::fs::remove_dir_all(&src).unwrap();
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn convert_all_names_the_missing_raw_file() {
    let src = tmp("data_convert_missing");
    std::fs::create_dir_all(&src).unwrap();
    let out = tmp("data_convert_missing_out");
    let e = convert::convert_all(&src, &out).unwrap_err();
    assert!(e.to_string().contains("trees/train.txt:0: "), "{e}");
    std::fs::remove_dir_all(&src).unwrap();
    // (The converter may have made the output folder before it failed.)
    let _ = std::fs::remove_dir_all(&out);
}

/// Reproducibility check of the shipped fixtures against the raw corpora;
/// needs them, so it only runs when `BATCHLAB_ED_BATCH_DATA` points at the
/// ED-Batch `benchmark/data` folder (`cargo test -- --ignored`).
#[test]
#[ignore = "needs the raw ED-Batch data (set BATCHLAB_ED_BATCH_DATA)"]
fn shipped_fixtures_equal_a_fresh_conversion() {
    let Ok(src) = std::env::var("BATCHLAB_ED_BATCH_DATA") else {
        panic!("set BATCHLAB_ED_BATCH_DATA to the ED-Batch benchmark/data folder");
    };
    let out = tmp("data_convert_real");
    convert::convert_all(Path::new(&src), &out).unwrap();
    for ds in Dataset::ALL {
        let fresh = std::fs::read_to_string(out.join(ds.file_name())).unwrap();
        assert!(
            fresh == engine::data::embedded_text(ds),
            "{ds} differs from data/"
        );
    }
    assert_eq!(Dataset::SstTrain.kind(), StructureKind::Trees);
}
