//! `engine inspect`.

use std::path::PathBuf;

use engine::graph::{GraphStats, stats};
use engine::trace::TraceMeta;
use serde::Serialize;

/// Arguments of `engine inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace file to summarise.
    #[arg(required_unless_present = "model", conflicts_with = "model")]
    trace: Option<PathBuf>,
    /// A model folder (docs/torch.md): its trace, and its roles with their
    /// cells.
    #[arg(long)]
    model: Option<PathBuf>,
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
    /// With --model: the model's roles.
    roles: Option<Vec<RoleReport>>,
}

/// One role of a model folder.
#[derive(Serialize)]
struct RoleReport {
    role: String,
    cell: String,
    #[serde(rename = "type")]
    type_name: String,
    loss: bool,
    nodes: usize,
    ops: usize,
    params: usize,
    /// Where the recorder saw it first (module or op, file:line).
    from: serde_json::Value,
}

fn roles(dir: &engine::modeldir::ModelDir) -> anyhow::Result<Vec<RoleReport>> {
    let g = &dir.trace.graph;
    let mut out = Vec::new();
    for r in &dir.manifest.roles {
        let cell = dir
            .cells
            .instantiate(&r.cell, dir.manifest.hidden.max(1) as usize)?;
        let nodes = g
            .types()
            .iter()
            .find(|(_, t)| t.name == r.type_name)
            .map_or(0, |(id, _)| {
                g.node_types().iter().filter(|&&t| t == id).count()
            });
        out.push(RoleReport {
            role: r.role.clone(),
            cell: r.cell.clone(),
            type_name: r.type_name.clone(),
            loss: r.loss,
            nodes,
            ops: cell.ops.len(),
            params: cell
                .values
                .iter()
                .filter(|v| matches!(v.kind, engine::cells::ValueKind::Param))
                .map(|v| v.numel())
                .sum(),
            from: r.from.clone(),
        });
    }
    Ok(out)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let (trace, file, roles) = match (&a.trace, &a.model) {
        (Some(p), _) => (super::read_trace(p)?, p.display().to_string(), None),
        (None, Some(d)) => {
            let dir = engine::modeldir::ModelDir::open(d)?;
            let roles = roles(&dir)?;
            (dir.trace, d.display().to_string(), Some(roles))
        }
        (None, None) => anyhow::bail!("give a trace file or --model DIR"),
    };
    let (data_ids, data_labels) = trace.data_counts();
    let report = Report {
        file,
        workload: &trace.workload,
        meta: &trace.meta,
        data_ids,
        data_labels,
        stats: stats(&trace.graph),
        roles,
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
    if let Some(roles) = &report.roles {
        let w = roles.iter().map(|r| r.role.len()).max().unwrap_or(4).max(4);
        engine::outln!(
            "{:<w$}  {:>8}  {:>4}  {:>10}  loss  from",
            "role",
            "nodes",
            "ops",
            "params"
        );
        for r in roles {
            let from = r.from.get("at").and_then(|v| v.as_str()).unwrap_or("-");
            engine::outln!(
                "{:<w$}  {:>8}  {:>4}  {:>10}  {:<4}  {}",
                r.role,
                r.nodes,
                r.ops,
                r.params,
                if r.loss { "yes" } else { "" },
                from
            );
        }
    }
    Ok(())
}
