//! `paper-repro`: see the crate docs and `docs/paper-repro.md`.

use std::process::ExitCode;

use clap::Parser;
use paper_repro::cli::{Cli, Command, command_line, execute, peers, print, print_peers};

/// A failed allocation is an error (exit 1), not an abort.
#[global_allocator]
static ALLOC: engine::alloc::Reporting = engine::alloc::Reporting;

fn main() -> ExitCode {
    engine::io::clean_up_on_interrupt();
    // `paper-repro worker ...`: one batchlab executor timed in its own process
    // for the `peers` item (internal; flags in experiments::peers::worker_main).
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        return ExitCode::from(experiments::peers::worker_main(&args[2..]) as u8);
    }
    let cli = Cli::parse();
    let run = || -> anyhow::Result<()> {
        if let Some(Command::Peers(a)) = &cli.command {
            let s = peers(&cli, a)?;
            print_peers(&s, cli.json)?;
            return Ok(());
        }
        if let Some(Command::TrainingCurve(a)) = &cli.command {
            let out = cli
                .out
                .clone()
                .unwrap_or_else(|| "out/training-curve".into());
            let files = paper_repro::training_curve::draw(a, &out, &command_line())?;
            if cli.json {
                let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
                println!("{}", serde_json::json!({ "files": names }));
            } else {
                for f in files {
                    println!("{}", f.display());
                }
            }
            return Ok(());
        }
        if let Some(Command::Model(a)) = &cli.command {
            let out = cli.out.clone().unwrap_or_else(|| "out/model".into());
            let report = paper_repro::model::run_command(
                a,
                &out,
                cli.quick,
                cli.peers_env.as_deref(),
                !cli.json,
                &command_line(),
            )?;
            if cli.json {
                println!(
                    "{}",
                    serde_json::json!({ "report": report.display().to_string() })
                );
            } else {
                println!("{}", report.display());
            }
            return Ok(());
        }
        let summary = execute(&cli, &command_line())?;
        print(&summary, cli.json)?;
        let failed = summary.failed_steps();
        if !failed.is_empty() {
            anyhow::bail!(
                "a measuring step failed in full (the report says so): {}",
                failed.join("; ")
            );
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Each cause once: library errors often embed their source.
            eprintln!("paper-repro: error: {}", engine::tool::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
