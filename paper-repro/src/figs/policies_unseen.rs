//! `docs/results/policies.md` (e): one FSM per workload, distilled from the
//! best-known schedule of one training trace, then run unchanged on that
//! trace and on unseen ones (other samples, batch sizes, DAG seeds and
//! sizes), against typewise and each trace's own best-known schedule.

use figures::{BarSeries, Figure, GroupedBars, RefLine, Scale};

use crate::error::Result;
use crate::items::Paper::EdBatch;
use crate::report::ctx::Ctx;
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{RowSet, distinct};

use super::policy_common::{TraceId, find, over, round, traces};
use super::quick_note;

/// The FSM policy this item runs.
const FSM: &str = "fsm-teacher";

/// The paper's statements this item puts in context.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![ctx.say(EdBatch, "fsm.batch_independent")?])
}

/// One trace's line.
struct Line {
    workload: String,
    trace: TraceId,
    training: TraceId,
    nodes: usize,
    fsm: u64,
    misses: u64,
    typewise: Option<u64>,
    /// The trace's best-known schedule; on the training trace, the teacher
    /// schedule the FSM was distilled from.
    best: Option<u64>,
    encoding: String,
    states: Option<usize>,
}

fn lines(rows: &RowSet) -> Vec<Line> {
    let mut out = Vec::new();
    for w in distinct(rows.policies().map(|r| r.config.workload.clone())) {
        let mut mine: Vec<Line> = traces(rows)
            .into_iter()
            .filter(|t| t.workload == w)
            .filter_map(|t| {
                let f = find(rows, &t, FSM)?;
                let training = TraceId::training(f.config)?;
                let m = f.metrics;
                let best = if training == t {
                    m.teacher_batches
                } else {
                    m.best_known
                };
                Some(Line {
                    workload: w.clone(),
                    typewise: find(rows, &t, "typewise").map(|r| r.metrics.batches),
                    trace: t,
                    training,
                    nodes: m.nodes,
                    fsm: m.batches,
                    misses: m.misses,
                    best,
                    encoding: m.encoding.clone().unwrap_or_default(),
                    states: m.states,
                })
            })
            .collect();
        // The training trace first, then the unseen ones in row order.
        mine.sort_by_key(|l| l.trace != l.training);
        out.extend(mine);
    }
    out
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let ls = lines(rows);
    let mut t = Table::new(
        "policies-unseen",
        "Per workload: the FSM on its training trace (*same*) and on unseen traces; misses = \
         decisions taken by the fallback (typewise) because the state was not in the table; \
         best-known = the trace's best-known schedule (on the training trace: the teacher \
         schedule the FSM was distilled from).",
        &[
            "workload",
            "trained on",
            "run on",
            "nodes",
            "FSM",
            "misses (rate)",
            "typewise",
            "best-known",
            "FSM / best-known",
            "typewise / best-known",
        ],
    );
    let mut first_of: Vec<String> = Vec::new();
    for l in &ls {
        let trained = if first_of.contains(&l.workload) {
            l.training.sample()
        } else {
            first_of.push(l.workload.clone());
            format!(
                "{} ({}, {} states)",
                l.training.sample(),
                l.encoding,
                l.states.map(|s| s.to_string()).unwrap_or_default()
            )
        };
        let rate = l.misses as f64 / l.fsm.max(1) as f64;
        let ratio = |a: Option<u64>| match (a, l.best) {
            (Some(a), Some(b)) => over(a, b, 3),
            _ => String::new(),
        };
        t.push(vec![
            l.workload.clone(),
            trained,
            if l.trace == l.training {
                "same".into()
            } else {
                l.trace.sample()
            },
            l.nodes.to_string(),
            l.fsm.to_string(),
            format!("{} ({}%)", l.misses, round(rate * 100.0, 1)),
            l.typewise.map(|b| b.to_string()).unwrap_or_default(),
            l.best.map(|b| b.to_string()).unwrap_or_default(),
            ratio(Some(l.fsm)),
            ratio(l.typewise),
        ]);
    }

    let unseen: Vec<&Line> = ls.iter().filter(|l| l.trace != l.training).collect();
    let per = |f: &dyn Fn(&Line) -> Option<u64>| -> Vec<Option<f64>> {
        unseen
            .iter()
            .map(|l| match (f(l), l.best) {
                (Some(a), Some(b)) if b > 0 => Some(a as f64 / b as f64),
                _ => None,
            })
            .collect()
    };
    let chart = GroupedBars {
        x_label: "unseen trace".into(),
        y_label: "batches / best-known".into(),
        y_scale: Scale::Linear,
        categories: unseen
            .iter()
            .map(|l| format!("{} {}", l.workload, l.trace.sample()))
            .collect(),
        series: vec![
            BarSeries {
                name: "FSM".into(),
                values: per(&|l| Some(l.fsm)),
                paper: Vec::new(),
            },
            BarSeries {
                name: "typewise".into(),
                values: per(&|l| l.typewise),
                paper: Vec::new(),
            },
        ],
        reference_lines: vec![RefLine::new(1.0, "best-known")],
    };
    let fig = Figure::new(
        "Generalisation: the distilled FSM on unseen traces (lower is better)",
        chart,
        ctx.stamp.clone(),
    )
    .with_size(2400, 1000);
    ctx.figure(sec, "policies-unseen", fig)?;
    ctx.table(sec, t)?;

    let rule = rows.policies().find_map(|r| r.config.optimise.clone());
    let fsm = rows.policies().find_map(|r| r.config.fsm.clone());
    sec.setup = format!(
        "One FSM per workload: every encoding distilled from the training trace's best-known \
         schedule ({} s), trained with the default scheme ({} episodes at most), the best kept. \
         Each trace's own best-known: `search optimise`, {} s, beam widths up to {}, run alone.",
        fsm.as_ref()
            .and_then(|f| f.teacher_budget_ms)
            .or(rule.as_ref().map(|r| r.budget_ms))
            .map(|ms| round(ms as f64 / 1000.0, 3))
            .unwrap_or_default(),
        fsm.as_ref().map(|f| f.episodes).unwrap_or_default(),
        rule.as_ref()
            .map(|r| round(r.budget_ms as f64 / 1000.0, 3))
            .unwrap_or_default(),
        rule.as_ref().map(|r| r.max_width).unwrap_or_default(),
    );
    sec.paper = paper(ctx)?;
    let mut parts = Vec::new();
    for w in distinct(unseen.iter().map(|l| l.workload.clone())) {
        let mine: Vec<&&Line> = unseen.iter().filter(|l| l.workload == w).collect();
        let ratios: Vec<f64> = mine
            .iter()
            .filter_map(|l| l.best.filter(|b| *b > 0).map(|b| l.fsm as f64 / b as f64))
            .collect();
        let better = mine
            .iter()
            .filter(|l| l.typewise.is_some_and(|t| l.fsm < t))
            .count();
        let rates: Vec<f64> = mine
            .iter()
            .map(|l| l.misses as f64 / l.fsm.max(1) as f64)
            .collect();
        let (lo, hi) = (
            ratios.iter().copied().fold(f64::INFINITY, f64::min),
            ratios.iter().copied().fold(0.0, f64::max),
        );
        let (rlo, rhi) = (
            rates.iter().copied().fold(f64::INFINITY, f64::min),
            rates.iter().copied().fold(0.0, f64::max),
        );
        if ratios.is_empty() {
            continue;
        }
        let range = |a: f64, b: f64, d: i32| {
            let (a, b) = (round(a, d), round(b, d));
            if a == b { a } else { format!("{a}–{b}") }
        };
        parts.push(format!(
            "{w}: {}× the best-known, fewer batches than typewise on {better}/{}, {}% missed",
            range(lo, hi, 3),
            mine.len(),
            range(rlo * 100.0, rhi * 100.0, 1)
        ));
    }
    sec.reading = if parts.is_empty() {
        "No unseen trace measured.".into()
    } else {
        format!("On unseen traces: {}.", parts.join("; "))
    };
    if let Some(q) = quick_note(rows, "two workloads and a DAG, 0.5 s, 100 episodes") {
        sec.notes.push(q);
    }
    Ok(())
}
