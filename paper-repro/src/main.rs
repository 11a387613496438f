//! `paper-repro`: see the crate docs and `docs/paper-repro.md`.

use std::process::ExitCode;

use clap::Parser;
use paper_repro::cli::{Cli, command_line, execute, print};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let run = || -> anyhow::Result<()> {
        let summary = execute(&cli, &command_line())?;
        print(&summary, cli.json)?;
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("paper-repro: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
