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
    /// Number of input samples in the mini-batch. [range: 1 to 1000000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::BATCH))]
    batch: usize,
    /// Hidden size of every cell. [range: 1 to 65536]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::HIDDEN))]
    hidden: usize,
    /// Node granularity: `cell` (one node per cell invocation) or `op` (primitive ops).
    #[arg(long, default_value = "cell", value_parser = parse_level)]
    level: Level,
    /// Seed choosing the samples (and any random structure). [range: any 64-bit number]
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Extra cell definition files (YAML) to load besides the built-ins.
    #[arg(long = "cells")]
    cell_files: Vec<PathBuf>,
    /// Output trace file (written atomically; its folder is created).
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    memory: super::MaxMemory,
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
    /// Samples in the data set (null for synthetic data).
    dataset_samples: Option<usize>,
    /// Whether the batch is larger than the data set, so samples repeat.
    repeats_samples: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cells: Vec<(&str, &std::path::Path)> = a
        .cell_files
        .iter()
        .map(|c| ("--cells", c.as_path()))
        .collect();
    engine::io::distinct_outputs(&cells, &[("--out", &a.out)])?;
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
    let opts = RecordOptions {
        workload: w,
        data,
        batch: a.batch,
        hidden: a.hidden,
        level: a.level,
        seed: a.seed,
    };
    let available = workloads::samples_available(&opts).map_err(super::flag_error)?;
    let budget = a.memory.budget();
    let trace =
        workloads::record_within(&opts, &cells, budget.as_ref()).map_err(super::flag_error)?;
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
        dataset_samples: available,
        repeats_samples: available.is_some_and(|n| a.batch > n),
    };
    if let Some(n) = available.filter(|n| a.batch > *n) {
        // Said on stderr (also with --json, whose stdout stays one object).
        eprintln!(
            "note: --batch {} is more than the {n} samples of {}: each sample is used {} or {} times (every pass over the data set a fresh shuffle)",
            a.batch,
            summary.dataset,
            a.batch / n,
            a.batch.div_ceil(n)
        );
    }
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
