//! Fixture format: parsing, formatting, error messages and the shipped files.

use engine::data::{
    Dataset, Lattice, Pair, Sentence, StructureKind, Structures, Tree, TreeNode, Word,
    embedded_text, fixture_header, format_fixture, load_embedded, load_fixture_file, parse_fixture,
};

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
                words: vec![w(3, false), w(5, true), w(2, false)]
            },
            Sentence {
                words: vec![w(1, false)]
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
            },
            Lattice {
                nodes: 4,
                char_arc: vec![false, true, false, true],
                word_arcs: vec![],
            },
            Lattice {
                nodes: 1,
                char_arc: vec![false],
                word_arcs: vec![],
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
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("data_fixtures_load");
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
