//! `search`: train, evaluate, compare and inspect batching policies, and find
//! exact optima of small graphs. Fields of every `--json` output are in
//! `docs/search-cli.md`.

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
