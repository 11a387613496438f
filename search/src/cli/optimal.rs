//! `search optimal`: the exact minimum number of batches of a small trace, by
//! branch and bound (`search::optimal`), with its schedule validated.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use engine::sched::validate_schedule;
use search::optimal::{OptimalConfig, OptimalReport, optimal};
use serde::Serialize;

/// Arguments of `search optimal`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace to solve.
    #[arg(long)]
    trace: PathBuf,
    /// Refuse traces with more nodes. [range: 1 to 256]
    #[arg(long, default_value_t = 64, value_parser = engine::tool::int_in((1, search::optimal::NODE_LIMIT)))]
    max_nodes: usize,
    /// Node expansions before giving up the proof (the best schedule found is
    /// still reported, with `proved: false`). [range: 1 to 1000000000000]
    #[arg(long, default_value_t = 2_000_000, value_parser = engine::tool::int_in(engine::tool::ranges::EXPANSIONS))]
    budget: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `search optimal --json` output.
#[derive(Serialize)]
struct Report {
    trace: String,
    workload: String,
    nodes: usize,
    seconds: f64,
    #[serde(flatten)]
    result: OptimalReport,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let trace = super::load::trace(&a.trace)?;
    let g = &trace.graph;
    let cfg = OptimalConfig {
        max_nodes: a.max_nodes,
        budget: a.budget,
        ..OptimalConfig::default()
    };
    let start = Instant::now();
    let result = optimal(g, &cfg).with_context(|| a.trace.display().to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    validate_schedule(g, &result.to_schedule(g))
        .context("internal error: the optimal schedule is invalid")?;
    let r = Report {
        trace: a.trace.display().to_string(),
        workload: trace.workload.clone(),
        nodes: g.len(),
        seconds,
        result,
    };
    if a.json {
        return super::print_json(&r);
    }
    let x = &r.result;
    engine::outln!(
        "{} ({}, {} nodes): {} {} batches, lower bound {}, best heuristic {} with {}; {} expansions in {:.3} s",
        r.trace,
        r.workload,
        r.nodes,
        if x.proved {
            "optimum"
        } else {
            "best found (budget exhausted, not proved)"
        },
        x.batches,
        x.lower_bound,
        x.incumbent,
        x.incumbent_batches,
        x.expanded,
        r.seconds
    );
    engine::outln!("schedule: {}", x.schedule.join(", "));
    Ok(())
}
