//! `add_yaml` is fed random and mutated cell files: it must return, never panic,
//! and whatever it accepts must instantiate, sign and bind without panicking.

use std::path::PathBuf;
use std::sync::OnceLock;

use engine_core::cells::{Cell, CellLibrary};
use proptest::prelude::*;

/// The builtin cell files, read once from disk so the fuzzer mutates real files.
fn builtin_texts() -> &'static [String] {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    TEXTS.get_or_init(read_builtin_texts)
}

fn read_builtin_texts() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cells");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("engine/core/cells exists")
        .map(|e| e.expect("readable dir entry").path())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("readable cell file"))
        .collect()
}

/// Fragments that are likely to reach deeper validation paths when spliced in.
const TOKENS: &[&str] = &[
    "h",
    "4h",
    "0",
    "-1",
    "1.5",
    "99999999999999999999h",
    "18446744073709551615",
    "[",
    "]",
    "{",
    "}",
    ":",
    ", ",
    "- ",
    "\n",
    "\n  ",
    "\t",
    "\"",
    "'",
    "#",
    "x",
    "h_prev",
    "affine",
    "slice",
    "lookup",
    "concat",
    "matmul",
    "mean",
    "sum",
    "pick_loss",
    "start: 0",
    "len: h",
    "len: 9999",
    "many",
    "optional",
    "&a ",
    "*a",
    "<<: *a",
    "!!str ",
    "~",
    "null",
    "[h, h, h]",
    "[h, 2h]",
    "{out: q, op: tanh, args: [q]}",
    "outputs: []",
    "ports: []",
    "---\n",
    "\u{0}",
    "é",
];

#[derive(Debug, Clone)]
enum Mutation {
    Delete {
        at: usize,
        len: usize,
    },
    Insert {
        at: usize,
        token: usize,
    },
    SwapLines {
        a: usize,
        b: usize,
    },
    DuplicateLine {
        line: usize,
    },
    Truncate {
        at: usize,
    },
    /// Replaces one identifier-like word with another word of the file (or a
    /// token); keeps the YAML well formed so validation, not parsing, is hit.
    ReplaceWord {
        nth: usize,
        with: usize,
        use_token: bool,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Word replacement is weighted up: the structural edits mostly produce YAML
    // syntax errors, while word swaps reach the semantic checks.
    prop_oneof![
        1 => (any::<usize>(), 1usize..12).prop_map(|(at, len)| Mutation::Delete { at, len }),
        1 => (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Mutation::Insert { at, token }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        1 => any::<usize>().prop_map(|line| Mutation::DuplicateLine { line }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        6 => (any::<usize>(), any::<usize>(), any::<bool>())
            .prop_map(|(nth, with, use_token)| Mutation::ReplaceWord { nth, with, use_token }),
    ]
}

/// Byte ranges of maximal runs of `[A-Za-z0-9_.]`.
fn words(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        let word = c.is_ascii_alphanumeric() || c == '_' || c == '.';
        match (word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    spans
}

/// Snaps a byte offset down to a char boundary so string surgery stays valid.
fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn apply(text: &str, m: &Mutation) -> String {
    match *m {
        Mutation::Delete { at, len } => {
            let start = boundary(text, at);
            let end = boundary(text, start + len.min(text.len() - start));
            format!("{}{}", &text[..start], &text[end..])
        }
        Mutation::Insert { at, token } => {
            let at = boundary(text, at);
            format!("{}{}{}", &text[..at], TOKENS[token], &text[at..])
        }
        Mutation::SwapLines { a, b } => {
            let mut lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let n = lines.len();
                lines.swap(a % n, b % n);
            }
            lines.join("\n")
        }
        Mutation::DuplicateLine { line } => {
            let mut lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let i = line % lines.len();
                lines.insert(i, lines[i]);
            }
            lines.join("\n")
        }
        Mutation::Truncate { at } => text[..boundary(text, at)].to_owned(),
        Mutation::ReplaceWord {
            nth,
            with,
            use_token,
        } => {
            let spans = words(text);
            if spans.is_empty() {
                return text.to_owned();
            }
            let (s, e) = spans[nth % spans.len()];
            let replacement = if use_token {
                TOKENS[with % TOKENS.len()]
            } else {
                let (ws, we) = spans[with % spans.len()];
                &text[ws..we]
            };
            format!("{}{}{}", &text[..s], replacement, &text[e..])
        }
    }
}

/// Everything a downstream stage does with an accepted cell.
fn exercise(cell: &Cell) {
    for op in 0..cell.ops.len() {
        let sig = cell.op_signature(op, "");
        assert!(sig.ends_with(']'), "{sig}");
    }
    for port in 0..=cell.ports.len() {
        let _ = cell.check_binding(port, cell);
    }
    let _ = cell.param_bytes();
    let _ = cell.output_shapes();
}

fn check(text: &str) {
    let mut lib = CellLibrary::new();
    let Ok(name) = lib.add_yaml(text, "fuzz.yaml") else {
        return;
    };
    for h in [1, 3, 8, 64, usize::MAX / 3, usize::MAX] {
        if let Ok(cell) = lib.instantiate(&name, h) {
            exercise(&cell);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn mutated_builtins_never_panic(
        file in 0usize..64,
        mutations in prop::collection::vec(mutation(), 1..5),
    ) {
        let texts = builtin_texts();
        let mut text = texts[file % texts.len()].clone();
        for m in &mutations {
            text = apply(&text, m);
        }
        check(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_text_never_panics(text in "\\PC{0,200}") {
        check(&text);
    }

    #[test]
    fn random_token_soup_never_panics(tokens in prop::collection::vec(0..TOKENS.len(), 0..60)) {
        let text: String = tokens.iter().map(|&t| TOKENS[t]).collect();
        check(&text);
    }
}

#[test]
fn every_unmutated_builtin_is_accepted_by_add_yaml() {
    for text in builtin_texts() {
        let mut lib = CellLibrary::new();
        let name = lib
            .add_yaml(text, "copy.yaml")
            .expect("builtin files are valid");
        exercise(&lib.instantiate(&name, 8).expect("valid"));
    }
}

#[test]
fn deeply_nested_yaml_is_an_error_not_a_stack_overflow() {
    let text = format!(
        "name: x\nops:\n  - {{out: a, op: sum, args: [{}]}}\noutputs: [a]\n",
        "[".repeat(100_000)
    );
    let msg = CellLibrary::new()
        .add_yaml(&text, "deep.yaml")
        .expect_err("nesting")
        .to_string();
    assert!(msg.starts_with("deep.yaml:3:"), "{msg}");
}
