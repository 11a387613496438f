//! `docs/results/policies.md` (c): on graphs small enough for the exact
//! search, the optimum (`search optimal`) against the lower bound, the
//! heuristics and the best FSM. One line per workload and trace set (the
//! spec's `max_nodes`), sorted by workload, then batch size.

use figures::{BarSeries, Figure, GroupedBars, Scale};

use crate::error::Result;
use crate::items::Paper::EdBatch;
use crate::report::ctx::Ctx;
use crate::report::fmt::span;
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{PolicyRow, RowSet, distinct};

use super::policy_common::{TraceId, find, round};
use super::quick_note;

/// The paper's statements this item puts in context.
pub fn paper(ctx: &Ctx) -> Result<Vec<String>> {
    Ok(vec![
        ctx.say(EdBatch, "batching.np_hard")?,
        ctx.say(EdBatch, "fig7.sort.optimal")?,
    ])
}

/// The heuristics compared with the optimum, in column order.
const HEURISTICS: [&str; 3] = ["typewise", "agenda", "depth"];

/// One solved graph.
struct Graph {
    nodes: usize,
    lb: u64,
    opt: u64,
    proved: bool,
    expanded: u64,
    /// Batches of each of [`HEURISTICS`] (None: not measured).
    heuristics: [Option<u64>; 3],
    fsm: Option<u64>,
}

/// A line of the table: a workload and a trace set.
struct Group {
    workload: String,
    batches: Vec<usize>,
    graphs: Vec<Graph>,
}

fn groups(rows: &RowSet) -> Vec<Group> {
    let optimal: Vec<PolicyRow> = rows
        .policies()
        .filter(|r| r.config.policy == "optimal")
        .collect();
    let keys = distinct(
        optimal
            .iter()
            .map(|r| (r.config.workload.clone(), r.config.max_nodes)),
    );
    let mut out: Vec<Group> = keys
        .into_iter()
        .map(|(w, max)| {
            let mine: Vec<&PolicyRow> = optimal
                .iter()
                .filter(|r| r.config.workload == w && r.config.max_nodes == max)
                .collect();
            let graphs = mine
                .iter()
                .map(|r| {
                    let t = TraceId::of(r.config);
                    let fsm = rows
                        .policies()
                        .find(|f| {
                            TraceId::of(f.config) == t && f.config.policy.starts_with("fsm-best")
                        })
                        .map(|f| f.metrics.batches);
                    Graph {
                        nodes: r.metrics.nodes,
                        lb: r.metrics.lower_bound,
                        opt: r.metrics.batches,
                        proved: r.metrics.proved == Some(true),
                        expanded: r.metrics.expanded.unwrap_or(0),
                        heuristics: HEURISTICS
                            .map(|h| find(rows, &t, h).map(|x| x.metrics.batches)),
                        fsm,
                    }
                })
                .collect();
            let mut batches = distinct(mine.iter().map(|r| r.config.batch));
            batches.sort_unstable();
            Group {
                workload: w,
                batches,
                graphs,
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.workload, &a.batches).cmp(&(&b.workload, &b.batches)));
    out
}

/// `1`, or `2-4` for a range of batch sizes.
fn batch_label(b: &[usize]) -> String {
    match (b.first(), b.last()) {
        (Some(lo), Some(hi)) if lo == hi => lo.to_string(),
        (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
        _ => String::new(),
    }
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let gs = groups(rows);
    let count = |g: &Group, f: &dyn Fn(&Graph) -> bool| g.graphs.iter().filter(|x| f(x)).count();
    let mut t = Table::new(
        "policies-exact",
        "Per workload and batch size: the graphs solved, the exact optimum (*opt*, `search \
         optimal`) against the lower bound (LB), and how often each heuristic and the best FSM \
         (fewest batches over every encoding) reach it.",
        &[
            "workload",
            "batch",
            "graphs",
            "nodes",
            "proved",
            "opt = LB",
            "max opt / LB",
            "typewise = opt",
            "agenda = opt",
            "depth = opt",
            "best FSM = opt",
            "best FSM − opt (max)",
            "max expansions",
        ],
    );
    for g in &gs {
        let min_nodes = g.graphs.iter().map(|x| x.nodes).min().unwrap_or(0);
        let max_nodes = g.graphs.iter().map(|x| x.nodes).max().unwrap_or(0);
        let max_ratio = (g.graphs.iter())
            .map(|x| x.opt as f64 / x.lb.max(1) as f64)
            .fold(0.0, f64::max);
        let at = |i: usize| count(g, &|x| x.heuristics[i] == Some(x.opt)).to_string();
        let fsm_gap = (g.graphs.iter())
            .filter_map(|x| x.fsm.map(|f| f as i64 - x.opt as i64))
            .max();
        t.push(vec![
            g.workload.clone(),
            batch_label(&g.batches),
            g.graphs.len().to_string(),
            span(min_nodes as f64, max_nodes as f64, 6),
            count(g, &|x| x.proved).to_string(),
            count(g, &|x| x.opt == x.lb).to_string(),
            round(max_ratio, 2),
            at(0),
            at(1),
            at(2),
            count(g, &|x| x.fsm == Some(x.opt)).to_string(),
            fsm_gap.map(|v| v.to_string()).unwrap_or_default(),
            g.graphs
                .iter()
                .map(|x| x.expanded)
                .max()
                .unwrap_or(0)
                .to_string(),
        ]);
    }

    let label = |g: &Group| format!("{} b{}", g.workload, batch_label(&g.batches));
    let share = |name: &str, f: &dyn Fn(&Graph) -> bool| BarSeries {
        name: name.into(),
        values: gs
            .iter()
            .map(|g| (!g.graphs.is_empty()).then(|| count(g, f) as f64 / g.graphs.len() as f64))
            .collect(),
        paper: Vec::new(),
    };
    let mut series: Vec<BarSeries> = HEURISTICS
        .iter()
        .enumerate()
        .map(|(i, h)| share(h, &move |x: &Graph| x.heuristics[i] == Some(x.opt)))
        .collect();
    series.push(share("best FSM", &|x| x.fsm == Some(x.opt)));
    series.push(share("lower bound", &|x| x.lb == x.opt));
    let chart = GroupedBars {
        x_label: "workload, batch size".into(),
        y_label: "share of graphs at the optimum".into(),
        y_scale: Scale::Linear,
        categories: gs.iter().map(label).collect(),
        series,
        reference_lines: Vec::new(),
    };
    let fig = Figure::new(
        "Small graphs: how often each policy (and the lower bound) meets the exact optimum",
        chart,
        ctx.stamp.clone(),
    )
    .with_size(2400, 1000);
    ctx.figure(sec, "policies-exact", fig)?;
    ctx.table(sec, t)?;

    let all: Vec<&Graph> = gs.iter().flat_map(|g| &g.graphs).collect();
    let max_nodes = distinct(rows.policies().filter_map(|r| r.config.max_nodes));
    let seeds = distinct(rows.policies().map(|r| r.config.seed));
    let data = distinct(
        rows.policies()
            .map(|r| r.config.data.clone().unwrap_or_else(|| "default".into())),
    );
    let episodes = distinct(
        rows.policies()
            .filter_map(|r| Some(r.config.fsm.as_ref()?.episodes)),
    );
    sec.setup = format!(
        "{} graphs of {} workloads (record seeds {} among those measured, data {}; traces \
         above {} nodes left out). *opt*: `search optimal` (branch and bound, 2M expansions at most); best FSM: \
         every encoding trained on the graph itself ({} episodes at most), the best kept.",
        all.len(),
        distinct(gs.iter().map(|g| &g.workload)).len(),
        span(
            *seeds.iter().min().unwrap_or(&0) as f64,
            *seeds.iter().max().unwrap_or(&0) as f64,
            6
        ),
        data.join(", "),
        max_nodes
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(" or "),
        episodes
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    );
    sec.paper = paper(ctx)?;
    let proved = all.iter().filter(|x| x.proved).count();
    let above = all.iter().filter(|x| x.opt > x.lb).count();
    let fsm_opt = all.iter().filter(|x| x.fsm == Some(x.opt)).count();
    let tw_opt = all
        .iter()
        .filter(|x| x.heuristics[0] == Some(x.opt))
        .count();
    let fsm_gap = all
        .iter()
        .filter_map(|x| x.fsm.map(|f| f.saturating_sub(x.opt)))
        .max()
        .unwrap_or(0);
    sec.reading = format!(
        "The exact search finished on {proved}/{n} graphs; the optimum is above the lower bound \
         on {above}. The best FSM reaches the optimum on {fsm_opt}/{n} (at most {fsm_gap} \
         batch{} above it), typewise on {tw_opt}/{n}.",
        if fsm_gap == 1 { "" } else { "es" },
        n = all.len()
    );
    if let Some(q) = quick_note(rows, "three workloads, seeds 1–5") {
        sec.notes.push(q);
    }
    Ok(())
}
