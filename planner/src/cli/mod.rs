//! Command-line interface: one module per subcommand; each prints text by
//! default and one JSON value with `--json` (fields in `docs/planner-cli.md`).

mod check;
mod explain;
mod layout;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use engine::cells::CellLibrary;

/// batchlab planner: batch the ops inside a cell and lay out its variables
/// so batched kernels read and write contiguous memory (ED-Batch §3).
#[derive(Debug, Parser)]
#[command(name = "planner", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Plan a cell (or all built-in cells): schedule, layout, copies vs the DyNet baseline.
    Layout(layout::Args),
    /// Re-verify a layout file against its cell.
    Check(check::Args),
    /// Show the PQ-tree after each phase and the chosen orders, for teaching.
    Explain(explain::Args),
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Layout(a) => layout::run(a),
        Command::Check(a) => check::run(a),
        Command::Explain(a) => explain::run(a),
    }
}

/// The built-in cells plus `files`.
pub(crate) fn library(files: &[PathBuf]) -> anyhow::Result<CellLibrary> {
    let mut lib = CellLibrary::builtin().context("loading the built-in cells")?;
    for f in files {
        lib.load_file(f)?;
    }
    Ok(lib)
}

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    engine::tool::print_json(value)
}

#[cfg(test)]
engine::flag_range_test!(Cli);
