//! `planner`: in-cell batching and PQ-tree memory layouts for cells, from the
//! command line (`docs/planner-cli.md`).

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", cli::error_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}
