//! ED-Batch Table 5: static-subgraph compile time (in-cell schedule search,
//! PQ-tree alignment, copy accounting) per cell.

use figures::{BarSeries, Figure, GroupedBars, Scale};

use crate::error::Result;
use crate::items::Paper::EdBatch;
use crate::report::ctx::Ctx;
use crate::report::fmt::{ms, opt, range, span};
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{PlannerCompileRow, RowSet, ascending, distinct};

use super::{list, paper_cell, quick_note};

/// The paper's statements for this item.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![ctx.say(EdBatch, "table5.reading")?])
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let cells = distinct(rows.planner_compile().map(|r| r.config.cell.clone()));
    let find = |c: &str| -> Option<PlannerCompileRow> {
        rows.planner_compile().find(|r| r.config.cell == c)
    };
    let median = |c: &str| find(c).map(|r| r.metrics.compile_s);
    let paper = |c: &str| ctx.num(EdBatch, &format!("table5.{c}.compile_ms"));
    let mut t = Table::new(
        "table5",
        "Compile time per cell: median of the timed runs (ours) and the paper's Table 5.",
        &[
            "subgraph",
            "cell",
            "ours: ms (median)",
            "ours: ms (min–max)",
            "paper: ms",
            "paper / ours",
        ],
    );
    let mut speedups = Vec::new();
    for c in &cells {
        let Some(r) = find(c) else {
            continue;
        };
        let samples = &r.row.samples;
        let m = median(c);
        if let (Some(m), Some(p)) = (m, paper(c)) {
            speedups.push(p / (m * 1e3));
        }
        t.push(vec![
            paper_cell(c).unwrap_or("").into(),
            c.clone(),
            m.map(ms).unwrap_or_default(),
            range(samples)
                .map(|(a, b)| span(a * 1e3, b * 1e3, 3))
                .unwrap_or_default(),
            opt(paper(c), 4),
            match (m, paper(c)) {
                (Some(m), Some(p)) => format!("{:.0}", p / (m * 1e3)),
                _ => String::new(),
            },
        ]);
    }
    let cats: Vec<String> = cells
        .iter()
        .map(|c| paper_cell(c).unwrap_or(c).to_string())
        .collect();
    let chart = GroupedBars {
        x_label: "static subgraph (cell)".into(),
        y_label: "compile time, ms (log scale)".into(),
        y_scale: Scale::Log10,
        categories: cats,
        series: vec![BarSeries {
            name: "ours (plan_cell, median)".into(),
            values: cells.iter().map(|c| median(c).map(|s| s * 1e3)).collect(),
            paper: cells.iter().map(|c| paper(c)).collect(),
        }],
        reference_lines: Vec::new(),
    };
    let fig = Figure::new(
        "ED-Batch Table 5: static-subgraph compile time (diamonds: paper)",
        chart,
        ctx.stamp.clone(),
    )
    .with_size(1400, 800);
    ctx.figure(sec, "table5", fig)?;
    ctx.table(sec, t)?;

    sec.setup = format!(
        "`planner::plan_cell` at hidden {}, batch {}: one warm-up, then {} timed calls, one \
         at a time.",
        list(&ascending(rows.planner_compile().map(|r| r.config.hidden))),
        list(&ascending(rows.planner_compile().map(|r| r.config.batch))),
        list(&ascending(rows.planner_compile().map(|r| r.config.repeats))),
    );
    sec.paper = self::paper(ctx)?;
    let ours: Vec<f64> = cells.iter().filter_map(|c| median(c)).collect();
    let slowest = |f: &dyn Fn(&str) -> Option<f64>| {
        cells
            .iter()
            .filter_map(|c| f(c).map(|v| (c, v)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| paper_cell(c).unwrap_or(c).to_string())
            .unwrap_or_default()
    };
    if let (Some((lo, hi)), Some((slo, shi))) = (range(&ours), range(&speedups)) {
        sec.reading = format!(
            "Our planner compiles a cell in {} ms, {}× faster than the paper's 1.5–30 ms \
             (different implementation and hardware); slowest cell: ours {}, the paper's {}.",
            span(lo * 1e3, hi * 1e3, 2),
            span(slo, shi, 2),
            slowest(&median),
            slowest(&paper),
        );
    }
    if let Some(q) = quick_note(rows, "fewer timed repeats") {
        sec.notes.push(q);
    }
    Ok(())
}
