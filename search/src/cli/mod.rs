//! Command-line interface. One module per subcommand; each prints a human
//! summary by default and one documented JSON value with `--json`
//! (`docs/search-cli.md`). Errors reach `main` as `anyhow` chains and exit 1.

mod bench;
mod compare;
mod dot;
mod eval;
mod load;
mod optimal;
mod optimise;
mod random_dag;
mod show;
mod train;

use clap::{Parser, Subcommand};

/// batchlab search: learn FSM batching policies (ED-Batch) by tabular
/// Q-learning, evaluate them against the classic heuristics, find exact optima
/// of small graphs, and best-known schedules with certified bounds of large ones.
#[derive(Debug, Parser)]
#[command(name = "search", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Train a policy on a trace and write it as a policy file (YAML).
    Train(train::Args),
    /// Run one policy (a file or a heuristic name) on a trace and count batches.
    Eval(eval::Args),
    /// Every heuristic and the given policies on one trace, side by side.
    Compare(compare::Args),
    /// Exact minimum number of batches of a small trace (branch and bound).
    Optimal(optimal::Args),
    /// Best-known schedule of a trace within a time budget, with a certified lower bound.
    Optimise(optimise::Args),
    /// Write a seeded random multi-type DAG as a trace (a hard case for policies).
    RandomDag(random_dag::Args),
    /// Print a policy's FSM as a table, or as Graphviz dot.
    Show(show::Args),
    /// Measure environment steps, FSM decisions and training time.
    Bench(bench::Args),
}

/// Runs the parsed command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Train(a) => train::run(a),
        Command::Eval(a) => eval::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Optimal(a) => optimal::run(a),
        Command::Optimise(a) => optimise::run(a),
        Command::RandomDag(a) => random_dag::run(a),
        Command::Show(a) => show::run(a),
        Command::Bench(a) => bench::run(a),
    }
}

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    engine::tool::print_json(value)
}

/// `batches / lower_bound`, 1.0 for an empty graph.
pub(crate) fn ratio(batches: u64, lower_bound: u64) -> f64 {
    if lower_bound == 0 {
        1.0
    } else {
        batches as f64 / lower_bound as f64
    }
}

/// Median of a non-empty sample (upper median for even sizes).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
engine::flag_range_test!(Cli);
