//! `engine`: record, inspect and list batchlab traces and workloads.

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
