//! The README's "A short tour" runs as written: every command of its `sh`
//! block, in order, in a scratch folder (beside a link to `results/`), with
//! the binaries this `cargo test` built in place of `target/release/`. A
//! command that fails fails the test, naming its line. Regression (issue
//! 45): the tour ran `engine bench`, which `engine` no longer had.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::harness::{Outcome, skip};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The lines of the `sh` block under the README's "A short tour" heading.
fn tour() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let at = readme
        .find("## A short tour")
        .expect("the README has a section \"A short tour\"");
    let block = &readme[at..];
    let start = block.find("```sh\n").expect("the tour has an sh block") + 6;
    let end = block[start..].find("```").expect("the sh block ends") + start;
    block[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

fn the_readme_tour_runs_as_written() -> Outcome {
    let Some(bins) = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.to_path_buf()))
    else {
        return skip("binaries", "cannot locate this test's executable");
    };
    for tool in ["engine", "search", "planner", "paper-repro"] {
        if !bins.join(tool).is_file() {
            return skip(
                "binaries",
                format!("`{tool}` not built beside this test (run `cargo test --workspace`)"),
            );
        }
    }
    let lines = tour();
    assert!(lines.len() >= 10, "a tour of {} commands", lines.len());
    let scratch = std::env::temp_dir().join(format!("batchlab-tour-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(root().join("results"), scratch.join("results")).unwrap();
    // The variable assignments lead every command; `target/release/` is
    // this build's folder.
    let release = format!("{}/", bins.display());
    let (vars, commands): (Vec<String>, Vec<String>) = lines
        .into_iter()
        .map(|l| l.replace("target/release/", &release))
        .partition(|l| {
            l.split_whitespace().all(|w| {
                w.split_once('=')
                    .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_uppercase()))
            })
        });
    for line in &commands {
        let script = format!("{}\n{line}\n", vars.join("\n"));
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&scratch)
            // No peers' environment: the tour needs none.
            .env("BATCHLAB_PEERS_ENV", scratch.join("no-peers"))
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "the tour's `{line}` failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Outcome::Passed
}

fn main() -> std::process::ExitCode {
    common::harness::main(tests![the_readme_tour_runs_as_written])
}
