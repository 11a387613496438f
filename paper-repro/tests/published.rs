//! The published numbers against the papers' text: every quote occurs in
//! `shared/papers/<paper>.txt` (beside the repository, as in CI), starting
//! at the line its source names. Skipped, with a note, where the texts are
//! not there.

mod common;

use std::path::PathBuf;

use common::harness::{Outcome, skip};

use paper_repro::published::{FILES, normalise, parse};

fn papers_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("BATCHLAB_PAPERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/papers"));
    dir.is_dir().then_some(dir)
}

fn every_quote_is_in_the_paper_at_its_line() -> Outcome {
    let Some(dir) = papers_dir() else {
        return skip(
            "papers",
            "shared/papers not found beside the repository (or $BATCHLAB_PAPERS): quotes not checked",
        );
    };
    for (file, text) in FILES {
        let data = parse(text, file).unwrap();
        let paper = std::fs::read_to_string(dir.join(format!("{}.txt", data.paper))).unwrap();
        let lines: Vec<&str> = paper.lines().collect();
        let quotes = data
            .values
            .iter()
            .map(|v| (&v.id, &v.source, &v.quote))
            .chain(data.statements.iter().map(|s| (&s.id, &s.source, &s.quote)));
        for (id, source, quote) in quotes {
            let q = normalise(quote);
            assert!(
                normalise(&paper).contains(&q),
                "{file} {id}: quote not in the paper"
            );
            let line: usize = source
                .rsplit_once(".txt:")
                .and_then(|(_, n)| n.parse().ok())
                .unwrap_or_else(|| panic!("{file} {id}: source {source:?} names no line"));
            assert!(line >= 1 && line <= lines.len(), "{file} {id}: line {line}");
            let from = normalise(&lines[line - 1..(line + 14).min(lines.len())].join("\n"));
            let first = normalise(lines[line - 1]);
            let at = from.find(&q);
            assert!(
                at.is_some_and(|k| k < first.len()),
                "{file} {id}: the quote does not start at line {line}"
            );
        }
    }
    Outcome::Passed
}

fn main() -> std::process::ExitCode {
    common::harness::main(tests![every_quote_is_in_the_paper_at_its_line])
}
