//! `engine inspect`.

use std::path::PathBuf;

use engine::graph::{GraphStats, stats};
use engine::trace::{Trace, TraceMeta};
use serde::Serialize;

/// Arguments of `engine inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace file to summarise.
    trace: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `engine inspect --json` output.
#[derive(Serialize)]
struct Report<'a> {
    file: String,
    workload: &'a str,
    meta: &'a TraceMeta,
    data_ids: u64,
    data_labels: u64,
    #[serde(flatten)]
    stats: GraphStats,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let trace = Trace::read(&a.trace)?;
    let (data_ids, data_labels) = trace.data_counts();
    let report = Report {
        file: a.trace.display().to_string(),
        workload: &trace.workload,
        meta: &trace.meta,
        data_ids,
        data_labels,
        stats: stats(&trace.graph),
    };
    if a.json {
        return crate::cli::print_json(&report);
    }
    let m = report.meta;
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    engine::outln!("trace     {}", report.file);
    engine::outln!(
        "workload  {} (level {}, batch {}, hidden {}, data {}, seed {})",
        report.workload,
        opt(m.level.map(|l| l.name().to_string())),
        opt(m.batch_size.map(|v| v.to_string())),
        opt(m.hidden.map(|v| v.to_string())),
        opt(m.dataset.clone()),
        opt(m.seed.map(|v| v.to_string())),
    );
    let s = &report.stats;
    engine::outln!(
        "nodes {}  edges {}  instances {}  depth {}  lower bound {} batches",
        s.nodes,
        s.edges,
        s.instances,
        s.depth,
        s.lower_bound
    );
    if data_ids + data_labels > 0 {
        engine::outln!(
            "recorded data: token ids on {data_ids} nodes, labels on {data_labels} nodes"
        );
    }
    let width = s
        .types
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    engine::outln!(
        "{:>4}  {:<width$}  {:>9}  {:>8}  {:>6}",
        "id",
        "type",
        "batchable",
        "nodes",
        "lb"
    );
    for t in &s.types {
        engine::outln!(
            "{:>4}  {:<width$}  {:>9}  {:>8}  {:>6}",
            t.id,
            t.name,
            if t.batchable { "yes" } else { "no" },
            t.nodes,
            t.lower_bound
        );
    }
    Ok(())
}
