//! `engine cells`.

use std::path::PathBuf;

use engine::cells::{Cell, CellLibrary, ValueKind};
use serde::Serialize;

/// Arguments of `engine cells`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show this cell's ops and shapes (default: list every cell).
    name: Option<String>,
    /// Hidden size to instantiate at. [range: 1 to 65536]
    #[arg(long, default_value_t = 64, value_parser = engine::tool::int_in(engine::tool::ranges::HIDDEN))]
    hidden: usize,
    /// Extra cell definition files (YAML) to load besides the built-ins.
    #[arg(long = "cells")]
    cell_files: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One cell in `engine cells --json`.
#[derive(Serialize)]
struct Row {
    name: String,
    doc: String,
    hidden: usize,
    ports: Vec<String>,
    params: usize,
    param_bytes: usize,
    ops: Vec<String>,
    outputs: Vec<String>,
}

fn row(c: &Cell) -> Row {
    let shape = |v: &engine::cells::ValueInfo| {
        let dims: Vec<String> = v.shape.iter().map(usize::to_string).collect();
        format!("{}[{}]", v.name, dims.join("x"))
    };
    Row {
        name: c.name.clone(),
        doc: c.doc.trim().to_string(),
        hidden: c.hidden,
        ports: c
            .ports
            .iter()
            .map(|p| {
                let ins: Vec<String> = p.inputs.iter().map(|i| shape(c.value(*i))).collect();
                format!("{} ({:?}): {}", p.name, p.arity, ins.join(", ")).to_lowercase()
            })
            .collect(),
        params: c
            .values
            .iter()
            .filter(|v| matches!(v.kind, ValueKind::Param))
            .count(),
        param_bytes: c.param_bytes(),
        ops: c
            .ops
            .iter()
            .map(|op| {
                let args: Vec<&str> = op.args.iter().map(|a| c.value(*a).name.as_str()).collect();
                format!(
                    "{} = {}({})",
                    shape(c.value(op.out)),
                    op.kind.name(),
                    args.join(", ")
                )
            })
            .collect(),
        outputs: c.outputs.iter().map(|o| shape(c.value(*o))).collect(),
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let mut lib = CellLibrary::builtin()?;
    for f in &a.cell_files {
        lib.load_file(f)?;
    }
    let names: Vec<String> = match &a.name {
        Some(n) => vec![n.clone()],
        None => lib.names().map(str::to_string).collect(),
    };
    let rows = names
        .iter()
        .map(|n| lib.instantiate(n, a.hidden).map(|c| row(&c)))
        .collect::<Result<Vec<_>, _>>()?;
    if a.json {
        return crate::cli::print_json(&rows);
    }
    for r in &rows {
        engine::outln!("{} (h={}): {}", r.name, r.hidden, r.doc);
        if a.name.is_some() {
            for p in &r.ports {
                engine::outln!("  port   {p}");
            }
            for op in &r.ops {
                engine::outln!("  op     {op}");
            }
            engine::outln!("  output {}", r.outputs.join(", "));
        }
        engine::outln!(
            "  {} ops, {} params ({} bytes)",
            r.ops.len(),
            r.params,
            r.param_bytes
        );
    }
    Ok(())
}
