//! `planner check`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use planner::LayoutFile;
use planner::check::check_layout;
use serde::Serialize;

/// Arguments of `planner check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Layout file to verify.
    file: PathBuf,
    /// Extra cell definition files (YAML), for layouts of user cells.
    #[arg(long = "cells")]
    cell_files: Vec<PathBuf>,
    /// Fail unless the layout is for this hidden size. [range: 1 to 65536]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::HIDDEN))]
    hidden: Option<usize>,
    /// Fail unless the layout is for this batch size. [range: 1 to 1000000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::BATCH))]
    batch: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Out {
    file: String,
    ok: bool,
    cell: String,
    hidden: usize,
    batch: usize,
    allocation: planner::layout_file::AllocationKind,
    batches: usize,
    operands: usize,
    contiguous: usize,
    broadcasts: usize,
    copies: usize,
    copy_bytes: u64,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let file = LayoutFile::read(&a.file)?;
    let shown = a.file.display().to_string();
    if let Some(h) = a.hidden
        && h != file.hidden
    {
        bail!(
            "{shown}: the layout is for hidden size {} but --hidden {h} was given",
            file.hidden
        );
    }
    if let Some(b) = a.batch
        && b != file.batch
    {
        bail!(
            "{shown}: the layout is for batch size {} but --batch {b} was given",
            file.batch
        );
    }
    let lib = super::library(&a.cell_files)?;
    let cell = lib
        .instantiate(&file.cell, file.hidden)
        .with_context(|| format!("{shown}: cell `{}`", file.cell))?;
    let report = check_layout(&file, &cell).with_context(|| format!("{shown}: check failed"))?;
    let out = Out {
        file: shown,
        ok: true,
        cell: file.cell.clone(),
        hidden: file.hidden,
        batch: file.batch,
        allocation: file.allocation,
        batches: report.batches,
        operands: report.operands,
        contiguous: report.contiguous,
        broadcasts: report.broadcasts,
        copies: report.copies,
        copy_bytes: file.totals.copy_bytes,
    };
    if a.json {
        return super::print_json(&out);
    }
    engine::outln!(
        "ok: {}: cell {} hidden {} batch {}: {} batches; of {} batched operands {} contiguous, {} broadcast, {} copied ({} bytes)",
        out.file,
        out.cell,
        out.hidden,
        out.batch,
        out.batches,
        out.operands,
        out.contiguous,
        out.broadcasts,
        out.copies,
        out.copy_bytes
    );
    Ok(())
}
