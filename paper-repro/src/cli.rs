//! The command line: `paper-repro [run|measure|report] [--quick] [--only
//! ITEMS] [--out DIR] [--rows DIR] [--specs DIR] [--device cpu|cuda] [--json]`.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Parser, Subcommand};

use crate::error::Result;
use crate::items::{self, Item};
use crate::measure::{MeasureLog, MeasureOptions, measure};
use crate::report::ctx::write;
use crate::report::{ReportOptions, report};
use crate::specs::{load_all, parse_device};
use crate::summary::{ItemSummary, SUMMARY_SCHEMA, Summary, from_report};

/// Regenerates the ED-Batch, Cavs and VPPS figures and tables from scratch,
/// beside the papers' published numbers.
#[derive(Debug, Parser)]
#[command(
    name = "paper-repro",
    version,
    after_help = "Items: fig7, fig7-gap, table2, table4, table5, fig6, fig9, table6, cavs-fig8, cavs-fig10, policies, policies-exact, policies-hard, policies-unseen, optimise-scaling, vpps, vpps-train, peers, peers-train.\n\
                  Without a subcommand: run (measure, then report). Output: figures (PNG + SVG), \
                  CSV tables and REPORT.md in --out; rows in --rows. See docs/paper-repro.md."
)]
pub struct Cli {
    /// What to do (default: run).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Small sizes and few repeats (each spec's `quick:` block): minutes, not hours.
    #[arg(long, global = true)]
    pub quick: bool,
    /// Comma-separated items to produce (default: all).
    #[arg(long, global = true, value_name = "ITEMS")]
    pub only: Option<String>,
    /// Output folder [default: out/paper-repro, or out/paper-repro-quick with --quick].
    #[arg(long, global = true, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Rows folder: where measuring writes and reporting reads [default: OUT/rows].
    #[arg(long, global = true, value_name = "DIR")]
    pub rows: Option<PathBuf>,
    /// Folder of spec files replacing the embedded ones of the same name.
    #[arg(long, global = true, value_name = "DIR")]
    pub specs: Option<PathBuf>,
    /// Device of the replay and peers specs: cpu, cuda or cuda:N (the vpps item needs cuda;
    /// on cuda the peers are PyTorch's, DyNet and DGL run on the CPU only).
    #[arg(long, global = true, default_value = "cpu", value_name = "DEVICE")]
    pub device: String,
    /// Re-measure every run instead of reusing the rows already in the rows
    /// folder (a rerun resumes by default and says how many rows it reused).
    #[arg(long, global = true)]
    pub fresh: bool,
    /// Print a JSON summary on stdout and no progress on stderr.
    #[arg(long, global = true)]
    pub json: bool,
    /// The peers' environment folder [default: $BATCHLAB_PEERS_ENV, else
    /// ~/.cache/batchlab/peers] (item `peers`; `paper-repro peers --install` makes it).
    #[arg(long, global = true, value_name = "DIR")]
    pub peers_env: Option<PathBuf>,
}

/// `paper-repro peers`: the peers' environment.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct PeersArgs {
    /// Create the environment if missing and install the pinned peers from PyPI.
    #[arg(long)]
    pub install: bool,
    /// Frameworks to install: dynet, torch (torch is the CUDA build from PyPI, ~5 GB).
    #[arg(long, default_value = "dynet", value_name = "LIST")]
    pub peers: String,
}

/// Subcommands.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Measure, then report (the default).
    Run,
    /// Only measure: run the specs into the rows folder.
    Measure,
    /// Only report: figures, CSVs and REPORT.md from existing rows.
    Report,
    /// Show (or with --install, make) the peers' Python environment: the real
    /// DyNet and PyTorch of the `peers` item (docs/peers.md).
    Peers(PeersArgs),
    /// Draw the learning curve of an `engine train --json` report into
    /// --out (training-curve.png, .svg and .csv).
    TrainingCurve(crate::training_curve::CurveArgs),
    /// A report on one model folder (docs/torch.md): batches per policy
    /// beside the certified bound, the planner's copies, step times of
    /// batchlab's executors and (with --torch) of the user's PyTorch loop
    /// and bt.run, interleaved, into --out (REPORT.md, a figure, CSVs, rows).
    Model(crate::model::ModelArgs),
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::Run => "run",
            Command::Measure => "measure",
            Command::Report => "report",
            Command::Peers(_) => "peers",
            Command::TrainingCurve(_) => "training-curve",
            Command::Model(_) => "model",
        }
    }
}

/// `paper-repro peers [--install]` output.
#[derive(Debug, serde::Serialize)]
pub struct PeersStatus {
    /// The environment folder.
    pub dir: String,
    /// Its Python, when it exists.
    pub python: Option<String>,
    /// Per framework: version, or why it is unavailable.
    pub frameworks: std::collections::BTreeMap<String, serde_json::Value>,
    /// Why the environment cannot be used at all, if so.
    pub error: Option<String>,
}

/// Runs `paper-repro peers`.
pub fn peers(cli: &Cli, a: &PeersArgs) -> Result<PeersStatus> {
    let dir = crate::peers_env::default_dir(cli.peers_env.as_deref());
    let env = if a.install {
        let fws = crate::peers_env::parse_frameworks(&a.peers)?;
        Ok(crate::peers_env::install(&dir, &fws)?)
    } else {
        crate::peers_env::open(&dir)
    };
    let mut s = PeersStatus {
        dir: dir.display().to_string(),
        python: None,
        frameworks: Default::default(),
        error: None,
    };
    match env {
        Ok(e) => {
            s.python = Some(e.python.display().to_string());
            for (fw, v) in e.frameworks {
                let val = match v {
                    Ok(ver) => serde_json::json!({"available": true, "version": ver}),
                    Err(why) => serde_json::json!({"available": false, "reason": why}),
                };
                s.frameworks.insert(fw, val);
            }
        }
        Err(why) => s.error = Some(why),
    }
    Ok(s)
}

/// Prints `paper-repro peers`' status.
pub fn print_peers(s: &PeersStatus, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(s)?);
        return Ok(());
    }
    println!("peers environment: {}", s.dir);
    if let Some(e) = &s.error {
        println!("  not usable: {e}");
    }
    if let Some(p) = &s.python {
        println!("  python: {p}");
    }
    for (fw, v) in &s.frameworks {
        match v["version"].as_str() {
            Some(ver) => println!("  {fw}: {ver}"),
            None => println!(
                "  {fw}: unavailable: {}",
                v["reason"].as_str().unwrap_or("?")
            ),
        }
    }
    Ok(())
}

/// Runs the command line `cli` (`command` is how it was invoked, for stamps
/// and logs) and returns its summary. Nothing runs unless every spec checks.
pub fn execute(cli: &Cli, command: &str) -> Result<Summary> {
    let mode = cli.command.clone().unwrap_or(Command::Run);
    if let Command::Peers(_) | Command::TrainingCurve(_) | Command::Model(_) = mode {
        return Err(crate::error::ReproError::Usage(format!(
            "`{}` is not a measuring mode (see `paper-repro {} --help`)",
            mode.name(),
            mode.name()
        )));
    }
    let selected: Vec<&'static Item> = items::select(cli.only.as_deref())?;
    let device = parse_device(&cli.device)?;
    let out = cli.out.clone().unwrap_or_else(|| {
        PathBuf::from(if cli.quick {
            "out/paper-repro-quick"
        } else {
            "out/paper-repro"
        })
    });
    let rows = cli.rows.clone().unwrap_or_else(|| out.join("rows"));
    let quiet = cli.json;
    let mut log: Option<MeasureLog> = None;
    let mut measure_seconds = None;
    if mode != Command::Report {
        // Every spec is loaded and checked before any run starts.
        let specs = load_all(cli.specs.as_deref(), cli.quick)?;
        let t = Instant::now();
        let wants_peers = selected.iter().any(|i| i.peers);
        let peers = if wants_peers {
            crate::peers_env::open(&crate::peers_env::default_dir(cli.peers_env.as_deref()))
        } else {
            Err("not selected".into())
        };
        let worker = experiments::peers::WorkerCommand::current_exe("worker")
            .map_err(|e| crate::error::ReproError::io("current executable", e))?;
        let opts = MeasureOptions {
            rows: rows.clone(),
            device: device.clone(),
            quiet,
            command: command.to_string(),
            quick: cli.quick,
            peers,
            worker: Some(worker),
            fresh: cli.fresh,
        };
        log = Some(measure(&selected, &specs, &opts)?);
        measure_seconds = Some(t.elapsed().as_secs_f64());
    }
    let mut summary = Summary {
        schema: SUMMARY_SCHEMA,
        mode: mode.name().into(),
        command: command.into(),
        quick: cli.quick,
        device,
        out: out.display().to_string(),
        rows: rows.display().to_string(),
        report: None,
        revision: experiments::provenance::workspace_revision(),
        measure_seconds,
        report_seconds: None,
        items: Vec::new(),
    };
    if mode == Command::Measure {
        if let Some(l) = &log {
            summary.items = selected
                .iter()
                .map(|i| ItemSummary::measured(i.name, i.spec, l))
                .collect();
        }
        return Ok(summary);
    }
    let t = Instant::now();
    // REPORT.md covers every item with rows, so an `--only` run updates its
    // sections and keeps the others (redrawn from their rows).
    let rep = report(&ReportOptions {
        rows: rows.clone(),
        out: out.clone(),
        items: items::ITEMS.iter().collect(),
        required: if cli.only.is_some() {
            selected.iter().map(|i| i.name).collect()
        } else {
            Vec::new()
        },
        command: command.to_string(),
    })?;
    summary.report_seconds = Some(t.elapsed().as_secs_f64());
    summary.report = Some(rep.report.display().to_string());
    summary.revision = rep.revision.clone();
    summary.quick = rep.quick;
    summary.items = from_report(&rep, log.as_ref())
        .into_iter()
        .filter(|i| selected.iter().any(|s| s.name == i.name))
        .collect();
    write(
        &out.join("summary.json"),
        serde_json::to_string_pretty(&summary)?.as_bytes(),
    )?;
    Ok(summary)
}

/// Prints the outcome: the JSON summary, or a few lines for a person.
pub fn print(summary: &Summary, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(summary)?);
        return Ok(());
    }
    for i in &summary.items {
        let rows = i
            .rows
            .filter(|r| r.total > 0)
            .map(|r| {
                let failed = if r.failed > 0 {
                    format!(", {} failed", r.failed)
                } else {
                    String::new()
                };
                format!(", {}/{} rows ok{failed}", r.ok, r.total)
            })
            .unwrap_or_default();
        let sweep = i
            .measure
            .as_ref()
            .map(|m| {
                let reused = if m.skipped > 0 {
                    format!(", {} reused", m.skipped)
                } else {
                    String::new()
                };
                let left_out = if m.filtered > 0 {
                    format!(", {} left out by max_nodes", m.filtered)
                } else {
                    String::new()
                };
                format!(
                    " (this run: {} measured, {} failed{left_out}{reused})",
                    m.ran - m.filtered.min(m.ran),
                    m.failed
                )
            })
            .unwrap_or_default();
        let why = i
            .reason
            .as_deref()
            .map(|r| format!(" — {r}"))
            .unwrap_or_default();
        println!("{:<10} {}{rows}{sweep}{why}", i.name, i.status);
    }
    if let Some(r) = &summary.report {
        println!("report: {r}");
    } else {
        println!("rows: {}", summary.rows);
    }
    Ok(())
}

/// The command line as typed, with the program shown as `paper-repro`.
pub fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quote = |a: &String| {
        if a.contains(char::is_whitespace) {
            format!("'{a}'")
        } else {
            a.clone()
        }
    };
    std::iter::once("paper-repro".to_string())
        .chain(args.iter().map(quote))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
engine::flag_range_test!(Cli);
