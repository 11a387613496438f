//! Runs one experiment spec.
//!
//! ```sh
//! cargo run --release -p experiments --example run_spec -- SPEC.yaml OUT_DIR [--quick] [--quiet] [--dry-run] [--fresh]
//! ```
//!
//! `--dry-run` checks the spec and lists its runs without running them.
//!
//! Prints the report (runs total, skipped, ran, failed, left out by
//! `max_nodes`; the row files) and the
//! wall time; exits 1 with `error: <message>` on a bad spec.

use std::path::PathBuf;
use std::time::Instant;

use experiments::{RunOptions, load_spec, run_spec};

const USAGE: &str = "usage: run_spec SPEC.yaml OUT_DIR [--quick] [--quiet] [--dry-run] [--fresh]

Runs one experiment spec (docs/experiments.md) into OUT_DIR: <spec>.jsonl,
<spec>.csv, <spec>.json. A rerun resumes: runs with a successful row in
OUT_DIR are reused and said so.

  --quick    the spec's quick: block (smaller grid, fewer repeats)
  --quiet    no progress bar
  --dry-run  check the spec and list its runs without running them
  --fresh    re-measure every run (earlier rows stay in the .jsonl file)
  --help     this text";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flags: Vec<&str> = args
        .iter()
        .filter(|a| a.starts_with("--"))
        .map(String::as_str)
        .collect();
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let unknown: Vec<&&str> = flags
        .iter()
        .filter(|f| !["--quick", "--quiet", "--dry-run", "--fresh", "--help"].contains(f))
        .collect();
    if flags.contains(&"--help") || args.iter().any(|a| a == "-h") {
        println!("{USAGE}");
        return;
    }
    if paths.len() != 2 || !unknown.is_empty() {
        eprintln!("{USAGE}");
        std::process::exit(2);
    }
    let quick = flags.contains(&"--quick");
    let spec = match load_spec(&PathBuf::from(paths[0]), quick) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    if flags.contains(&"--dry-run") {
        let runs = experiments::expand(&spec);
        for r in &runs {
            println!("{:>5} {} {}", r.index, r.hash, r.label());
        }
        println!("{}: {} runs", spec.name, runs.len());
        return;
    }
    let mut opts = RunOptions::new(paths[1]);
    opts.quiet = flags.contains(&"--quiet");
    opts.fresh = flags.contains(&"--fresh");
    let start = Instant::now();
    match run_spec(&spec, &opts) {
        Ok(r) => {
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
            if r.skipped > 0 {
                eprintln!(
                    "{} rows reused from {}; --fresh to re-measure",
                    r.skipped, paths[1]
                );
            }
            println!(
                "{}: {} runs, {} skipped, {} ran ({} retried), {} failed, {} left out by max_nodes; {:.1} s; rows in {}, {}, {}",
                r.spec,
                r.total,
                r.skipped,
                r.ran,
                r.retried,
                r.failed,
                r.filtered,
                start.elapsed().as_secs_f64(),
                r.jsonl.display(),
                r.csv.display(),
                r.json.display()
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
