//! `planner explain`.

use std::path::PathBuf;

use anyhow::bail;
use planner::explain::explain;
use planner::{PlanOptions, plan_cell};
use serde::Serialize;

/// How the pinned-prefix sentinel leaf prints.
const START: &str = "^start";

/// Arguments of `planner explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cell to explain.
    #[arg(long)]
    cell: String,
    /// Hidden size to instantiate at. [range: 1 to 65536]
    #[arg(long, default_value_t = 64, value_parser = engine::tool::int_in(engine::tool::ranges::HIDDEN))]
    hidden: usize,
    /// Instances per batch. [range: 1 to 1000000]
    #[arg(long, default_value_t = 8, value_parser = engine::tool::int_in(engine::tool::ranges::BATCH))]
    batch: usize,
    /// Keep the cell's inputs first, in port order.
    #[arg(long)]
    fixed_inputs: bool,
    /// Extra cell definition files (YAML) to load besides the built-ins.
    #[arg(long = "cells")]
    cell_files: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Out {
    cell: String,
    hidden: usize,
    batch: usize,
    schedule: Vec<Vec<String>>,
    constructed: String,
    broadcast: String,
    decided: String,
    order: Vec<String>,
    text: String,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.batch == 0 || a.hidden == 0 {
        bail!("--hidden and --batch must be at least 1");
    }
    let lib = super::library(&a.cell_files)?;
    let cell = lib.instantiate(&a.cell, a.hidden)?;
    let opts = PlanOptions {
        record: true,
        fixed_inputs: a.fixed_inputs,
        ..PlanOptions::default()
    };
    let plan = plan_cell(&cell, a.batch, &opts)?;
    let text = explain(&cell, &plan);
    if !a.json {
        print!("{text}");
        return Ok(());
    }
    let name = |v: usize| {
        cell.values
            .get(v)
            .map_or(START.to_owned(), |x| x.name.clone())
    };
    let trace = plan.planned.alignment.trace.as_ref();
    let render = |f: fn(&planner::align::AlignTrace) -> &planner::align::TreeView| {
        trace.map(|t| f(t).render(&name)).unwrap_or_default()
    };
    let out = Out {
        cell: plan.cell.clone(),
        hidden: plan.hidden,
        batch: plan.batch,
        schedule: plan
            .schedule()
            .iter()
            .map(|ops| ops.iter().map(|&o| name(cell.ops[o].out.index())).collect())
            .collect(),
        constructed: render(|t| &t.constructed),
        broadcast: render(|t| &t.broadcast),
        decided: render(|t| &t.decided),
        order: plan
            .planned
            .planned
            .layout
            .order
            .iter()
            .map(|&v| name(v))
            .collect(),
        text,
    };
    super::print_json(&out)
}
