//! `docs/results/policies.md` (f): the offline optimiser (`search optimise`)
//! on graphs of 1k–65k nodes, each run alone: its wall and process CPU
//! time, how wide its beam got, why it stopped, and what it found against
//! the best heuristic and the certified bound.

use figures::{BarSeries, Figure, GroupedBars, Scale};

use crate::error::Result;
use crate::report::ctx::Ctx;
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::RowSet;

use super::policy_common::{TraceId, any, over, round, traces};
use super::quick_note;

/// No paper measures this: the optimiser is batchlab's yardstick.
pub fn paper(_ctx: &Ctx) -> Result<Vec<String>> {
    Ok(Vec::new())
}

/// A graph's label: `random-dag` (its size is the nodes column), or the
/// workload and batch size.
fn label(t: &TraceId) -> String {
    if t.is_dag() {
        t.workload.clone()
    } else {
        t.graph()
    }
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let mut t = Table::new(
        "optimise-scaling",
        "Per graph: wall and process CPU seconds of the certified bound and the beam search \
         together, the widest beam pass finished, why the search stopped (`target`: it met \
         the certified bound; `max-width`: the widest pass allowed finished; `budget`), the \
         best heuristic (the search's first incumbent), the best-known schedule, the \
         certified bound and the gap (best-known / bound).",
        &[
            "graph",
            "nodes",
            "wall s",
            "CPU s",
            "widest pass",
            "stop",
            "best heuristic",
            "best-known",
            "certified bound",
            "gap",
        ],
    );
    let mut points = Vec::new();
    for tr in traces(rows) {
        let Some(m) = any(rows, &tr).map(|r| r.metrics) else {
            continue;
        };
        let (Some(o), Some(best), Some(bound)) = (&m.optimise, m.best_known, m.certified_bound)
        else {
            continue;
        };
        let secs = |x: Option<f64>| x.map(|s| format!("{s:.2}")).unwrap_or_default();
        t.push(vec![
            label(&tr),
            m.nodes.to_string(),
            secs(o.wall_s),
            secs(o.cpu_s),
            o.widest_pass.to_string(),
            o.stop.clone(),
            format!("{} {}", o.heuristic, o.heuristic_batches),
            best.to_string(),
            bound.to_string(),
            over(best, bound, 3),
        ]);
        points.push((format!("{} ({} nodes)", label(&tr), m.nodes), o.clone()));
    }
    let chart = GroupedBars {
        x_label: "graph".into(),
        y_label: "seconds".into(),
        y_scale: Scale::Linear,
        categories: points.iter().map(|p| p.0.clone()).collect(),
        series: vec![
            BarSeries {
                name: "wall".into(),
                values: points.iter().map(|p| p.1.wall_s).collect(),
                paper: Vec::new(),
            },
            BarSeries {
                name: "process CPU".into(),
                values: points.iter().map(|p| p.1.cpu_s).collect(),
                paper: Vec::new(),
            },
        ],
        reference_lines: Vec::new(),
    };
    let fig = Figure::new(
        "search optimise: time per graph (bound and beam search, alone)",
        chart,
        ctx.stamp.clone(),
    )
    .with_size(2400, 1000);
    ctx.figure(sec, "optimise-scaling", fig)?;
    ctx.table(sec, t)?;

    let rule = rows.policies().find_map(|r| r.config.optimise.clone());
    let budget = rule.as_ref().map(|r| r.budget_ms as f64 / 1000.0);
    sec.setup = format!(
        "`search optimise` on each graph, one at a time: {} s per graph (a quarter for the \
         certified bound), beam widths doubling up to {}, on {} cores.",
        budget.map(|b| round(b, 3)).unwrap_or_default(),
        rule.as_ref().map(|r| r.max_width).unwrap_or_default(),
        rows.rows
            .first()
            .map(|r| r.provenance.machine.cores)
            .unwrap_or_default(),
    );
    let over_budget = points
        .iter()
        .filter_map(|p| Some(p.1.wall_s? - budget?))
        .fold(f64::NEG_INFINITY, f64::max);
    let count = |s: &str| points.iter().filter(|p| p.1.stop == s).count();
    let mut reading = format!(
        "Of {} graphs, {} stopped at the certified bound (optimal), {} at the widest pass and \
         {} at the budget",
        points.len(),
        count("target"),
        count("max-width"),
        count("budget"),
    );
    if over_budget.is_finite() && over_budget > 0.0 {
        reading += &format!("; the budget held to within {over_budget:.2} s");
    }
    sec.reading = reading + ".";
    sec.notes.push(
        "Wall and CPU seconds are timings of a shared machine (not deterministic); a search \
         stopped by the budget also finds more or less depending on the machine's speed. The \
         other columns are the same on every run where the search stopped at `target` or \
         `max-width`."
            .into(),
    );
    if let Some(q) = quick_note(rows, "two small DAGs and one tree, 0.5 s per graph") {
        sec.notes.push(q);
    }
    Ok(())
}
