//! Fixture format: parsing, formatting, error messages and the shipped files.

use engine::data::{
    Dataset, Lattice, Pair, Sentence, StructureKind, Structures, Tree, TreeNode, Word,
    embedded_text, fixture_header, format_fixture, load_embedded, load_fixture_file, parse_fixture,
};

mod common;

fn header(kind: &str) -> String {
    format!("# batchlab fixture v1 {kind}\n")
}

fn parse_err(kind: StructureKind, body: &str) -> String {
    let text = format!("{}{body}", header(kind.name()));
    match parse_fixture(&text, kind, "t.txt") {
        Ok(s) => panic!("expected an error for {body:?}, got {s:?}"),
        Err(e) => e.to_string(),
    }
}

fn trees(body: &str) -> Vec<Tree> {
    let text = format!("{}{body}", header("trees"));
    match parse_fixture(&text, StructureKind::Trees, "t.trees") {
        Ok(Structures::Trees(t)) => t,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn tree_line_parses_to_post_order() {
    let t = trees("((xx)x)\n");
    use TreeNode::*;
    assert_eq!(
        t[0].nodes,
        vec![
            Leaf,
            Leaf,
            Internal { left: 0, right: 1 },
            Leaf,
            Internal { left: 2, right: 3 }
        ]
    );
    assert_eq!(t[0].leaves(), 3);
    assert_eq!(t[0].depth(), 3);
    assert_eq!(t[0].root(), 4);
    assert!(t[0].validate().is_ok());
    let single = trees("x\n");
    assert_eq!(single[0].nodes, vec![Leaf]);
    assert_eq!(single[0].depth(), 1);
}

#[test]
fn tree_errors_name_file_line_and_column() {
    let k = StructureKind::Trees;
    // The header is line 1, so the first sample is line 2.
    assert_eq!(
        parse_err(k, "(xx)\n(xxx)\n"),
        "t.txt:3: expected ')' at column 4"
    );
    assert!(
        parse_err(k, "(x)\n").contains("single child"),
        "unary rejected"
    );
    assert!(parse_err(k, "()\n").contains("empty node"));
    assert!(parse_err(k, "(xx)x\n").contains("trailing characters after the tree at column 5"));
    assert!(parse_err(k, "(xx)(xx)\n").contains("trailing"));
    assert!(parse_err(k, "(xx\n").contains("expected ')' at column 4"));
    assert!(parse_err(k, "xx)\n").contains("trailing"));
    assert!(parse_err(k, ")\n").contains("unmatched ')'"));
    assert!(parse_err(k, "(x x)\n").contains("unexpected character ' ' at column 3"));
    assert!(parse_err(k, "\n").starts_with("t.txt:2: empty line"));
    assert!(parse_err(k, "(xx)\r\n").contains("carriage return"));
}

#[test]
fn sentence_and_pair_lines() {
    let text = format!("{}3 5* 2\n# comment\n1\n", header("sentences"));
    let s = parse_fixture(&text, StructureKind::Sentences, "s").unwrap();
    let w = |chars, rare| Word { chars, rare };
    assert_eq!(
        s,
        Structures::Sentences(vec![
            Sentence {
                words: vec![w(3, false), w(5, true), w(2, false)],
                ..Default::default()
            },
            Sentence {
                words: vec![w(1, false)],
                ..Default::default()
            },
        ])
    );
    let k = StructureKind::Sentences;
    assert!(parse_err(k, "3 0 2\n").contains("zero-length word at column 3"));
    assert!(parse_err(k, "3  2\n").contains("empty field at column 3"));
    assert!(parse_err(k, "3 2 \n").contains("empty field"));
    assert!(parse_err(k, "03\n").contains("leading zero"));
    assert!(parse_err(k, "3**\n").contains("expected word length"));
    assert!(parse_err(k, "*\n").contains("missing word length"));
    assert!(parse_err(k, "99999999999\n").contains("out of range"));

    let text = format!("{}18 22\n", header("pairs"));
    let p = parse_fixture(&text, StructureKind::Pairs, "p").unwrap();
    assert_eq!(p, Structures::Pairs(vec![Pair { src: 18, tgt: 22 }]));
    let k = StructureKind::Pairs;
    assert!(parse_err(k, "18\n").contains("missing target length"));
    assert!(parse_err(k, "18 22 3\n").contains("trailing field at column 7"));
    assert!(parse_err(k, "0 2\n").contains("source length is 0"));
    assert!(parse_err(k, "-1 2\n").contains("expected source length"));
}

#[test]
fn lattice_lines() {
    let text = format!("{}5 0-2 1-4\n4 !2\n1\n", header("lattices"));
    let l = parse_fixture(&text, StructureKind::Lattices, "l").unwrap();
    assert_eq!(
        l,
        Structures::Lattices(vec![
            Lattice {
                nodes: 5,
                char_arc: vec![false, true, true, true, true],
                word_arcs: vec![(0, 2), (1, 4)],
                ..Default::default()
            },
            Lattice {
                nodes: 4,
                char_arc: vec![false, true, false, true],
                word_arcs: vec![],
                ..Default::default()
            },
            Lattice {
                nodes: 1,
                char_arc: vec![false],
                word_arcs: vec![],
                ..Default::default()
            },
        ])
    );
    let k = StructureKind::Lattices;
    assert!(
        parse_err(k, "5 1-4 0-2\n").contains("not after 1-4"),
        "unsorted"
    );
    assert!(
        parse_err(k, "5 0-2 0-2\n").contains("not after 0-2"),
        "duplicate"
    );
    assert!(
        parse_err(k, "5 1-3 0-3\n").contains("not after 1-3"),
        "same end, larger start first"
    );
    assert!(
        parse_err(k, "5 1-2\n").contains("need from + 1 < to"),
        "char arc as word arc"
    );
    assert!(
        parse_err(k, "5 0-5\n").contains("need from + 1 < to < 5"),
        "out of range"
    );
    assert!(parse_err(k, "5 0-2 !3\n").contains("after word arcs"));
    assert!(parse_err(k, "5 !3 !2\n").contains("markers strictly increase"));
    assert!(parse_err(k, "5 !0\n").contains("out of range"));
    assert!(parse_err(k, "5 !5\n").contains("out of range"));
    assert!(parse_err(k, "0\n").contains("at least one node"));
    assert!(parse_err(k, "5000000000\n").contains("out of range"));
    assert!(parse_err(k, "2000000\n").contains("exceed the limit"));
    assert!(parse_err(k, "5 0+2\n").contains("expected '!node' or 'from-to' at column 3"));
}

#[test]
fn header_is_mandatory_and_kind_checked() {
    let e = parse_fixture("x\n", StructureKind::Trees, "a.trees").unwrap_err();
    assert_eq!(e.line(), 1);
    assert!(e.to_string().contains("missing fixture header"));
    let e = parse_fixture(
        "# batchlab fixture v1 pairs\n1 2\n",
        StructureKind::Trees,
        "a",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("fixture holds pairs but trees were expected")
    );
    let e = parse_fixture("", StructureKind::Trees, "a").unwrap_err();
    assert_eq!(e.line(), 0);
    let empty = parse_fixture(
        "# batchlab fixture v1 trees\n# only comments\n",
        StructureKind::Trees,
        "a",
    );
    assert_eq!(empty.unwrap(), Structures::Trees(vec![]));
}

#[test]
fn format_writes_header_and_round_trips() {
    let s = Structures::Pairs(vec![Pair { src: 3, tgt: 4 }, Pair { src: 1, tgt: 9 }]);
    let text = format_fixture(&s, &["source: here".into(), String::new(), "a\nb".into()]);
    assert_eq!(
        text,
        "# batchlab fixture v1 pairs\n# source: here\n#\n# a\n# b\n3 4\n1 9\n"
    );
    assert_eq!(fixture_header(&text), vec!["source: here", "", "a", "b"]);
    assert_eq!(parse_fixture(&text, StructureKind::Pairs, "x").unwrap(), s);
}

#[test]
fn format_of_invalid_tree_does_not_panic() {
    // Out-of-range and shared children must not panic or blow up the output.
    let bad = Tree {
        nodes: vec![
            TreeNode::Leaf,
            TreeNode::Internal { left: 0, right: 0 },
            TreeNode::Internal { left: 7, right: 1 },
        ],
        ..Default::default()
    };
    assert!(bad.validate().is_err());
    let text = format_fixture(&Structures::Trees(vec![bad, Tree::default()]), &[]);
    assert_eq!(text, "# batchlab fixture v1 trees\n(x(xx))\n\n");
}

#[test]
fn every_embedded_fixture_parses_and_is_canonical() {
    for ds in Dataset::ALL {
        let text = embedded_text(ds);
        let s = load_embedded(ds).unwrap_or_else(|e| panic!("{ds}: {e}"));
        assert_eq!(s.kind(), ds.kind());
        assert!(!s.is_empty(), "{ds} is empty");
        s.validate().unwrap_or_else(|e| panic!("{ds}: {e}"));
        assert_eq!(
            format_fixture(&s, &fixture_header(text)),
            text,
            "{ds} not canonical"
        );
        let samples = format!("# samples: {}\n", s.len());
        assert!(text.contains(&samples), "{ds}: header sample count");
        assert!(text.contains("\n# licence: "), "{ds}: licence line");
    }
}

#[test]
fn embedded_sample_counts_match_the_raw_data() {
    let counts: Vec<usize> = Dataset::ALL
        .iter()
        .map(|&d| load_embedded(d).unwrap().len())
        .collect();
    assert_eq!(counts, vec![8550, 1107, 2210, 1147, 113, 316, 1696, 1553]);
}

#[test]
fn dataset_names_parse_and_list_valid_names_on_error() {
    for ds in Dataset::ALL {
        assert_eq!(ds.name().parse::<Dataset>(), Ok(ds));
        assert!(ds.file_name().ends_with(ds.kind().extension()));
        let json = serde_json::to_string(&ds).unwrap();
        assert_eq!(json, format!("\"{}\"", ds.name()));
        assert_eq!(serde_json::from_str::<Dataset>(&json).unwrap(), ds);
    }
    let e = "sst".parse::<Dataset>().unwrap_err().to_string();
    assert!(e.contains("unknown dataset 'sst'"));
    assert!(e.contains("sst-train") && e.contains("iwslt2012"));
}

#[test]
fn load_fixture_file_uses_the_extension() {
    let dir = common::tmp("data_fixtures_load");
    std::fs::create_dir_all(&dir).unwrap();
    let ok = dir.join("a.sents");
    std::fs::write(&ok, "# batchlab fixture v1 sentences\n2 3*\n").unwrap();
    assert_eq!(load_fixture_file(&ok).unwrap().len(), 1);

    let wrong = dir.join("a.pairs");
    std::fs::write(&wrong, "# batchlab fixture v1 sentences\n2 3*\n").unwrap();
    let e = load_fixture_file(&wrong).unwrap_err().to_string();
    assert!(
        e.ends_with("a.pairs:1: fixture holds sentences but pairs were expected"),
        "{e}"
    );

    let e = load_fixture_file(&dir.join("a.txt"))
        .unwrap_err()
        .to_string();
    assert!(e.contains(":0: unknown fixture extension 'txt'"), "{e}");
    let e = load_fixture_file(&dir.join("missing.trees")).unwrap_err();
    assert!(matches!(e, engine::data::DataError::Io { line: 0, .. }));
    assert!(e.to_string().contains("missing.trees:0: "));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn deep_trees_do_not_overflow_the_stack() {
    // Regression guard: recursive parsing/formatting of a 100k-deep
    // caterpillar would overflow the default test-thread stack.
    let n = 100_000;
    let line = format!("{}x{}", "(x".repeat(n), ")".repeat(n));
    let t = trees(&format!("{line}\n"));
    assert_eq!(t[0].depth(), n + 1);
    assert_eq!(t[0].leaves(), n + 1);
    t[0].validate().unwrap();
    let text = format_fixture(&Structures::Trees(t), &[]);
    assert_eq!(text.lines().nth(1), Some(line.as_str()));

    let raw = format!("{}(1 a){}", "(1 ".repeat(n), " (1 b))".repeat(n));
    let t = engine::data::convert::sst_trees(&raw, "deep").unwrap();
    assert_eq!(t[0].depth(), n + 1);
}

fn v2(kind: &str, body: &str) -> String {
    format!("# batchlab fixture v2 {kind}\n{body}")
}

fn v2_err(kind: StructureKind, body: &str) -> String {
    match parse_fixture(&v2(kind.name(), body), kind, "t.txt") {
        Ok(s) => panic!("expected an error for {body:?}, got {s:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn v2_tree_lines_carry_labels_and_word_ids() {
    let text = v2("trees", "(3 (2 w17) (4 (0 w5) (1 w0)))\n(2 w9)\n");
    let s = parse_fixture(&text, StructureKind::Trees, "t").unwrap();
    let Structures::Trees(t) = &s else {
        panic!("{s:?}")
    };
    use TreeNode::*;
    assert_eq!(
        t[0].nodes,
        vec![
            Leaf,
            Leaf,
            Leaf,
            Internal { left: 1, right: 2 },
            Internal { left: 0, right: 3 }
        ]
    );
    assert_eq!(t[0].labels, vec![2, 0, 1, 4, 3], "post-order");
    assert_eq!(t[0].word_ids, vec![17, 5, 0], "leaf order");
    assert_eq!(
        (t[1].labels.clone(), t[1].word_ids.clone()),
        (vec![2], vec![9])
    );
    s.validate().unwrap();
    assert_eq!(format_fixture(&s, &fixture_header(&text)), text);
}

#[test]
fn v2_tree_errors_name_line_and_column() {
    let k = StructureKind::Trees;
    let cases = [
        ("(3 (2 w1))\n", "t.txt:2: expected ' ' at column 10"),
        (
            "(3 (2 w1) (2 w2)\n",
            "expected ')' at column 17 (end of line)",
        ),
        (
            "(3 (2 w1) (2 w2)) x\n",
            "trailing characters after the tree at column 18",
        ),
        (
            "(3  (2 w1) (2 w2))\n",
            "expected '(' at column 4, found ' '",
        ),
        ("(03 (2 w1) (2 w2))\n", "leading zero in label at column 2"),
        (
            "(3 (2 w01) (2 w2))\n",
            "leading zero in word id at column 8",
        ),
        (
            "(x w1)\n",
            "expected label (a number) at column 2, found 'x'",
        ),
        (
            "(3 (2 w) (2 w2))\n",
            "expected word id (a number) at column 8, found ')'",
        ),
        ("(3 (2 x1) (2 w2))\n", "expected '(' at column 7, found 'x'"),
        (
            "((xx)x)\n",
            "expected label (a number) at column 2, found '('",
        ),
        ("(4294967296 w1)\n", "label at column 2 is out of range"),
        (
            "(1 wé)\n",
            "expected word id (a number) at column 5, found 'é'",
        ),
        ("\n", "t.txt:2: empty line"),
    ];
    for (body, want) in cases {
        let e = v2_err(k, body);
        assert!(e.contains(want), "{body:?}: {e}");
    }
    // A v1 file does not take v2 lines, and the other way round.
    assert!(parse_err(k, "(3 (2 w1) (2 w2))\n").contains("unexpected character"));
}

#[test]
fn v2_sentences_and_lattices() {
    let text = v2("sentences", "3:0:0 5*:1520:2 2:7:8\n");
    let s = parse_fixture(&text, StructureKind::Sentences, "s").unwrap();
    let Structures::Sentences(v) = &s else {
        panic!("{s:?}")
    };
    assert_eq!(v[0].word_ids, vec![0, 1520, 7]);
    assert_eq!(v[0].tags, vec![0, 2, 8]);
    assert!(v[0].words[1].rare);
    assert_eq!(format_fixture(&s, &[]), text);

    let text = v2(
        "lattices",
        "4 0-2:31 | 0 3:12 3:5 7:0\n5 !3 1-4:2 2-4:9 | 0 1:1 2:2 3 4:4\n1 | 5\n",
    );
    let s = parse_fixture(&text, StructureKind::Lattices, "l").unwrap();
    let Structures::Lattices(v) = &s else {
        panic!("{s:?}")
    };
    assert_eq!(v[0].word_ids, vec![31]);
    assert_eq!(v[0].tags, vec![0, 3, 3, 7]);
    assert_eq!(v[0].char_ids, vec![12, 5, 0]);
    assert_eq!(v[1].char_arc, vec![false, true, true, false, true]);
    assert_eq!(v[1].char_ids, vec![1, 2, 4]);
    assert_eq!(v[1].word_ids, vec![2, 9]);
    assert_eq!((v[2].tags.clone(), v[2].char_ids.len()), (vec![5], 0));
    s.validate().unwrap();
    assert_eq!(format_fixture(&s, &[]), text);

    let k = StructureKind::Sentences;
    assert!(v2_err(k, "3:0\n").contains("expected '<length>[*]:<word id>:<tag>' at column 1"));
    assert!(v2_err(k, "3:0:1 4:x:1\n").contains("word id (a number) at column 9"));
    assert!(v2_err(k, "3:0:1:2\n").contains("expected tag (a number) at column 5"));
    assert!(v2_err(k, "3\n").contains("expected '<length>[*]:<word id>:<tag>'"));
    let k = StructureKind::Lattices;
    assert!(v2_err(k, "3 0-2:1\n").contains("missing ' |' and the node annotations"));
    assert!(v2_err(k, "3 0-2 | 0 1:1 2:2\n").contains("'from-to:word id' or '|' at column 3"));
    assert!(v2_err(k, "3 | 0 1:1\n").contains("2 node annotations for 3 nodes"));
    assert!(v2_err(k, "2 | 0 1:1 2:2\n").contains("beyond the 2 nodes"));
    assert!(v2_err(k, "2 | 0:4 1:1\n").contains("node 0 at column 5 has no char arc"));
    assert!(v2_err(k, "2 | 0 1\n").contains("node 1 at column 7 has a char arc"));
    assert!(v2_err(k, "2 | 0 1:01\n").contains("leading zero in char id at column 9"));
    assert!(v2_err(k, "2 |\n").contains("0 node annotations for 2 nodes"));
}

#[test]
fn versions_are_checked_and_written_as_needed() {
    let e = parse_fixture(
        "# batchlab fixture v3 trees\nx\n",
        StructureKind::Trees,
        "a",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("a:1: unsupported fixture version v3 (this build reads v1 and v2)"),
        "{e}"
    );
    let e = parse_fixture(
        "# batchlab fixture v2 pairs\n1 2\n",
        StructureKind::Pairs,
        "a",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("pairs have no version 2"), "{e}");
    let e = parse_fixture(
        "# batchlab fixture v2 trees\n",
        StructureKind::Sentences,
        "a",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("fixture holds trees but sentences were expected"),
        "{e}"
    );
    // Structure-only data keeps version 1, annotated data gets version 2.
    let plain = Structures::Trees(vec![Tree::new(vec![TreeNode::Leaf])]);
    assert!(format_fixture(&plain, &[]).starts_with("# batchlab fixture v1 trees\n"));
    let labelled = Structures::Trees(vec![Tree {
        nodes: vec![TreeNode::Leaf],
        labels: vec![1],
        word_ids: vec![2],
    }]);
    assert_eq!(
        format_fixture(&labelled, &[]),
        "# batchlab fixture v2 trees\n(1 w2)\n"
    );
    assert_eq!(
        fixture_header("# batchlab fixture v2 trees\n# a\n(1 w2)\n"),
        vec!["a"]
    );
}

#[test]
fn annotations_are_validated() {
    let mut t = Tree {
        nodes: vec![
            TreeNode::Leaf,
            TreeNode::Leaf,
            TreeNode::Internal { left: 0, right: 1 },
        ],
        labels: vec![1, 2],
        word_ids: vec![3, 4],
    };
    let e = t.validate().unwrap_err().0;
    assert!(e.contains("2 labels for 3 nodes"), "{e}");
    t.labels.push(0);
    t.validate().unwrap();
    t.word_ids.pop();
    assert!(
        t.validate()
            .unwrap_err()
            .0
            .contains("1 word ids for 2 leaves")
    );
    t.word_ids.push(4);
    // Every sample annotated, or none.
    let e = Structures::Trees(vec![t.clone(), Tree::new(t.nodes.clone())])
        .validate()
        .unwrap_err()
        .0;
    assert!(
        e.starts_with("sample 1: sample 0 is annotated but this one is not"),
        "{e}"
    );
    let mut l = Lattice::new(3, vec![false, true, true], vec![]);
    l.tags = vec![0, 1, 2];
    l.char_ids = vec![5];
    assert!(
        l.validate()
            .unwrap_err()
            .0
            .contains("1 char ids for 2 char arcs")
    );
    let s = Sentence {
        words: vec![Word {
            chars: 1,
            rare: false,
        }],
        word_ids: vec![1],
        tags: vec![],
    };
    assert!(s.validate().unwrap_err().0.contains("0 tags for 1 words"));
}

#[test]
fn shipped_annotations_are_in_range() {
    for ds in [Dataset::SstTrain, Dataset::SstDev, Dataset::SstTest] {
        assert!(embedded_text(ds).starts_with("# batchlab fixture v2 trees\n"));
        let Structures::Trees(trees) = load_embedded(ds).unwrap() else {
            panic!("{ds}")
        };
        for t in &trees {
            assert!(
                t.labels.iter().all(|&l| l < 5),
                "{ds}: SST labels are 0..=4"
            );
            assert_eq!(t.word_ids.len(), t.leaves());
        }
    }
    let Structures::Sentences(s) = load_embedded(Dataset::WikinerDev).unwrap() else {
        panic!()
    };
    assert!(s.iter().flat_map(|s| &s.tags).all(|&t| t < 9));
    assert!(s.iter().flat_map(|s| &s.word_ids).any(|&w| w == 0));
    let Structures::Lattices(l) = load_embedded(Dataset::WeiboDev).unwrap() else {
        panic!()
    };
    assert!(l.iter().all(|l| l.tags[0] == 0), "node 0 is the start tag");
    assert!(embedded_text(Dataset::Iwslt2012).starts_with("# batchlab fixture v1 pairs\n"));
}
