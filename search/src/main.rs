//! `search`: train, evaluate, compare and inspect batching policies, and find
//! exact optima of small graphs. Fields of every `--json` output are in
//! `docs/search-cli.md`.

mod cli;

use clap::Parser;

fn main() -> std::process::ExitCode {
    engine::tool::exit(cli::run(cli::Cli::parse()))
}
