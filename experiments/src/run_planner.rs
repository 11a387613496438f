//! Kinds `planner-memory` (ED-Batch Table 2: copies planned vs the DyNet
//! order, as `planner layout --json` reports them) and `planner-compile`
//! (Table 5: `plan_cell` wall time, one warm-up then `repeats` timed runs).

use std::time::Instant;

use engine::cells::{Cell, CellLibrary};
use planner::layout_file::totals_entry;
use planner::{CellPlan, LayoutSource, PlanOptions, plan_cell};
use rayon::prelude::*;

use crate::config::{PlannerCompileConfig, PlannerMemoryConfig, RunConfig};
use crate::error::{RunError, RunFailure};
use crate::expand::Run;
use crate::rows::{Metrics, PlannerCompileMetrics, PlannerMemoryMetrics};
use crate::runner::{Outcome, Sink, guarded};

fn plan(
    cells: &CellLibrary,
    cell: &str,
    hidden: usize,
    batch: usize,
    fixed_inputs: bool,
) -> Result<(Cell, CellPlan), RunFailure> {
    let c = cells.instantiate(cell, hidden)?;
    let opts = PlanOptions {
        fixed_inputs,
        ..PlanOptions::default()
    };
    let p = plan_cell(&c, batch, &opts)?;
    Ok((c, p))
}

fn ratio(base: u64, planned: u64) -> Option<f64> {
    (planned > 0).then(|| base as f64 / planned as f64)
}

fn library(todo: &[Run], sink: &Sink) -> Result<Option<CellLibrary>, RunError> {
    match CellLibrary::builtin() {
        Ok(c) => Ok(Some(c)),
        Err(e) => {
            for r in todo {
                sink.finish(r, "cpu", None, Err(RunFailure::Message(e.to_string())))?;
            }
            Ok(None)
        }
    }
}

/// Runs `todo` (kind `planner-memory`), in parallel.
pub(crate) fn run_memory(todo: &[Run], sink: &Sink) -> Result<(), RunError> {
    let Some(cells) = library(todo, sink)? else {
        return Ok(());
    };
    todo.par_iter().try_for_each(|run| {
        sink.started(run);
        let outcome = guarded(|| memory(run, &cells));
        sink.finish(run, "cpu", None, outcome)
    })
}

fn memory(run: &Run, cells: &CellLibrary) -> Outcome {
    let RunConfig::PlannerMemory(PlannerMemoryConfig {
        cell,
        hidden,
        batch,
        fixed_inputs,
    }) = &run.config
    else {
        return Err(RunFailure::Message("not a planner-memory run".into()));
    };
    let (_, p) = plan(cells, cell, *hidden, *batch, *fixed_inputs)?;
    let planned = totals_entry(&p.planned.planned.eval.totals);
    let baseline = totals_entry(&p.baseline.eval.totals);
    Ok((
        Metrics::PlannerMemory(Box::new(PlannerMemoryMetrics {
            ops: p.dag.len(),
            lower_bound: p.search.lower_bound,
            batches: p.schedule().len(),
            exhaustive: p.search.exhaustive,
            schedules: p.search.schedules.len(),
            schedules_truncated: p.search.truncated,
            compositions: p.compositions,
            layout_source: match p.planned.source {
                LayoutSource::PqTree => "pq-tree",
                LayoutSource::DynetFallback => "dynet-fallback",
            }
            .to_string(),
            arena_bytes: p.planned.planned.layout.arena_bytes,
            ratio_copy_bytes: ratio(baseline.copy_bytes, planned.copy_bytes),
            ratio_memory_kernels: ratio(baseline.memory_kernels, planned.memory_kernels),
            ratio_paper_bytes: ratio(
                baseline.paper_bytes_per_instance_weights,
                planned.paper_bytes_per_instance_weights,
            ),
            planned,
            baseline,
        })),
        Vec::new(),
    ))
}

/// Runs `todo` (kind `planner-compile`), one at a time.
pub(crate) fn run_compile(todo: &[Run], sink: &Sink) -> Result<(), RunError> {
    let Some(cells) = library(todo, sink)? else {
        return Ok(());
    };
    for run in todo {
        sink.started(run);
        let outcome = guarded(|| compile(run, &cells));
        sink.finish(run, "cpu", None, outcome)?;
    }
    Ok(())
}

fn compile(run: &Run, cells: &CellLibrary) -> Outcome {
    let RunConfig::PlannerCompile(PlannerCompileConfig {
        cell,
        hidden,
        batch,
        fixed_inputs,
        repeats,
    }) = &run.config
    else {
        return Err(RunFailure::Message("not a planner-compile run".into()));
    };
    let c = cells.instantiate(cell, *hidden)?;
    let opts = PlanOptions {
        fixed_inputs: *fixed_inputs,
        ..PlanOptions::default()
    };
    let first = plan_cell(&c, *batch, &opts)?; // warm-up
    let mut samples = Vec::with_capacity(*repeats);
    for _ in 0..(*repeats).max(1) {
        let t = Instant::now();
        let p = plan_cell(&c, *batch, &opts)?;
        samples.push(t.elapsed().as_secs_f64());
        std::hint::black_box(&p);
    }
    Ok((
        Metrics::PlannerCompile(PlannerCompileMetrics {
            batches: first.schedule().len(),
            copy_bytes: first.planned.planned.eval.totals.copy_bytes,
            compile_s: engine::measure::median(&samples),
        }),
        samples,
    ))
}
