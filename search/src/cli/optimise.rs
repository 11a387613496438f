//! `search optimise`: the best-known schedule of a trace within a time budget
//! (`search::optimise`) and a certified lower bound (`search::bound`), so the
//! schedule comes with a certified gap; optionally written as a schedule file
//! (`docs/schedule-format.md`) for `search train --teacher`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use engine::sched::SameTypeDag;
use indicatif::{ProgressBar, ProgressStyle};
use search::bound::{BoundConfig, BoundReport, certify};
use search::optimise::{OptimiseConfig, OptimiseStop, Pass, optimise};
use search::schedule_file::ScheduleFile;
use serde::Serialize;

/// Arguments of `search optimise`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace to schedule.
    #[arg(long)]
    trace: PathBuf,
    /// Total time budget (e.g. 30s, 500ms, 2m; a bare number is seconds). [range: 0s to 168h]
    #[arg(long, default_value = "30s", value_parser = engine::tool::duration_in(engine::tool::ranges::BUDGET_S))]
    budget: Duration,
    /// Share of the budget for the certified bound (the rest searches
    /// schedules; the bound stops early when it is done). [range: 0 to 1]
    #[arg(long, default_value_t = 0.25, value_parser = engine::tool::real_in(0.0, false, 1.0))]
    bound_share: f64,
    /// Widest beam tried (widths double from 1). [range: 1 to 1048576]
    #[arg(long, default_value_t = 4096, value_parser = engine::tool::int_in(engine::tool::ranges::BEAM_WIDTH))]
    max_width: usize,
    /// Memory for the beam's states, MiB (wider passes than fit are skipped). [range: 1 to 16777216]
    #[arg(long, default_value_t = 2048, value_parser = engine::tool::int_in(engine::tool::ranges::MEMORY_MIB))]
    memory_mib: usize,
    /// Write the best schedule here (JSON schedule file, atomically).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print JSON instead of text (and no progress bar).
    #[arg(long)]
    json: bool,
}

/// `search optimise --json` output.
#[derive(Serialize)]
struct Report {
    trace: String,
    workload: String,
    nodes: usize,
    /// ED-Batch A.3.
    lower_bound: u64,
    certified_bound: u64,
    best_known: u64,
    /// best_known / certified_bound.
    gap: f64,
    /// True when best_known meets the certified bound (it is optimal).
    optimal: bool,
    heuristic: String,
    heuristic_batches: u64,
    bound: BoundReport,
    passes: Vec<Pass>,
    width_limit: usize,
    stop: OptimiseStop,
    seconds: f64,
    out: Option<String>,
    schedule: Vec<String>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if let Some(out) = &a.out {
        // The trace and, when it is a model folder's, the rest of that folder.
        let traces = engine::modeldir::ModelDir::with_its_folder(&a.trace);
        let inputs: Vec<(&str, &std::path::Path)> =
            traces.iter().map(|p| ("--trace", p.as_path())).collect();
        engine::io::distinct_outputs(&inputs, &[("--out", out)])?;
    }
    let trace = super::load::trace(&a.trace)?;
    let g = &trace.graph;
    let started = std::time::Instant::now();
    let st = SameTypeDag::new(g);
    let bound = certify(
        g,
        &BoundConfig {
            budget: a.budget.mul_f64(a.bound_share),
            known: search::optimise::heuristic_batches(g, &st),
            ..BoundConfig::default()
        },
    );
    let bar = if !a.json && std::io::stderr().is_terminal() {
        let b = ProgressBar::new_spinner();
        b.set_style(
            ProgressStyle::with_template("{spinner} {elapsed} {msg}")
                .context("progress bar template")?,
        );
        b.enable_steady_tick(Duration::from_millis(200));
        b
    } else {
        ProgressBar::hidden()
    };
    let cfg = OptimiseConfig {
        budget: a.budget.saturating_sub(started.elapsed()),
        max_width: a.max_width,
        target: bound.bound,
        memory_bytes: a.memory_mib.saturating_mul(1 << 20),
    };
    let mut progress = |p: &Pass, best: u64| {
        bar.set_message(format!(
            "width {} done, best {best} batches (bound {})",
            p.width, bound.bound
        ));
    };
    let r = optimise(g, &st, &cfg, &mut progress).with_context(|| a.trace.display().to_string())?;
    bar.finish_and_clear();
    let trace_name = a.trace.display().to_string();
    if let Some(out) = &a.out {
        let file = ScheduleFile::new(
            g,
            &r.schedule,
            &trace_name,
            &trace.workload,
            bound.bound,
            "search optimise",
        );
        file.write(out)?;
    }
    let report = Report {
        trace: trace_name,
        workload: trace.workload.clone(),
        nodes: g.len(),
        lower_bound: bound.a3,
        certified_bound: bound.bound,
        best_known: r.batches,
        gap: super::ratio(r.batches, bound.bound),
        optimal: r.batches <= bound.bound,
        heuristic: r.heuristic.clone(),
        heuristic_batches: r.heuristic_batches,
        passes: r.passes.clone(),
        width_limit: r.width_limit,
        stop: r.stop,
        seconds: started.elapsed().as_secs_f64(),
        out: a.out.as_ref().map(|p| p.display().to_string()),
        schedule: r
            .schedule
            .batches()
            .map(|(t, _)| g.types().name(t).to_string())
            .collect(),
        bound,
    };
    if a.json {
        return super::print_json(&report);
    }
    let widest = report
        .passes
        .iter()
        .filter(|p| p.finished)
        .map(|p| p.width)
        .max()
        .unwrap_or(0);
    engine::outln!(
        "{} ({}, {} nodes): best-known {} batches, certified bound {} ({:?}; A.3 {}), gap {:.3}{}",
        report.trace,
        report.workload,
        report.nodes,
        report.best_known,
        report.certified_bound,
        report.bound.method,
        report.lower_bound,
        report.gap,
        if report.optimal { " (optimal)" } else { "" }
    );
    engine::outln!(
        "best heuristic {} {} batches; beam up to width {widest} ({:?}) in {:.2} s{}",
        report.heuristic,
        report.heuristic_batches,
        report.stop,
        report.seconds,
        report
            .out
            .as_ref()
            .map(|o| format!("; wrote {o}"))
            .unwrap_or_default()
    );
    Ok(())
}
