//! Property tests: parsers and converters never panic on arbitrary input,
//! and whatever a parser accepts is valid and formats back to the same text.

use engine::data::convert::{iwslt_pairs, sst_trees, weibo_lattices, wikiner_sentences};
use engine::data::synthetic::{random_lattice, random_tree};
use engine::data::{StructureKind, Structures, fixture_header, format_fixture, parse_fixture};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Bodies drawn from the characters the grammars use, so that a good share
/// of inputs get deep into the parsers instead of failing on the first byte.
fn near_miss_body() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[x()0-9 *!\\-#\nw:|]{0,80}").unwrap()
}

/// Lines that are often valid for `kind`, sometimes not (out-of-order arcs,
/// zeros, leading zeros, unbalanced brackets, comments), to check that
/// acceptance implies validity and canonical round trips.
fn plausible_body(kind: StructureKind) -> impl Strategy<Value = String> {
    let line = match kind {
        StructureKind::Trees => "x|\\((x|\\(xx\\))(x|\\(xx\\)|\\(x\\(xx\\)\\))\\)|[x()]{1,12}",
        StructureKind::Sentences => "[0-9]{1,2}\\*?( [0-9]{1,2}\\*?){0,6}",
        StructureKind::Pairs => "[0-9]{1,2} [0-9]{1,2}( [0-9])?",
        StructureKind::Lattices => {
            "[0-9]{1,2}( ![0-9]){0,2}( [0-9]-[0-9]{1,2}){0,4}|[1-9][0-9]( ![1-9])?( [0-9]-[1-4][0-9]){0,2}"
        }
    };
    lines_of(line)
}

/// Like [`plausible_body`], for the version-2 (annotated) grammars.
fn plausible_v2_body(kind: StructureKind) -> impl Strategy<Value = String> {
    let line = match kind {
        StructureKind::Trees => {
            "\\([0-4] w[0-9]{1,2}\\)|\\([0-4] \\([0-4] w[0-9]\\) \\([0-4] (w[0-9]|\\(1 w2\\) \\(0 w03\\))\\)\\)|[0-9w() ]{1,14}"
        }
        StructureKind::Sentences => {
            "[0-9]{1,2}\\*?:[0-9]{1,2}:[0-9]( [0-9]{1,2}\\*?(:[0-9]){1,3}){0,5}"
        }
        StructureKind::Pairs => "[0-9]{1,2} [0-9]{1,2}",
        StructureKind::Lattices => {
            "[1-6]( !2)?( [0-3]-[2-5]:[0-9]){0,2}( \\|)?( [0-9](:[0-9])?){0,6}"
        }
    };
    lines_of(line)
}

fn lines_of(line: &str) -> impl Strategy<Value = String> {
    let line = prop_oneof![
        9 => proptest::string::string_regex(line).unwrap(),
        1 => proptest::string::string_regex("#[ a-z]{0,4}").unwrap(),
    ];
    proptest::collection::vec(line, 0..6)
        .prop_map(|ls| ls.iter().map(|l| format!("{l}\n")).collect())
}

fn check_fixture(kind: StructureKind, body: &str) {
    let v1 = format!("# batchlab fixture v1 {}\n{body}", kind.name());
    let v2 = format!("# batchlab fixture v2 {}\n{body}", kind.name());
    for input in [body, v1.as_str(), v2.as_str()] {
        if let Ok(s) = parse_fixture(input, kind, "prop") {
            assert_eq!(s.kind(), kind);
            s.validate().unwrap();
            // The version read is the version written.
            if input == v1 {
                assert!(!s.is_annotated());
            } else if !s.is_empty() {
                assert!(s.is_annotated(), "a v2 fixture is annotated");
            }
            // Canonical input (no interleaved comments, final newline)
            // round-trips exactly; any accepted input re-parses identically.
            // A v2 file without samples has nothing annotated: it is written
            // back as v1.
            let again = format_fixture(&s, &fixture_header(input));
            assert_eq!(parse_fixture(&again, kind, "prop").unwrap(), s);
            if is_canonical(input) {
                if input == v2 && s.is_empty() {
                    assert_eq!(again.replacen("fixture v1", "fixture v2", 1), input);
                } else {
                    assert_eq!(again, input);
                }
            }
        }
    }
}

/// Comments only before the samples, each `#` or `# <text>`, no `\r`, and a
/// final newline: the shape `format_fixture` writes.
fn is_canonical(input: &str) -> bool {
    let comment_ok = |l: &str| l == "#" || (l.starts_with("# ") && l.len() > 2);
    input.ends_with('\n')
        && !input.contains('\r')
        && input
            .lines()
            .take_while(|l| l.starts_with('#'))
            .all(comment_ok)
        && input
            .lines()
            .skip_while(|l| l.starts_with('#'))
            .all(|l| !l.starts_with('#'))
}

proptest! {
    #[test]
    fn fixture_parsers_never_panic_on_random_strings(body in any::<String>()) {
        for kind in StructureKind::ALL {
            check_fixture(kind, &body);
        }
    }

    #[test]
    fn fixture_parsers_never_panic_on_near_misses(body in near_miss_body()) {
        for kind in StructureKind::ALL {
            check_fixture(kind, &body);
        }
    }

    #[test]
    fn plausible_fixtures_parse_valid_or_fail_cleanly(
        t in plausible_body(StructureKind::Trees),
        s in plausible_body(StructureKind::Sentences),
        p in plausible_body(StructureKind::Pairs),
        l in plausible_body(StructureKind::Lattices),
    ) {
        check_fixture(StructureKind::Trees, &t);
        check_fixture(StructureKind::Sentences, &s);
        check_fixture(StructureKind::Pairs, &p);
        check_fixture(StructureKind::Lattices, &l);
    }

    #[test]
    fn plausible_v2_fixtures_parse_valid_or_fail_cleanly(
        t in plausible_v2_body(StructureKind::Trees),
        s in plausible_v2_body(StructureKind::Sentences),
        l in plausible_v2_body(StructureKind::Lattices),
    ) {
        check_fixture(StructureKind::Trees, &t);
        check_fixture(StructureKind::Sentences, &s);
        check_fixture(StructureKind::Lattices, &l);
    }

    #[test]
    fn converters_never_panic(raw in any::<String>(), near in "[()a-z0-9 |<>/s\n\u{a0}]{0,80}") {
        for input in [raw.as_str(), near.as_str()] {
            if let Ok(t) = sst_trees(input, "p") {
                t.iter().for_each(|t| t.validate().unwrap());
            }
            if let Ok(l) = weibo_lattices(input, "p") {
                l.iter().for_each(|l| l.validate().unwrap());
            }
            if let Ok(s) = wikiner_sentences(input, "p") {
                s.iter().for_each(|s| s.validate().unwrap());
            }
            if let Ok((p, _)) = iwslt_pairs(input, "p") {
                p.iter().for_each(|p| p.validate().unwrap());
            }
        }
    }

    #[test]
    fn weibo_converter_never_panics_on_numeric_input(raw in "[0-9 \n]{0,60}") {
        if let Ok(l) = weibo_lattices(&raw, "p") {
            l.iter().for_each(|l| l.validate().unwrap());
        }
    }

    #[test]
    fn random_structures_round_trip(seed in any::<u64>(), n in 1u32..60, p in 0.0f64..1.0) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let s = Structures::Trees(vec![random_tree(&mut rng, n)]);
        let text = format_fixture(&s, &[]);
        prop_assert_eq!(parse_fixture(&text, StructureKind::Trees, "p").unwrap(), s);
        let mut l = random_lattice(&mut rng, n, p, 6);
        // Exercise start-node markers too.
        for i in (1..n as usize).step_by(7) {
            l.char_arc[i] = false;
        }
        let s = Structures::Lattices(vec![l.clone()]);
        let text = format_fixture(&s, &[]);
        prop_assert_eq!(parse_fixture(&text, StructureKind::Lattices, "p").unwrap(), s);

        // Annotated (v2): arbitrary ids and labels on the same shapes.
        let draw = |rng: &mut Xoshiro256PlusPlus, k: usize| -> Vec<u32> {
            (0..k)
                .map(|_| {
                    let shift = rng.random_range(0..32u32);
                    rng.random_range(0..=u32::MAX >> shift)
                })
                .collect()
        };
        let mut t = random_tree(&mut rng, n);
        t.labels = draw(&mut rng, t.len());
        t.word_ids = draw(&mut rng, t.leaves());
        let s = Structures::Trees(vec![t]);
        let text = format_fixture(&s, &[]);
        prop_assert!(text.starts_with("# batchlab fixture v2 trees\n"));
        prop_assert_eq!(parse_fixture(&text, StructureKind::Trees, "p").unwrap(), s);
        l.tags = draw(&mut rng, l.nodes as usize);
        l.char_ids = draw(&mut rng, l.char_arc.iter().filter(|&&c| c).count());
        l.word_ids = draw(&mut rng, l.word_arcs.len());
        let s = Structures::Lattices(vec![l]);
        s.validate().unwrap();
        let text = format_fixture(&s, &[]);
        prop_assert_eq!(parse_fixture(&text, StructureKind::Lattices, "p").unwrap(), s);
    }
}
