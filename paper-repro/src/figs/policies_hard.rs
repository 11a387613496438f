//! `docs/results/policies.md` (d), issue 16's acceptance: on the hard graphs
//! (lattices, two-type trees, random DAGs) the certified bound and the
//! best-known schedule, typewise, and the FSM trainers over every encoding —
//! ED-Batch's scheme, the default scheme, the default scheme distilling the
//! best-known schedule — with the default scheme's learning curves.

use figures::{Figure, LineChart, LineSeries, Scale};

use crate::error::Result;
use crate::items::Paper::EdBatch;
use crate::report::ctx::Ctx;
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{RowSet, ascending, distinct};

use super::policy_common::{TraceId, any, find, over, traces};
use super::{list, quick_note};

/// The paper's statements this item puts in context.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![
        ctx.say(EdBatch, "table4.setup")?,
        ctx.say(EdBatch, "fig7.sort.optimal")?,
    ])
}

/// Learning-curve points shown per graph (every 50 episodes by default:
/// the first 600 episodes, where the curves move).
const CURVE_POINTS: usize = 12;

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let ts = traces(rows);
    let mut t = Table::new(
        "policies-hard",
        "Per graph: ED-Batch A.3, the certified bound (and what gave it), the best-known \
         schedule and its gap (best-known / certified bound), typewise, and the best FSM over \
         every encoding of each trainer: ED-Batch's scheme (*reference*), the default scheme, \
         the default scheme with the best-known schedule as teacher; *best@ep*: episode when \
         the kept table was found (0 = the prior).",
        &[
            "graph",
            "nodes",
            "A.3",
            "certified bound",
            "best-known",
            "gap",
            "typewise",
            "reference FSM (best@ep)",
            "default FSM (best@ep)",
            "teacher FSM (encoding)",
            "teacher FSM / best-known",
            "FSM ≤ typewise",
        ],
    );
    let fsm_cell = |tr: &TraceId, p: &str| {
        find(rows, tr, p)
            .map(|r| {
                format!(
                    "{} ({})",
                    r.metrics.batches,
                    r.metrics
                        .best_episode
                        .map(|e| e.to_string())
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default()
    };
    let mut teacher_ratios = Vec::new();
    for tr in &ts {
        let Some(m) = any(rows, tr).map(|r| r.metrics) else {
            continue;
        };
        let (Some(best), Some(bound)) = (m.best_known, m.certified_bound) else {
            continue;
        };
        let typewise = find(rows, tr, "typewise").map(|r| r.metrics.batches);
        let teacher = find(rows, tr, "fsm-teacher");
        let cmp = teacher.and_then(|f| {
            let against = typewise.or(f.metrics.prior_batches)?;
            Some(if f.metrics.batches <= against {
                "yes"
            } else {
                "no"
            })
        });
        if let Some(f) = teacher {
            teacher_ratios.push((f.metrics.batches, best, cmp == Some("yes")));
        }
        t.push(vec![
            tr.graph(),
            m.nodes.to_string(),
            m.lower_bound.to_string(),
            format!("{bound} ({})", m.bound_method.as_deref().unwrap_or("")),
            best.to_string(),
            over(best, bound, 3),
            typewise.map(|b| b.to_string()).unwrap_or_default(),
            fsm_cell(tr, "fsm-best:reference"),
            fsm_cell(tr, "fsm-best"),
            teacher
                .map(|f| {
                    format!(
                        "{} ({})",
                        f.metrics.batches,
                        f.metrics.encoding.as_deref().unwrap_or("")
                    )
                })
                .unwrap_or_default(),
            teacher
                .map(|f| over(f.metrics.batches, best, 3))
                .unwrap_or_default(),
            cmp.unwrap_or("").into(),
        ]);
    }

    // The default trainer's learning curves (without teacher).
    let mut c = Table::new(
        "policies-hard-curves",
        format!(
            "Learning curves of the default trainer without teacher (the kept encoding; \
             `episode:best batches`, the first {CURVE_POINTS} rollouts; episode 0 is the prior, \
             typewise as an FSM)."
        ),
        &["graph", "encoding", "prior", "curve"],
    );
    let mut curves = Vec::new();
    for tr in &ts {
        let Some(r) = find(rows, tr, "fsm-best") else {
            continue;
        };
        let Some(curve) = &r.metrics.curve else {
            continue;
        };
        let points: Vec<String> = curve
            .iter()
            .take(CURVE_POINTS)
            .map(|p| format!("{}:{}", p.episode, p.best))
            .collect();
        c.push(vec![
            tr.graph(),
            r.metrics.encoding.clone().unwrap_or_default(),
            r.metrics
                .prior_batches
                .map(|p| p.to_string())
                .unwrap_or_default(),
            points.join(" "),
        ]);
        if let Some(prior) = r.metrics.prior_batches.filter(|p| *p > 0) {
            curves.push((
                format!("{} {}", tr.workload, tr.sample()),
                prior,
                curve.clone(),
            ));
        }
    }

    // The figure: the curves as the share of the prior's batches saved (the
    // y axis starts at 0, where every curve starts); a curve holds
    // its best between its points (it is a running minimum) and ends at
    // its last episode.
    let xs = ascending(
        curves
            .iter()
            .flat_map(|(_, _, c)| c.iter().map(|p| p.episode)),
    );
    let series = curves
        .iter()
        .map(|(name, prior, curve)| LineSeries {
            name: name.clone(),
            x: None,
            y: xs
                .iter()
                .map(|x| {
                    let last = curve.last().map_or(0, |p| p.episode);
                    (*x <= last)
                        .then(|| curve.iter().rev().find(|p| p.episode <= *x))
                        .flatten()
                        .map(|p| 100.0 * (*prior as f64 - p.best as f64) / *prior as f64)
                })
                .collect(),
        })
        .collect();
    let chart = LineChart {
        x_label: "episodes".into(),
        y_label: "batches saved against the prior (typewise), %".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x: xs.iter().map(|x| f64::from(*x)).collect(),
        series,
        reference_lines: Vec::new(),
    };
    let fig = Figure::new(
        "Hard graphs: learning curves of the default trainer (higher is better)",
        chart,
        ctx.stamp.clone(),
    );
    ctx.figure(sec, "policies-hard", fig)?;
    ctx.table(sec, t)?;
    ctx.table(sec, c)?;

    let opt = |f: &dyn Fn(&experiments::config::OptimiseRule) -> String| {
        distinct(
            rows.policies()
                .filter_map(|r| r.config.optimise.as_ref().map(f)),
        )
    };
    let fsm = |f: &dyn Fn(&experiments::config::FsmRule) -> String| {
        distinct(rows.policies().filter_map(|r| r.config.fsm.as_ref().map(f)))
    };
    sec.setup = format!(
        "{} graphs (hidden {}). Best-known and certified bound: `search optimise` ({} s per \
         graph, a quarter of it for the bound, beam widths up to {}), run alone. FSMs: every \
         encoding, the best kept, {} episodes at most, trainer seed {}.",
        ts.len(),
        list(&ascending(
            ts.iter().filter(|t| !t.is_dag()).map(|t| t.hidden)
        )),
        opt(&|o| super::policy_common::round(o.budget_ms as f64 / 1000.0, 3)).join(", "),
        opt(&|o| o.max_width.to_string()).join(", "),
        fsm(&|f| f.episodes.to_string()).join(", "),
        fsm(&|f| f.trainer_seed.to_string()).join(", "),
    );
    sec.paper = paper(ctx)?;
    let n = teacher_ratios.len();
    let within = teacher_ratios
        .iter()
        .filter(|(f, b, _)| *f as f64 <= 1.05 * *b as f64)
        .count();
    let not_worse = teacher_ratios.iter().filter(|x| x.2).count();
    let improved = |p: &str| {
        ts.iter()
            .filter_map(|tr| find(rows, tr, p))
            .filter(|r| r.metrics.best_episode.is_some_and(|e| e > 0))
            .count()
    };
    sec.reading = format!(
        "With the best-known schedule as teacher the FSM is within 1.05× of it on {within}/{n} \
         graphs and no worse than typewise on {not_worse}/{n}; without a teacher the default \
         scheme improves on its prior on {}/{} graphs, ED-Batch's on {}/{}.",
        improved("fsm-best"),
        ts.len(),
        improved("fsm-best:reference"),
        ts.len()
    );
    if rows
        .policies()
        .any(|r| r.metrics.optimise_complete == Some(false))
    {
        sec.notes.push(
            "The optimiser or the bound was cut by the time budget on some graph: its \
             best-known schedule and bound then depend on the machine's speed (both stay valid)."
                .into(),
        );
    }
    if let Some(q) = quick_note(rows, "batch 8, a 300-node DAG, 0.5 s, 100 episodes") {
        sec.notes.push(q);
    }
    Ok(())
}
