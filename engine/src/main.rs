//! `engine`: record, inspect and list batchlab traces and workloads.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    engine::tool::exit(cli::run(cli::Cli::parse()))
}
