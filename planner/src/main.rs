//! `planner`: in-cell batching and PQ-tree memory layouts for cells, from the
//! command line (`docs/planner-cli.md`).

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    engine::tool::exit(cli::run(cli::Cli::parse()))
}
