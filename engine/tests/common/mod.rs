//! Helpers of the `engine` binary's end-to-end tests.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `engine ARGS`.
pub fn engine(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_engine"))
        .args(args)
        .output()
        .expect("engine runs")
}

/// `name` in this test process's temporary folder (under cargo's
/// `target/tmp`, so runs do not litter the system's).
pub fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("batchlab-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// `engine` with the words of `line` then `more` (paths) as arguments.
pub fn engine_line(line: &str, more: &[&str]) -> Output {
    let mut a: Vec<&str> = line.split_whitespace().collect();
    a.extend_from_slice(more);
    engine(&a)
}
