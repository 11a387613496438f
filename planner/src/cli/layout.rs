//! `planner layout`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use engine::cells::{Cell, CellLibrary};
use planner::layout_file::TotalsEntry;
use planner::schedule::DEFAULT_SCHEDULE_CAP;
use planner::{CellPlan, LayoutSource, PlanOptions, plan_cell};
use serde::Serialize;

/// Which DyNet baseline the text output compares against (JSON has both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Baseline {
    /// Declaration-order allocation; a gathered weight operand is copied once per batch.
    Dynet,
    /// Same allocation, but gathered weights are copied once per instance and
    /// broadcasts are materialised (how the paper's Table 2 baseline counts).
    DynetPerInstance,
}

/// Arguments of `planner layout`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cell to plan.
    #[arg(long, required_unless_present_any = ["all", "model"], conflicts_with = "all")]
    cell: Option<String>,
    /// Plan every cell in the library (built-ins plus --cells) and print a table.
    #[arg(long)]
    all: bool,
    /// A model folder (docs/torch.md): plan its cells (all of them, unless
    /// --cell names one) at its hidden size.
    #[arg(long, conflicts_with = "cell_files")]
    model: Option<PathBuf>,
    /// Hidden size to instantiate at (default with --model: the folder's). [range: 1 to 65536]
    #[arg(long, required_unless_present = "model", value_parser = engine::tool::int_in(engine::tool::ranges::HIDDEN))]
    hidden: Option<usize>,
    /// Instances per batch. [range: 1 to 1000000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::BATCH))]
    batch: usize,
    /// Baseline for the text output.
    #[arg(long, value_enum, default_value_t = Baseline::Dynet)]
    baseline: Baseline,
    /// Extra cell definition files (YAML) to load besides the built-ins.
    #[arg(long = "cells")]
    cell_files: Vec<PathBuf>,
    /// Write the planned layout file here (atomically); only with --cell.
    #[arg(long, conflicts_with = "all")]
    out: Option<PathBuf>,
    /// Also write the DyNet baseline layout file here; only with --cell.
    #[arg(long, conflicts_with = "all")]
    baseline_out: Option<PathBuf>,
    /// Write every planned cell's layout to DIR/<cell>.json and its DyNet
    /// baseline to DIR/<cell>.baseline.json (what `engine replay --layouts DIR`
    /// reads).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Keep the cell's inputs first, in port order, where their producers
    /// wrote them (the paper's setting, judging by its MVCell row).
    #[arg(long)]
    fixed_inputs: bool,
    /// Most minimum-batch schedules to enumerate per cell. [range: 1 to 1000000]
    #[arg(long, default_value_t = DEFAULT_SCHEDULE_CAP, value_parser = engine::tool::int_in(engine::tool::ranges::SCHEDULE_CAP))]
    cap: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One cell in the JSON output.
#[derive(Serialize)]
struct Row {
    cell: String,
    hidden: usize,
    batch: usize,
    fixed_inputs: bool,
    ops: usize,
    lower_bound: usize,
    batches: usize,
    exhaustive: bool,
    schedules: usize,
    schedules_truncated: bool,
    compositions: usize,
    layout_source: &'static str,
    arena_bytes: u64,
    planned: TotalsEntry,
    baseline: TotalsEntry,
    ratios: Ratios,
    compile_ms: f64,
    out: Option<String>,
    baseline_out: Option<String>,
}

/// Baseline ÷ planned; `null` when planned is 0.
#[derive(Serialize)]
struct Ratios {
    memory_kernels: Option<f64>,
    copy_bytes: Option<f64>,
    paper_kernels: Option<f64>,
    paper_bytes: Option<f64>,
    paper_bytes_per_instance_weights: Option<f64>,
}

fn ratio(base: u64, planned: u64) -> Option<f64> {
    (planned > 0).then(|| base as f64 / planned as f64)
}

/// Text for a ratio: `all removed` when planned is 0 and baseline is not.
fn show_ratio(base: u64, planned: u64) -> String {
    match (base, planned) {
        (0, 0) => "-".into(),
        (_, 0) => "all removed".into(),
        _ => format!("{:.2}x", base as f64 / planned as f64),
    }
}

fn plan(
    lib: &CellLibrary,
    name: &str,
    a: &Args,
    hidden: usize,
) -> anyhow::Result<(Cell, CellPlan, f64)> {
    let cell = lib.instantiate(name, hidden)?;
    let opts = PlanOptions {
        schedule_cap: a.cap,
        record: false,
        fixed_inputs: a.fixed_inputs,
    };
    let start = Instant::now();
    let p = plan_cell(&cell, a.batch, &opts).with_context(|| format!("planning cell `{name}`"))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    Ok((cell, p, ms))
}

fn row(p: &CellPlan, a: &Args, ms: f64, out: Option<String>, baseline_out: Option<String>) -> Row {
    let planned = planner::layout_file::totals_entry(&p.planned.planned.eval.totals);
    let baseline = planner::layout_file::totals_entry(&p.baseline.eval.totals);
    Row {
        cell: p.cell.clone(),
        hidden: p.hidden,
        batch: p.batch,
        fixed_inputs: a.fixed_inputs,
        ops: p.dag.len(),
        lower_bound: p.search.lower_bound,
        batches: p.schedule().len(),
        exhaustive: p.search.exhaustive,
        schedules: p.search.schedules.len(),
        schedules_truncated: p.search.truncated,
        compositions: p.compositions,
        layout_source: match p.planned.source {
            LayoutSource::PqTree => "pq-tree",
            LayoutSource::DynetFallback => "dynet-fallback",
        },
        arena_bytes: p.planned.planned.layout.arena_bytes,
        ratios: Ratios {
            memory_kernels: ratio(baseline.memory_kernels, planned.memory_kernels),
            copy_bytes: ratio(baseline.copy_bytes, planned.copy_bytes),
            paper_kernels: ratio(baseline.paper_kernels, planned.paper_kernels),
            paper_bytes: ratio(baseline.paper_bytes, planned.paper_bytes),
            paper_bytes_per_instance_weights: ratio(
                baseline.paper_bytes_per_instance_weights,
                planned.paper_bytes_per_instance_weights,
            ),
        },
        planned,
        baseline,
        compile_ms: ms,
        out,
        baseline_out,
    }
}

/// The baseline figures the text output shows: (kernels, bytes, label).
fn shown_baseline(r: &Row, b: Baseline) -> (u64, u64, &'static str) {
    match b {
        Baseline::Dynet => (r.baseline.memory_kernels, r.baseline.copy_bytes, "dynet"),
        Baseline::DynetPerInstance => (
            r.baseline.paper_kernels,
            r.baseline.paper_bytes_per_instance_weights,
            "dynet-per-instance",
        ),
    }
}

/// Planned figures matching [`shown_baseline`].
fn shown_planned(r: &Row, b: Baseline) -> (u64, u64) {
    match b {
        Baseline::Dynet => (r.planned.memory_kernels, r.planned.copy_bytes),
        Baseline::DynetPerInstance => (
            r.planned.paper_kernels,
            r.planned.paper_bytes_per_instance_weights,
        ),
    }
}

/// Refuses outputs that are inputs (a `--cells` file, a model folder's
/// recording) or each other, before anything is written: `--out`,
/// `--baseline-out` and the two files per cell `--out-dir` gets.
fn check_outputs(a: &Args, names: &[String]) -> anyhow::Result<()> {
    let folder: Vec<PathBuf> = a
        .model
        .iter()
        .flat_map(|d| engine::modeldir::ModelDir::own_files(d))
        .collect();
    let inputs: Vec<(&str, &std::path::Path)> = a
        .cell_files
        .iter()
        .map(|c| ("--cells", c.as_path()))
        .chain(folder.iter().map(|p| ("--model", p.as_path())))
        .collect();
    let in_dir: Vec<PathBuf> = match &a.out_dir {
        Some(dir) => names
            .iter()
            .flat_map(|n| {
                [
                    dir.join(format!("{n}.json")),
                    dir.join(format!("{n}.baseline.json")),
                ]
            })
            .collect(),
        None => Vec::new(),
    };
    let outputs: Vec<(&str, &std::path::Path)> =
        [("--out", &a.out), ("--baseline-out", &a.baseline_out)]
            .into_iter()
            .filter_map(|(f, p)| Some((f, p.as_deref()?)))
            .chain(in_dir.iter().map(|p| ("--out-dir", p.as_path())))
            .collect();
    Ok(engine::io::distinct_outputs(&inputs, &outputs)?)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    check_outputs(&a, &[])?;
    let folder = match &a.model {
        Some(d) => Some(engine::modeldir::ModelDir::open(d)?),
        None => None,
    };
    let hidden = match (a.hidden, &folder) {
        (Some(h), _) => h,
        (None, Some(f)) => f.manifest.hidden.max(1) as usize,
        (None, None) => bail!("give --hidden (or --model DIR)"),
    };
    if a.batch == 0 || hidden == 0 {
        bail!("--hidden and --batch must be at least 1");
    }
    let lib = match &folder {
        Some(f) => f.cells.clone(),
        None => super::library(&a.cell_files)?,
    };
    let names: Vec<String> = match &a.cell {
        Some(c) => vec![c.clone()],
        None => lib.names().map(str::to_owned).collect(),
    };
    let table = a.all || (a.model.is_some() && a.cell.is_none());
    check_outputs(&a, &names)?;
    if let Some(dir) = &a.out_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating output folder {}", dir.display()))?;
    }
    let mut rows = Vec::new();
    for name in &names {
        let (cell, p, ms) = plan(&lib, name, &a, hidden)?;
        let mut out = None;
        if let Some(dir) = &a.out_dir {
            let planned = dir.join(format!("{name}.json"));
            planner::layout_file::planned_file(&cell, &p).write(&planned)?;
            planner::layout_file::baseline_file(&cell, &p)
                .write(&dir.join(format!("{name}.baseline.json")))?;
            out = Some(planned.display().to_string());
        }
        if let Some(path) = &a.out {
            planner::layout_file::planned_file(&cell, &p).write(path)?;
            out = Some(path.display().to_string());
        }
        let mut baseline_out = None;
        if let Some(path) = &a.baseline_out {
            planner::layout_file::baseline_file(&cell, &p).write(path)?;
            baseline_out = Some(path.display().to_string());
        }
        rows.push(row(&p, &a, ms, out, baseline_out));
    }
    if a.json {
        return if table {
            super::print_json(&rows)
        } else {
            super::print_json(&rows[0])
        };
    }
    if table {
        print_table(&rows, a.baseline);
    } else {
        print_one(&rows[0], a.baseline);
    }
    Ok(())
}

fn print_one(r: &Row, b: Baseline) {
    let (bk, bb, label) = shown_baseline(r, b);
    let (pk, pb) = shown_planned(r, b);
    engine::outln!(
        "cell {}  hidden {}  batch {}  ({} ops)",
        r.cell,
        r.hidden,
        r.batch,
        r.ops
    );
    engine::outln!(
        "in-cell schedule: {} batches (lower bound {}; {}; {} minimum schedule(s){}, {} composition(s) planned)",
        r.batches,
        r.lower_bound,
        if r.exhaustive {
            "minimum proven"
        } else {
            "greedy"
        },
        r.schedules,
        if r.schedules_truncated {
            ", capped"
        } else {
            ""
        },
        r.compositions
    );
    engine::outln!(
        "{:<28} {:>12} {:>14}  ratio",
        "",
        "planned",
        format!("baseline ({label})")
    );
    engine::outln!(
        "{:<28} {:>12} {:>14}  {}",
        "memory kernels",
        pk,
        bk,
        show_ratio(bk, pk)
    );
    engine::outln!(
        "{:<28} {:>12} {:>14}  {}",
        "copy bytes",
        pb,
        bb,
        show_ratio(bb, pb)
    );
    engine::outln!(
        "{:<28} {:>12} {:>14}",
        "broadcasts (bytes if copied)",
        format!("{} ({})", r.planned.broadcasts, r.planned.broadcast_bytes),
        format!("{} ({})", r.baseline.broadcasts, r.baseline.broadcast_bytes),
    );
    engine::outln!(
        "layout: {} ({} bytes), compile {:.3} ms",
        r.layout_source,
        r.arena_bytes,
        r.compile_ms
    );
    if let Some(o) = &r.out {
        engine::outln!("wrote {o}");
    }
    if let Some(o) = &r.baseline_out {
        engine::outln!("wrote {o} (baseline)");
    }
}

fn print_table(rows: &[Row], b: Baseline) {
    let label = match b {
        Baseline::Dynet => "dynet",
        Baseline::DynetPerInstance => "dynet-per-instance",
    };
    engine::outln!("baseline: {label}; kernels and bytes as planned / baseline");
    engine::outln!(
        "{:<22} {:>4} {:>8} {:>9} {:>22} {:>13} {:>9}",
        "cell",
        "ops",
        "batches",
        "kernels",
        "copy bytes",
        "ratio",
        "ms"
    );
    for r in rows {
        let (bk, bb, _) = shown_baseline(r, b);
        let (pk, pb) = shown_planned(r, b);
        engine::outln!(
            "{:<22} {:>4} {:>8} {:>9} {:>22} {:>13} {:>9.3}",
            r.cell,
            r.ops,
            r.batches,
            format!("{pk} / {bk}"),
            format!("{pb} / {bb}"),
            show_ratio(bb, pb),
            r.compile_ms
        );
    }
}
