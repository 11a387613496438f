//! Every path the README, ARCHITECTURE.md, `docs/` and `results/README.md` cite exists in
//! the tree: a file or folder named alone in backticks (`results/NAME`,
//! `docs/torch.md`, `search/src/trainer/`) or as a Markdown link target. A
//! command in backticks (it has spaces) cites nothing; a path with a
//! placeholder (`NAME`, `<x>`, `*`, `{a,b}`, `$VAR`, `...`) is a pattern; and
//! `REV:results/NAME` names a run kept in the history, not in the tree.
//! Regression: docs cited runs and files that had been moved or removed.

use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The top-level folders a cited path starts with.
const TOPS: [&str; 10] = [
    "results/",
    "docs/",
    "scripts/",
    "engine/",
    "search/",
    "planner/",
    "experiments/",
    "figures/",
    "paper-repro/",
    ".ci/",
];

/// The Markdown files that cite paths.
fn cited_in() -> Vec<PathBuf> {
    let mut files = vec![
        PathBuf::from("README.md"),
        PathBuf::from("results/README.md"),
    ];
    let mut stack = vec![PathBuf::from("docs")];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(root().join(&dir))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        entries.sort();
        for name in entries {
            let rel = dir.join(&name);
            if root().join(&rel).is_dir() {
                stack.push(rel);
            } else if rel.extension().is_some_and(|e| e == "md") {
                files.push(rel);
            }
        }
    }
    files
}

/// What `text` cites: spans in backticks without spaces (`false`), and
/// link targets (`true`: relative to the citing file).
fn candidates(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 1 && !span.contains(char::is_whitespace) && !span.is_empty() {
            out.push((span.to_string(), false));
        }
    }
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = &after[..end];
        if !target.contains(char::is_whitespace) {
            out.push((target.to_string(), true));
        }
        rest = &after[end..];
    }
    out
}

/// A pattern rather than a path: a placeholder in it (an upper-case word
/// that is not a file's conventional name).
fn is_pattern(p: &str) -> bool {
    const NAMES: [&str; 4] = ["README", "REPORT", "ARCHITECTURE", "LICENSE"];
    p.contains(['<', '>', '*', '{', '}', '$', '…'])
        || p.contains("...")
        || p.split(['/', '.', '-', '_']).any(|w| {
            w.len() >= 2 && w.chars().all(|c| c.is_ascii_uppercase()) && !NAMES.contains(&w)
        })
}

/// `c` as a path from the root, if it cites one; `from` is the citing file,
/// `link` whether `c` is a link target (resolved from `from`'s folder).
fn as_path(c: &str, from: &Path, link: bool) -> Option<String> {
    let c = c
        .trim_start_matches(|ch: char| "(\"'".contains(ch))
        .trim_end_matches(|ch: char| ".,;:)\"'".contains(ch));
    if c.contains("://") || c.starts_with('#') {
        return None;
    }
    // `REV:path`: a revision's tree, not this one.
    if let Some((rev, _)) = c.split_once(':')
        && rev.len() >= 7
        && rev.chars().all(|ch| ch.is_ascii_hexdigit())
    {
        return None;
    }
    let c = c.split('#').next().unwrap_or(c);
    // `file.rs::ITEM`: an item in a file.
    let c = c.split("::").next().unwrap_or(c);
    let path = if TOPS.iter().any(|t| c.starts_with(t)) {
        c.to_string()
    } else if link && !c.contains(':') {
        // Relative to the citing file's folder (links in docs/ and results/).
        let base = from.parent().unwrap_or(Path::new(""));
        let mut parts: Vec<String> = base
            .components()
            .map(|p| p.as_os_str().to_string_lossy().into_owned())
            .collect();
        for seg in c.split('/') {
            match seg {
                ".." => {
                    parts.pop();
                }
                "." | "" => {}
                s => parts.push(s.to_string()),
            }
        }
        let joined = parts.join("/");
        if !TOPS.iter().any(|t| joined.starts_with(t)) {
            return None;
        }
        joined
    } else {
        return None;
    };
    // `file.rs:120`: a line in a file.
    let path = match path.rsplit_once(':') {
        Some((p, line)) if line.chars().all(|ch| ch.is_ascii_digit() || ch == '-') => p.to_string(),
        _ => path,
    };
    (!is_pattern(&path)).then_some(path)
}

#[test]
fn every_path_the_readme_and_docs_cite_exists() {
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in cited_in() {
        let text = std::fs::read_to_string(root().join(&file)).unwrap();
        for (c, link) in candidates(&text) {
            if let Some(p) = as_path(&c, &file, link) {
                checked += 1;
                if !root().join(&p).exists() {
                    missing.push(format!("{}: `{c}` ({p})", file.display()));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} cited paths found: the scan is broken"
    );
    assert!(
        missing.is_empty(),
        "cited but missing:\n{}",
        missing.join("\n")
    );
}

#[test]
fn citations_are_read_as_paths_patterns_or_history() {
    let from = Path::new("docs/x.md");
    let cite = |c: &str| as_path(c, from, false);
    assert_eq!(
        cite("results/run-a/README.md").as_deref(),
        Some("results/run-a/README.md")
    );
    assert_eq!(
        cite("engine/src/lib.rs:12").as_deref(),
        Some("engine/src/lib.rs")
    );
    assert_eq!(
        cite("paper-repro/src/specs.rs::EMBEDDED").as_deref(),
        Some("paper-repro/src/specs.rs")
    );
    assert_eq!(cite("166193ea:results/old-run"), None);
    assert_eq!(cite("results/NAME/rows"), None);
    assert_eq!(cite("engine/fuzz/seeds/<target>/"), None);
    assert_eq!(cite("run-c"), None);
    assert_eq!(
        as_path("../results/run-b", from, true).as_deref(),
        Some("results/run-b")
    );
    assert_eq!(
        as_path("run-c", Path::new("results/README.md"), true).as_deref(),
        Some("results/run-c")
    );
    assert_eq!(
        candidates("see `a/b` and `cargo test` and [x](docs/y.md)"),
        [("a/b".to_string(), false), ("docs/y.md".to_string(), true)]
    );
}

/// `results/` stays under 15 MB: the working tree travels to the GPU
/// machine with the binaries it runs, 64 MiB in all, and it
/// once held 80 MB of reruns and rows stored three times.
#[test]
fn results_stay_under_15_mb() {
    fn size(p: &Path) -> u64 {
        let m = std::fs::symlink_metadata(p).unwrap();
        if m.is_dir() {
            std::fs::read_dir(p)
                .unwrap()
                .map(|e| size(&e.unwrap().path()))
                .sum()
        } else {
            m.len()
        }
    }
    let bytes = size(&root().join("results"));
    assert!(bytes < 15_000_000, "results/ holds {bytes} bytes");
    assert!(
        root().join("results/README.md").exists(),
        "results/ has no index"
    );
}
