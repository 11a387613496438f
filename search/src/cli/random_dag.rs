//! `search random-dag`: a seeded random multi-type DAG (`search::synth`)
//! written as a trace file, for policies and the optimiser on graphs with no
//! repeating structure.

use std::path::PathBuf;

use anyhow::Context;
use engine::graph::lower_bound;
use search::synth::{DagParams, random_dag};
use serde::Serialize;

/// Arguments of `search random-dag`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Nodes. [range: 1 to 10000000]
    #[arg(long, default_value_t = 3000, value_parser = engine::tool::int_in(engine::tool::ranges::NODES))]
    nodes: usize,
    /// Types (all batchable, named t0, t1, ...). [range: 1 to 1000]
    #[arg(long, default_value_t = 5, value_parser = engine::tool::int_in(engine::tool::ranges::TYPES))]
    types: usize,
    /// Arguments are drawn among this many preceding nodes. [range: 1 to 1000000]
    #[arg(long, default_value_t = 48, value_parser = engine::tool::int_in(engine::tool::ranges::WINDOW))]
    window: usize,
    /// Most arguments per node. [range: 1 to 64]
    #[arg(long, default_value_t = 2, value_parser = engine::tool::int_in(engine::tool::ranges::MAX_ARGS))]
    max_args: usize,
    /// Independent DAGs (samples) the nodes are split into, at most --nodes. [range: 1 to 10000000]
    #[arg(long, default_value_t = 1, value_parser = engine::tool::int_in(engine::tool::ranges::INSTANCES))]
    instances: usize,
    /// Seed of the draws. [range: any 64-bit number]
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Trace file to write (atomically).
    #[arg(long)]
    out: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `search random-dag --json` output.
#[derive(Serialize)]
struct Report {
    out: String,
    nodes: usize,
    edges: usize,
    lower_bound: u64,
    params: DagParams,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let params = DagParams {
        nodes: a.nodes,
        types: a.types,
        window: a.window,
        max_args: a.max_args,
        instances: a.instances,
        seed: a.seed,
    };
    let trace = random_dag(&params).context("search random-dag")?;
    trace.write(&a.out)?;
    let g = &trace.graph;
    let r = Report {
        out: a.out.display().to_string(),
        nodes: g.len(),
        edges: g.num_edges(),
        lower_bound: lower_bound(g).total,
        params,
    };
    if a.json {
        return super::print_json(&r);
    }
    engine::outln!(
        "wrote {}: random DAG of {} nodes, {} edges, {} types, lower bound {} batches (seed {})",
        r.out,
        r.nodes,
        r.edges,
        r.params.types,
        r.lower_bound,
        r.params.seed
    );
    Ok(())
}
