//! `search compare`: every heuristic, then each given policy file, on one
//! trace — the table the acceptance runs collect.

use std::path::PathBuf;

use engine::graph::lower_bound;
use engine::sched::{HEURISTICS, SameTypeDag};
use serde::Serialize;

use super::load::PolicySpec;

/// Arguments of `search compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace to schedule.
    #[arg(long)]
    trace: PathBuf,
    /// Policy files to add to the heuristics (repeatable).
    #[arg(long = "policy")]
    policies: Vec<String>,
    /// Accept policy files trained on another workload.
    #[arg(long)]
    allow_other_workload: bool,
    /// Timed runs per policy; the median is reported. [range: 1 to 100000]
    #[arg(long, default_value_t = 3, value_parser = engine::tool::int_in(engine::tool::ranges::REPEAT))]
    repeat: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One row of `search compare --json`.
#[derive(Serialize)]
struct Row {
    name: String,
    batches: u64,
    ratio: f64,
    misses: u64,
    miss_rate: f64,
    seconds: f64,
}

/// `search compare --json` output.
#[derive(Serialize)]
struct Report {
    trace: String,
    workload: String,
    nodes: usize,
    lower_bound: u64,
    rows: Vec<Row>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.repeat == 0 {
        anyhow::bail!("--repeat must be at least 1");
    }
    let mut specs: Vec<PolicySpec> = HEURISTICS
        .iter()
        .map(|&h| PolicySpec::Heuristic(h))
        .collect();
    for p in &a.policies {
        specs.push(super::load::policy(p)?);
    }
    let trace = super::load::trace(&a.trace)?;
    for s in &specs {
        super::load::check_workload(s, &trace, &a.trace, a.allow_other_workload)?;
    }
    let st = SameTypeDag::new(&trace.graph);
    let lb = lower_bound(&trace.graph).total;
    let mut rows = Vec::with_capacity(specs.len());
    for s in &specs {
        let mut policy = s.instantiate()?;
        let out = super::load::evaluate(&trace, &st, policy.as_mut(), a.repeat)?;
        rows.push(Row {
            name: s.label(),
            batches: out.batches,
            ratio: super::ratio(out.batches, lb),
            misses: out.misses,
            miss_rate: if out.batches == 0 {
                0.0
            } else {
                out.misses as f64 / out.batches as f64
            },
            seconds: out.seconds,
        });
    }
    let r = Report {
        trace: a.trace.display().to_string(),
        workload: trace.workload.clone(),
        nodes: trace.graph.len(),
        lower_bound: lb,
        rows,
    };
    if a.json {
        return super::print_json(&r);
    }
    engine::outln!(
        "{} ({}, {} nodes), lower bound {}",
        r.trace,
        r.workload,
        r.nodes,
        r.lower_bound
    );
    let width = r
        .rows
        .iter()
        .map(|x| x.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    engine::outln!(
        "{:<width$} {:>8} {:>7} {:>7} {:>10}",
        "policy",
        "batches",
        "ratio",
        "misses",
        "ms"
    );
    for x in &r.rows {
        engine::outln!(
            "{:<width$} {:>8} {:>7.3} {:>7} {:>10.3}",
            x.name,
            x.batches,
            x.ratio,
            x.misses,
            1e3 * x.seconds
        );
    }
    Ok(())
}
