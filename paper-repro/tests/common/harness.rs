//! A test harness whose skips show, for the test files that need an
//! optional environment (DyNet, PyTorch, DGL): libtest reports a test that
//! returned early as `ok` and hides what it printed, so a missing
//! environment read as a pass. These files set `harness = false` and call
//! [`main`]: each test returns [`Outcome::Passed`] or
//! [`Outcome::Skipped`], and every skip is printed as `test NAME ...
//! SKIPPED: why` (with the install command) and counted in the summary.
//!
//! `BATCHLAB_REQUIRE=dynet,torch,dgl` (what `.ci/run` sets for the
//! environments it installed) turns a skip for want of one of them into a
//! failure: on CI a missing environment is an error, not a skip.
//!
//! The arguments are libtest's where they matter here: name filters,
//! `--exact`, `--skip NAME`, `--list`, and `--ignored` (no test here is
//! ignored, so it selects none).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::ExitCode;

/// What a test found.
pub enum Outcome {
    /// It ran and every check held.
    Passed,
    /// It could not run: `needs` names the environment (`dynet`, `torch`,
    /// `dgl`, or another word for a part no environment provides), `why`
    /// says what is missing and how to install it.
    Skipped { needs: &'static str, why: String },
}

/// A skip for want of `needs`.
pub fn skip(needs: &'static str, why: impl Into<String>) -> Outcome {
    Outcome::Skipped {
        needs,
        why: why.into(),
    }
}

/// One test: its name and body.
pub type Test = (&'static str, fn() -> Outcome);

/// The tests of a file, each named by its function: `tests![a, b]`.
#[macro_export]
macro_rules! tests {
    ($($f:ident),* $(,)?) => {
        &[$((stringify!($f), $f as fn() -> $crate::common::harness::Outcome)),*]
    };
}

/// Which of `names` the libtest-style `args` select (`None`: only list).
fn selected(args: &[String], names: &[&'static str]) -> Option<Vec<&'static str>> {
    const VALUED: [&str; 4] = ["--test-threads", "--format", "--color", "--logfile"];
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--list" => {
                for n in names {
                    println!("{n}: test");
                }
                return None;
            }
            "--ignored" => return Some(Vec::new()),
            "--skip" => skips.extend(it.next().cloned()),
            v if VALUED.contains(&v) => {
                it.next();
            }
            f if !f.starts_with('-') => filters.push(f.to_string()),
            _ => {}
        }
    }
    let exact = args.iter().any(|a| a == "--exact");
    let hit = |n: &str, f: &str| if exact { n == f } else { n.contains(f) };
    Some(
        names
            .iter()
            .copied()
            .filter(|n| filters.is_empty() || filters.iter().any(|f| hit(n, f)))
            .filter(|n| !skips.iter().any(|s| n.contains(s.as_str())))
            .collect(),
    )
}

/// The environments `BATCHLAB_REQUIRE` names.
fn required() -> Vec<String> {
    std::env::var("BATCHLAB_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Runs the selected `tests` one after another and prints libtest's lines,
/// skips included; fails when a test panicked or skipped for want of a
/// required environment.
pub fn main(tests: &[Test]) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<&'static str> = tests.iter().map(|t| t.0).collect();
    let Some(chosen) = selected(&args, &names) else {
        return ExitCode::SUCCESS;
    };
    let require = required();
    println!("\nrunning {} tests", chosen.len());
    let (mut passed, mut skipped, mut failed) = (0, 0, Vec::new());
    for (name, body) in tests.iter().filter(|t| chosen.contains(&t.0)) {
        match catch_unwind(AssertUnwindSafe(body)) {
            Ok(Outcome::Passed) => {
                passed += 1;
                println!("test {name} ... ok");
            }
            Ok(Outcome::Skipped { needs, why }) if require.iter().any(|r| r == needs) => {
                println!("test {name} ... FAILED: BATCHLAB_REQUIRE names {needs}, but {why}");
                failed.push(*name);
            }
            Ok(Outcome::Skipped { why, .. }) => {
                skipped += 1;
                println!("test {name} ... SKIPPED: {why}");
            }
            Err(_) => {
                println!("test {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    let status = if failed.is_empty() { "ok" } else { "FAILED" };
    if !failed.is_empty() {
        println!("\nfailures:\n    {}", failed.join("\n    "));
    }
    println!(
        "\ntest result: {status}. {passed} passed; {} failed; {skipped} skipped\n",
        failed.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
