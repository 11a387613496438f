//! `docs/results/policies.md` (a) and (b): ED-Batch's trainer on every
//! workload — the heuristics and an FSM per encoding on the trace each FSM
//! was trained on, against the lower bound (a); and the best of those FSMs,
//! unchanged, on other traces (b: other samples and batch sizes).

use figures::{BarSeries, Figure, GroupedBars, RefLine, Scale};

use crate::error::Result;
use crate::items::Paper::EdBatch;
use crate::report::ctx::Ctx;
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{PolicyRow, RowSet, ascending, distinct};

use super::policy_common::{TraceId, any, column, find, round, traces};
use super::{list, quick_note};

/// The paper's statements this item puts in context.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![
        ctx.say(EdBatch, "fig7.sort.optimal")?,
        ctx.say(EdBatch, "fsm.batch_independent")?,
    ])
}

/// Whether a policy is a trained FSM of one encoding (`fsm-sort`,
/// `fsm-sort:reference`), not the best of several.
fn one_encoding(p: &str) -> bool {
    let base = p
        .strip_suffix(experiments::config::REFERENCE_SUFFIX)
        .unwrap_or(p);
    base.starts_with("fsm-") && base != "fsm-best" && base != "fsm-teacher"
}

/// The best FSM of a trace: the `fsm-best` row (either scheme).
fn best<'a>(rows: &'a RowSet, t: &TraceId) -> Option<PolicyRow<'a>> {
    rows.policies().find(|r| {
        TraceId::of(r.config) == *t
            && r.config
                .policy
                .strip_suffix(experiments::config::REFERENCE_SUFFIX)
                .unwrap_or(&r.config.policy)
                == "fsm-best"
    })
}

/// Whether the FSM rows of trace `t` were trained on `t` itself.
fn trained_here(rows: &RowSet, t: &TraceId) -> bool {
    rows.policies()
        .filter(|r| TraceId::of(r.config) == *t)
        .filter_map(|r| TraceId::training(r.config))
        .all(|tr| tr == *t)
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let all = traces(rows);
    let (own, other): (Vec<TraceId>, Vec<TraceId>) =
        all.into_iter().partition(|t| trained_here(rows, t));
    let policies = distinct(rows.policies().map(|r| r.config.policy.clone()));
    let heuristics: Vec<&String> = policies
        .iter()
        .filter(|p| engine::sched::HEURISTICS.contains(&p.as_str()))
        .collect();
    let fsms: Vec<&String> = policies.iter().filter(|p| one_encoding(p)).collect();

    // (a): every policy on the traces the FSMs were trained on.
    let mut headers: Vec<String> = vec!["workload".into(), "nodes".into(), "LB".into()];
    headers.extend(heuristics.iter().chain(&fsms).map(|p| column(p)));
    headers.extend(["best FSM".into(), "states".into(), "misses".into()]);
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut a = Table::new(
        "policies",
        "Batches per policy (ratio to the lower bound, LB = ED-Batch A.3) on the trace each \
         FSM was trained on; *best FSM*: the encoding with fewest batches (ties to the earlier \
         encoding), its state count and its misses (decisions taken by the fallback).",
        &h,
    );
    for t in &own {
        let Some(first) = any(rows, t) else { continue };
        let mut cells = vec![
            t.workload.clone(),
            first.metrics.nodes.to_string(),
            first.metrics.lower_bound.to_string(),
        ];
        for p in heuristics.iter().chain(&fsms) {
            cells.push(
                find(rows, t, p)
                    .map(|r| format!("{} ({})", r.metrics.batches, round(r.metrics.ratio, 2)))
                    .unwrap_or_default(),
            );
        }
        match best(rows, t) {
            Some(b) => cells.extend([
                format!(
                    "{} {} ({})",
                    b.metrics.encoding.as_deref().unwrap_or(""),
                    b.metrics.batches,
                    round(b.metrics.ratio, 3)
                ),
                b.metrics.states.map(|s| s.to_string()).unwrap_or_default(),
                b.metrics.misses.to_string(),
            ]),
            None => cells.extend([String::new(), String::new(), String::new()]),
        }
        a.push(cells);
    }

    // (b): the best FSM on traces it was not trained on.
    let trained_on = rows
        .policies()
        .filter(|r| other.contains(&TraceId::of(r.config)))
        .filter_map(|r| TraceId::training(r.config))
        .map(|t| t.sample());
    let trained_on = distinct(trained_on);
    let mut b = Table::new(
        "policies-transfer",
        format!(
            "The best FSM, trained on the {} trace{} of the table above, unchanged on other \
             traces; miss rate = misses / batches.",
            list(&trained_on),
            if trained_on.len() == 1 { "" } else { "s" }
        ),
        &[
            "workload",
            "batch",
            "encoding",
            "seed",
            "nodes",
            "LB",
            "FSM batches",
            "FSM / LB",
            "miss rate",
            "typewise",
            "agenda",
        ],
    );
    for t in &other {
        let Some(f) = best(rows, t) else { continue };
        let m = f.metrics;
        let batches = |p: &str| {
            find(rows, t, p)
                .map(|r| r.metrics.batches.to_string())
                .unwrap_or_default()
        };
        let rate = if m.batches == 0 {
            0.0
        } else {
            m.misses as f64 / m.batches as f64
        };
        b.push(vec![
            t.workload.clone(),
            t.batch.to_string(),
            m.encoding.clone().unwrap_or_default(),
            t.seed.to_string(),
            m.nodes.to_string(),
            m.lower_bound.to_string(),
            m.batches.to_string(),
            round(m.ratio, 3),
            format!("{}%", round(rate * 100.0, 1)),
            batches("typewise"),
            batches("agenda"),
        ]);
    }

    // The figure: (a)'s ratios, heuristics and the best FSM.
    let mut series: Vec<BarSeries> = heuristics
        .iter()
        .map(|p| BarSeries {
            name: p.to_string(),
            values: own
                .iter()
                .map(|t| find(rows, t, p).map(|r| r.metrics.ratio))
                .collect(),
            paper: Vec::new(),
        })
        .collect();
    series.push(BarSeries {
        name: "best FSM".into(),
        values: own
            .iter()
            .map(|t| best(rows, t).map(|r| r.metrics.ratio))
            .collect(),
        paper: Vec::new(),
    });
    let chart = GroupedBars {
        x_label: "workload".into(),
        y_label: "batches / lower bound".into(),
        y_scale: Scale::Linear,
        categories: own.iter().map(|t| t.workload.clone()).collect(),
        series,
        reference_lines: vec![RefLine::new(1.0, "lower bound")],
    };
    let fig = Figure::new(
        "Learned FSMs (ED-Batch's trainer) against the heuristics (lower is better)",
        chart,
        ctx.stamp.clone(),
    )
    .with_size(2400, 1000);
    ctx.figure(sec, "policies", fig)?;
    ctx.table(sec, a)?;
    ctx.table(sec, b)?;

    let fsm_rows: Vec<PolicyRow> = rows.policies().filter(|r| r.config.fsm.is_some()).collect();
    let scheme = if fsm_rows.iter().any(|r| {
        r.config
            .policy
            .ends_with(experiments::config::REFERENCE_SUFFIX)
    }) {
        "ED-Batch's scheme (`search train --reference`: Eq. 1 reward, ε-greedy per decision)"
    } else {
        "`search train`'s default scheme"
    };
    let seeds = ascending(own.iter().map(|t| t.seed));
    sec.setup = format!(
        "{} workloads at batch {}, hidden {}, record seed{} {}. FSMs: {scheme}, {} episodes at \
         most, trainer seed {}, one per encoding{}.",
        distinct(rows.policies().map(|r| &r.config.workload)).len(),
        list(&ascending(own.iter().map(|t| t.batch))),
        list(&ascending(own.iter().map(|t| t.hidden))),
        if seeds.len() > 1 { "s" } else { "" },
        list(&seeds),
        list(&ascending(
            fsm_rows
                .iter()
                .filter_map(|r| Some(r.config.fsm.as_ref()?.episodes))
        )),
        list(&ascending(
            fsm_rows
                .iter()
                .filter_map(|r| Some(r.config.fsm.as_ref()?.trainer_seed))
        )),
        if fsms.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                fsms.iter()
                    .map(|p| column(p).trim_start_matches("FSM-").to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    sec.paper = paper(ctx)?;

    let bests: Vec<PolicyRow> = own.iter().filter_map(|t| best(rows, t)).collect();
    let at_bound = bests.iter().filter(|r| r.metrics.ratio <= 1.0).count();
    let worst = bests
        .iter()
        .max_by(|a, b| a.metrics.ratio.total_cmp(&b.metrics.ratio));
    let mut parts = vec![format!(
        "The best FSM meets the lower bound on {at_bound}/{} traces{}",
        bests.len(),
        worst
            .filter(|w| w.metrics.ratio > 1.0)
            .map(|w| format!(
                " (worst: {} at {}× the bound)",
                w.config.workload,
                round(w.metrics.ratio, 3)
            ))
            .unwrap_or_default()
    )];
    let moved: Vec<(u64, u64, f64)> = other
        .iter()
        .filter_map(|t| {
            let f = best(rows, t)?;
            let tw = find(rows, t, "typewise")?;
            let rate = f.metrics.misses as f64 / f.metrics.batches.max(1) as f64;
            Some((f.metrics.batches, tw.metrics.batches, rate))
        })
        .collect();
    if !moved.is_empty() {
        let not_worse = moved.iter().filter(|(f, t, _)| f <= t).count();
        let max_rate = moved.iter().map(|m| m.2).fold(0.0, f64::max);
        parts.push(format!(
            "on the other traces it needs no more batches than typewise on {not_worse}/{}, with \
             at most {}% of its decisions missed",
            moved.len(),
            round(max_rate * 100.0, 1)
        ));
    }
    sec.reading = parts.join("; ") + ".";
    if let Some(q) = quick_note(rows, "three workloads, 100 episodes") {
        sec.notes.push(q);
    }
    Ok(())
}
