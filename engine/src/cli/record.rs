//! `engine record`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use engine::cells::CellLibrary;
use engine::graph::stats;
use engine::trace::Level;
use engine::workloads::{self, DataChoice, RecordOptions};
use serde::Serialize;

/// Arguments of `engine record`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workload name (see `engine workloads`).
    #[arg(long)]
    workload: String,
    /// Data: a shipped data set (sst-train, sst-dev, sst-test, weibo-train, weibo-dev,
    /// weibo-test, wikiner-dev, iwslt2012), `synthetic`, or `default` (the workload's own).
    #[arg(long, default_value = "default")]
    data: String,
    /// Number of input samples in the mini-batch.
    #[arg(long)]
    batch: usize,
    /// Hidden size of every cell.
    #[arg(long)]
    hidden: usize,
    /// Node granularity: `cell` (one node per cell invocation) or `op` (primitive ops).
    #[arg(long, default_value = "cell", value_parser = parse_level)]
    level: Level,
    /// Seed choosing the samples (and any random structure).
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Extra cell definition files (YAML) to load besides the built-ins.
    #[arg(long = "cells")]
    cell_files: Vec<PathBuf>,
    /// Output trace file (written atomically).
    #[arg(long)]
    out: PathBuf,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn parse_level(s: &str) -> Result<Level, String> {
    match s {
        "cell" => Ok(Level::Cell),
        "op" => Ok(Level::Op),
        other => Err(format!("unknown level {other:?}: expected `cell` or `op`")),
    }
}

/// `engine record --json` output.
#[derive(Serialize)]
struct Summary {
    out: String,
    workload: String,
    dataset: String,
    level: &'static str,
    batch: usize,
    hidden: usize,
    seed: u64,
    nodes: u64,
    edges: u64,
    types: usize,
    lower_bound: u64,
    data_ids: u64,
    data_labels: u64,
    seconds: f64,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let Some(w) = workloads::workload(&a.workload) else {
        let names: Vec<&str> = workloads::WORKLOADS.iter().map(|w| w.name).collect();
        bail!(
            "unknown workload {:?}; known workloads: {}",
            a.workload,
            names.join(", ")
        );
    };
    let data = DataChoice::parse(&a.data).with_context(|| format!("--data {}", a.data))?;
    let mut cells = CellLibrary::builtin()?;
    for f in &a.cell_files {
        cells.load_file(f)?;
    }
    let start = Instant::now();
    let trace = workloads::record(
        &RecordOptions {
            workload: w,
            data,
            batch: a.batch,
            hidden: a.hidden,
            level: a.level,
            seed: a.seed,
        },
        &cells,
    )?;
    if let Some(dir) = a.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating output folder {}", dir.display()))?;
    }
    trace.write(&a.out)?;
    let seconds = start.elapsed().as_secs_f64();
    let s = stats(&trace.graph);
    let (data_ids, data_labels) = trace.data_counts();
    let summary = Summary {
        out: a.out.display().to_string(),
        workload: w.name.to_string(),
        dataset: trace.meta.dataset.clone().unwrap_or_default(),
        level: a.level.name(),
        batch: a.batch,
        hidden: a.hidden,
        seed: a.seed,
        nodes: s.nodes,
        edges: s.edges,
        types: s.types.len(),
        lower_bound: s.lower_bound,
        data_ids,
        data_labels,
        seconds,
    };
    if a.json {
        return crate::cli::print_json(&summary);
    }
    let data = if data_ids + data_labels > 0 {
        format!(", real data on {data_ids} lookups and {data_labels} losses")
    } else {
        String::new()
    };
    engine::outln!(
        "recorded {} ({} level, {} samples of {}, hidden {}, seed {}): {} nodes, {} edges, {} types, lower bound {} batches{} -> {} in {:.3} s",
        summary.workload,
        summary.level,
        summary.batch,
        summary.dataset,
        summary.hidden,
        summary.seed,
        summary.nodes,
        summary.edges,
        summary.types,
        summary.lower_bound,
        data,
        summary.out,
        summary.seconds
    );
    Ok(())
}
