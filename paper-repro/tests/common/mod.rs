//! Helpers of the integration tests: the binary, temporary folders, and the
//! checks that produced files exist and parse.

#![allow(dead_code)]

pub mod harness;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `paper-repro` binary built for these tests.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_paper-repro"))
}

/// Runs the binary with `args`.
pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("paper-repro starts")
}

/// A fresh, empty temporary folder for test `name`.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("paper-repro-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// stdout and stderr as text.
pub fn texts(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Checks one produced file by its extension: a PNG signature, an SVG
/// document, a CSV with a header and at least one row.
pub fn check_file(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match path.extension().and_then(|e| e.to_str()) {
        Some("png") => assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{} is not a PNG",
            path.display()
        ),
        Some("svg") => {
            let t = String::from_utf8_lossy(&bytes);
            assert!(
                t.starts_with("<svg") || t.starts_with("<?xml"),
                "{} is not an SVG",
                path.display()
            );
            assert!(
                t.trim_end().ends_with("</svg>"),
                "{} is cut",
                path.display()
            );
        }
        Some("csv") => {
            let t = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = t.lines().collect();
            assert!(
                lines.len() >= 2,
                "{}: header and rows expected",
                path.display()
            );
            let cols = lines[0].split(',').count();
            assert!(cols >= 2, "{}: header {:?}", path.display(), lines[0]);
        }
        _ => assert!(!bytes.is_empty(), "{} is empty", path.display()),
    }
}
