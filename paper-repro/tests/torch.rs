//! `batchlab_torch` (`engine/torch`, docs/torch.md): its pytest suite —
//! the example models recorded, checked on every CPU executor, searched,
//! planned, trained and run by `bt.run` against PyTorch, and reported on by
//! `paper-repro model --torch`; the lowering rules; the bad models and
//! folders — run in the project's
//! Python environment with the binaries this `cargo test` built. Without
//! that environment (or PyTorch in it) it skips visibly, naming the
//! install command.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::harness::{Outcome, skip};

/// The folder of the binaries next to this test's executable
/// (`target/<profile>`).
fn bin_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.to_path_buf())
}

fn batchlab_torch_pytest_suite_passes() -> Outcome {
    let dir = paper_repro::peers_env::default_dir(None);
    let env = match paper_repro::peers_env::open(&dir) {
        Ok(e) => e,
        Err(why) => return skip("torch", why.to_string()),
    };
    if let Some(Err(why)) = env.frameworks.get("torch") {
        return skip("torch", format!("no PyTorch in {}: {why}", dir.display()));
    }
    let src = paper_repro::peers_env::batchlab_torch_source();
    let mut cmd = Command::new(&env.python);
    cmd.args([
        "-m",
        "pytest",
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        "tests",
    ])
    .current_dir(&src)
    .env("PYTHONPATH", &src)
    .env("PYTHONDONTWRITEBYTECODE", "1")
    .env("OMP_NUM_THREADS", "1");
    let mut missing = Vec::new();
    for tool in ["engine", "search", "planner", "paper-repro"] {
        match bin_dir().map(|d| d.join(tool)).filter(|p| p.is_file()) {
            Some(p) => {
                cmd.env(
                    format!("BATCHLAB_{}", tool.to_uppercase().replace('-', "_")),
                    p,
                );
            }
            None => missing.push(tool),
        }
    }
    if !missing.is_empty() {
        return skip(
            "binaries",
            format!(
                "{} not built beside this test (run `cargo test --workspace`)",
                missing.join(", ")
            ),
        );
    }
    let out = cmd.output().expect("python starts");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pytest failed:\n{text}");
    // With every binary given, only the CUDA bodies may skip (no GPU here);
    // their reasons are shown.
    let skips: Vec<&str> = text.lines().filter(|l| l.starts_with("SKIPPED")).collect();
    for s in &skips {
        eprintln!("{s}");
    }
    assert!(
        skips.iter().all(|s| s.contains("no CUDA device")),
        "pytest skipped tests although every binary was given:\n{text}"
    );
    eprintln!(
        "{}",
        text.lines()
            .rev()
            .find(|l| l.contains("passed"))
            .unwrap_or("")
    );
    Outcome::Passed
}

fn main() -> std::process::ExitCode {
    common::harness::main(tests![batchlab_torch_pytest_suite_passes,])
}
