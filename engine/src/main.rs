//! `engine`: record, inspect and list batchlab traces and workloads.

mod cli;

use clap::Parser;

/// A failed allocation is an error (exit 1), not an abort.
#[global_allocator]
static ALLOC: engine::alloc::Reporting = engine::alloc::Reporting;

fn main() -> std::process::ExitCode {
    engine::io::clean_up_on_interrupt();
    engine::tool::exit(cli::run(cli::Cli::parse()))
}
