//! Item `peers`: the real DyNet (autobatch off and agenda) and PyTorch eager
//! beside batchlab's reference, dynet, cavs and edbatch executors, measured
//! in one run (kind `peers`, `docs/peers.md`). Tables: throughput per
//! workload × batch × hidden × threads with the two ratios the issue asks for
//! (edbatch ÷ DyNet-autobatch, reference ÷ DyNet-none), the construction /
//! forward split, and the checks: same-weights loss, DyNet's executed batches
//! beside batchlab's agenda count (with the op kinds that differ), op counts.

use std::collections::BTreeMap;

use experiments::Row;
use experiments::config::{PeersConfig, RunConfig};
use experiments::rows::{Metrics, PeerMetrics};
use figures::{BarSeries, Figure, GroupedBars, Panel, Scale};
use serde_json::Value;

use crate::error::Result;
use crate::report::ctx::Ctx;
use crate::report::fmt::{ms, ratio, sig, span};
use crate::report::noise::{self, Noisy};
use crate::report::section::Section;
use crate::report::table::Table;
use crate::rows::{PeersRow, RowSet, ascending, distinct};

use super::{list, quick_note};

/// The systems in table order, with their column names.
pub(super) const SYSTEMS: [(&str, &str); 13] = [
    ("dynet-none", "DyNet"),
    ("dynet-agenda", "DyNet autobatch"),
    ("torch", "PyTorch eager"),
    ("torch-levels", "PyTorch by levels"),
    ("torch-depth", "PyTorch by depth"),
    ("torch-agenda", "PyTorch by agenda"),
    ("torch-fsm", "PyTorch by FSM"),
    ("dgl", "DGL"),
    ("dgl-pull", "DGL, one pull per role (earlier peer)"),
    ("reference", "batchlab reference"),
    ("dynet", "batchlab dynet"),
    ("cavs", "batchlab cavs"),
    ("edbatch", "batchlab edbatch"),
];

/// The PyTorch systems a practitioner may pick: the eager loop, the model
/// batched by levels by hand, the same cells batched by `bt.run` by depth, by
/// DyNet's agenda and by the learned FSM, and DGL (on PyTorch; its earlier
/// peer too, though never the faster).
pub(super) const TORCH: [&str; 7] = [
    "torch",
    "torch-levels",
    "torch-depth",
    "torch-agenda",
    "torch-fsm",
    "dgl",
    "dgl-pull",
];

/// batchlab's batching executors (its best is the fastest of these).
pub(super) const BATCHLAB_BEST: [&str; 3] = ["dynet", "cavs", "edbatch"];

/// What one point says about the engine and about the policy.
pub(super) struct Effects {
    /// batchlab's fastest executor and the fastest PyTorch system.
    pub best: Option<(&'static str, &'static str)>,
    /// The engine effect: batchlab's fastest ÷ PyTorch's fastest (instances
    /// per second; above 1 batchlab is faster).
    pub engine: Option<Noisy>,
    /// The policy effect inside PyTorch: `torch-fsm` ÷ `torch-depth`.
    pub policy: Option<Noisy>,
    /// Their batches per mini-batch (FSM, depth).
    pub batches: Option<(u64, u64)>,
}

/// The point's [`Effects`] from its rows by system.
pub(super) fn effects(m: &Systems) -> Effects {
    let get = |s: &str| measured(m, s);
    let tput = |s: &str| get(s).map(|r| r.metrics.instances_per_s);
    let fastest = |names: &[&'static str]| {
        names
            .iter()
            .filter_map(|s| Some((*s, tput(s)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(s, _)| s)
    };
    let best = fastest(&BATCHLAB_BEST).zip(fastest(&TORCH));
    let pair = |a: &str, b: &str| noise::ratio_of(get(a)?, get(b)?, |m| m.instances_per_s);
    Effects {
        best,
        engine: best.and_then(|(b, t)| pair(b, t)),
        policy: pair("torch-fsm", "torch-depth"),
        batches: get("torch-fsm")
            .and_then(|r| r.metrics.batches)
            .zip(get("torch-depth").and_then(|r| r.metrics.batches)),
    }
}

/// The effects' columns: best batchlab, best PyTorch, engine effect, policy
/// effect, FSM ÷ depth batches.
pub(super) const EFFECT_HEADS: [&str; 5] = [
    "best batchlab",
    "best PyTorch",
    "best batchlab ÷ best PyTorch",
    "PyTorch FSM ÷ depth",
    "batches FSM / depth",
];

impl Effects {
    /// The cells of [`EFFECT_HEADS`].
    pub fn cells(&self) -> Vec<String> {
        vec![
            self.best.map(|b| b.0.to_string()).unwrap_or_default(),
            self.best.map(|b| b.1.to_string()).unwrap_or_default(),
            self.engine.as_ref().map(Noisy::cell).unwrap_or_default(),
            self.policy.as_ref().map(Noisy::cell).unwrap_or_default(),
            self.batches
                .map(|(f, d)| format!("{f} / {d}"))
                .unwrap_or_default(),
        ]
    }
}

/// A reading of the effects over the points: the engine effect's range and
/// where it is below `floor`, the policy effect's range with the batches.
pub(super) fn effects_reading(all: &[(String, Effects)], floor: f64) -> String {
    let range = |v: &[f64]| {
        crate::report::fmt::range(v)
            .map(|(lo, hi)| format!("{}× over {} trace(s)", span(lo, hi, 3), v.len()))
            .unwrap_or_else(|| "no pair measured".into())
    };
    let engine: Vec<f64> = all
        .iter()
        .filter_map(|(_, e)| Some(e.engine.as_ref()?.value))
        .collect();
    let below: Vec<&str> = all
        .iter()
        .filter(|(_, e)| e.engine.as_ref().is_some_and(|n| n.value < floor))
        .map(|(p, _)| p.as_str())
        .collect();
    let policy: Vec<f64> = all
        .iter()
        .filter_map(|(_, e)| Some(e.policy.as_ref()?.value))
        .collect();
    let batches: Vec<String> = all
        .iter()
        .filter_map(|(p, e)| e.batches.map(|(f, d)| format!("{p} {f}/{d}")))
        .collect();
    format!(
        "The engine effect, batchlab's fastest executor ÷ the fastest PyTorch or DGL system of \
         the point (eager, by levels by hand, DGL, or bt.run by depth, agenda or the FSM): {}{}. \
         The policy effect inside PyTorch, by FSM ÷ by depth: {} (batches FSM/depth: {}).",
        range(&engine),
        if below.is_empty() {
            String::new()
        } else {
            format!(", below {floor}× at {}", below.join(", "))
        },
        range(&policy),
        if batches.is_empty() {
            "—".into()
        } else {
            batches.join(", ")
        },
    )
}

/// Relative loss difference the same-weights check allows.
pub const LOSS_TOLERANCE: f64 = 1e-4;

/// The paper's statements: none, this item compares with the real systems.
pub fn paper(_ctx: &Ctx) -> Result<Vec<String>> {
    Ok(Vec::new())
}

/// A grid point: workload, batch, hidden, threads. A point measured on a
/// GPU names its device after the workload (`tree-lstm on cuda`), so the
/// rows of one spec run on two devices stay two points.
pub(super) type Point = (String, usize, usize, usize);

/// A point's rows by system, failed ones included.
pub(super) type Systems<'a> = BTreeMap<String, &'a Row>;

fn point(c: &PeersConfig) -> Point {
    let workload = if c.device == "cpu" {
        c.workload.clone()
    } else {
        format!("{} on {}", c.workload, c.device)
    };
    (workload, c.batch, c.hidden, c.threads)
}

/// Groups the peers rows (failed ones included) by grid point, in
/// first-seen order; per system its row.
pub(super) fn points(rows: &RowSet) -> Vec<(Point, Systems<'_>)> {
    let mut out: Vec<(Point, Systems)> = Vec::new();
    for r in &rows.rows {
        let RunConfig::Peers(c) = &r.config else {
            continue;
        };
        let (p, s) = (point(c), c.system.clone());
        match out.iter_mut().find(|(q, _)| *q == p) {
            Some((_, m)) => {
                m.insert(s, r);
            }
            None => out.push((p, BTreeMap::from([(s, r)]))),
        }
    }
    out
}

/// System `s`'s row at a point, when it measured (no error, metrics present).
pub(super) fn measured<'a>(m: &Systems<'a>, s: &str) -> Option<PeersRow<'a>> {
    PeersRow::of(m.get(s)?)
}

/// A peers row's metrics, whether or not the run then failed.
fn metrics(r: &Row) -> Option<&PeerMetrics> {
    match &r.metrics {
        Some(Metrics::Peers(m)) => Some(m),
        _ => None,
    }
}

/// The errors of failed peers rows: per system its first.
pub(super) fn first_errors(rows: &RowSet) -> BTreeMap<String, String> {
    let mut why: BTreeMap<String, String> = BTreeMap::new();
    for r in &rows.rows {
        if let (RunConfig::Peers(c), Some(e)) = (&r.config, &r.error) {
            why.entry(c.system.clone()).or_insert_with(|| e.clone());
        }
    }
    why
}

/// Groups of op kinds compared between DyNet and batchlab: (label, batchlab
/// kinds, DyNet kinds; a trailing `*` matches a prefix).
const KIND_GROUPS: [(&str, &[&str], &[&str]); 14] = [
    ("affine", &["affine"], &["affine"]),
    ("matmul", &["matmul"], &["matmul"]),
    ("sigmoid", &["sigmoid"], &["sigmoid"]),
    ("tanh", &["tanh"], &["tanh"]),
    ("relu", &["relu"], &["relu"]),
    ("mul", &["mul"], &["mul"]),
    ("sub", &["sub"], &["sub"]),
    ("mean", &["mean"], &["mean"]),
    ("one_minus", &["one_minus"], &["one_minus:*"]),
    (
        "add/sum/port_sum",
        &["add", "sum", "port_sum"],
        &["add|sum2", "sum*"],
    ),
    ("lookup", &["lookup"], &["lookup"]),
    ("pick_loss", &["pick_loss"], &["pick_loss"]),
    ("softmax", &["softmax"], &["softmax"]),
    ("concat/slice", &["concat", "slice"], &["concat", "slice"]),
];

fn count_kinds(map: Option<&Value>, kinds: &[&str]) -> u64 {
    let Some(m) = map.and_then(Value::as_object) else {
        return 0;
    };
    m.iter()
        .filter(|(k, _)| {
            kinds.iter().any(|want| match want.strip_suffix('*') {
                Some(prefix) => k.starts_with(prefix),
                None => k == want,
            })
        })
        .filter_map(|(_, v)| v.as_u64())
        .sum()
}

/// The simulated chain from DyNet's count to batchlab's, e.g. `dynet 592,
/// +mean 442, +one_minus 418, +sums 418, +types 418, +ties 418`.
pub fn attribution(v: &Value) -> String {
    const ORDER: [&str; 6] = ["dynet", "+mean", "+one_minus", "+sums", "+types", "+ties"];
    ORDER
        .iter()
        .filter_map(|k| Some(format!("{k} {}", v.get(*k)?.as_u64()?)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `kind: batchlab a, DyNet b` for every group whose counts differ (a
/// missing map counts none).
pub fn kind_differences(dynet: Option<&Value>, batchlab: Option<&Value>) -> Vec<String> {
    KIND_GROUPS
        .iter()
        .filter_map(|(label, ours, theirs)| {
            let (a, b) = (count_kinds(batchlab, ours), count_kinds(dynet, theirs));
            (a != b).then(|| format!("{label} {a}→{b}"))
        })
        .collect()
}

pub fn build(ctx: &Ctx, rows: &RowSet, sec: &mut Section) -> Result<()> {
    let pts = points(rows);
    let tput = |m: &Systems, s: &str| measured(m, s).map(|r| r.metrics.instances_per_s);
    // Why a system has no number: the first distinct error per system.
    let why = first_errors(rows);
    let missing = |m: &Systems, s: &str| -> String {
        match m.get(s) {
            None => "not in grid".into(),
            Some(r) if !crate::rows::ok(r) => "n/a¹".into(),
            Some(_) => "?".into(),
        }
    };

    // Table 1: throughput and ratios.
    let mut heads: Vec<String> = vec![
        "workload".into(),
        "batch".into(),
        "hidden".into(),
        "threads".into(),
    ];
    heads.extend(SYSTEMS.iter().map(|(_, c)| format!("{c}: inst/s")));
    heads.push("edbatch ÷ DyNet autobatch".into());
    heads.push("reference ÷ DyNet".into());
    heads.extend(EFFECT_HEADS.iter().map(|h| h.to_string()));
    let head_refs: Vec<&str> = heads.iter().map(String::as_str).collect();
    let mut t = Table::new(
        "peers",
        "Instances per second of every system on the same trace and weights (medians of all \
         timed runs over all rounds; each system in its own processes, interleaved). Ratios: \
         above 1, batchlab is faster; ± the spread of the two systems' timed runs.",
        &head_refs,
    );
    let mut r_ed = Vec::new();
    let mut r_ref = Vec::new();
    let mut all_effects = Vec::new();
    for ((w, b, h, th), m) in &pts {
        let mut row = vec![w.clone(), b.to_string(), h.to_string(), th.to_string()];
        for (s, _) in SYSTEMS {
            row.push(tput(m, s).map_or_else(|| missing(m, s), |v| sig(v, 4)));
        }
        // Ratios with the noise of both systems' timed runs (all rounds).
        let q = |a: &str, b: &str| {
            noise::ratio_of(measured(m, a)?, measured(m, b)?, |m| m.instances_per_s)
        };
        if let Some(x) = q("edbatch", "dynet-agenda") {
            r_ed.push(x.value);
        }
        if let Some(x) = q("reference", "dynet-none") {
            r_ref.push(x.value);
        }
        row.push(
            q("edbatch", "dynet-agenda")
                .map(|r| r.cell())
                .unwrap_or_default(),
        );
        row.push(
            q("reference", "dynet-none")
                .map(|r| r.cell())
                .unwrap_or_default(),
        );
        let e = effects(m);
        row.extend(e.cells());
        all_effects.push((format!("{w} b{b} h{h} t{th}"), e));
        t.push(row);
    }

    // Table 2: where the time goes (construction / forward, CPU / wall).
    let mut split = Table::new(
        "peers-split",
        "Median milliseconds per mini-batch: construction / forward (DyNet: renew_cg and \
         building the graph / value(); batchlab: construction / scheduling + execution; \
         PyTorch eager has no separate construction), and process CPU time over wall time.",
        &[
            "workload",
            "batch",
            "hidden",
            "threads",
            "system",
            "version",
            "construction ms",
            "forward ms",
            "total ms",
            "CPU / wall",
            "rounds",
        ],
    );
    for ((w, b, h, th), m) in &pts {
        for (s, _) in SYSTEMS {
            let Some(r) = measured(m, s) else {
                continue;
            };
            let x = r.metrics;
            split.push(vec![
                w.clone(),
                b.to_string(),
                h.to_string(),
                th.to_string(),
                s.to_string(),
                x.version.clone(),
                x.construction_s.map(ms).unwrap_or_else(|| "—".into()),
                x.forward_s.map(ms).unwrap_or_default(),
                ms(x.total_s),
                ratio(x.cpu_s / x.total_s),
                format!("{}/{}", x.rounds_ok, r.config.rounds),
            ]);
        }
    }

    // Table 3: the checks.
    let mut checks = Table::new(
        "peers-checks",
        "Checks per trace: the largest relative loss difference from batchlab's reference \
         over every system that ran (same weights, tolerance 1e-4); DyNet autobatch's executed \
         batches (its profiler, parameter and input-constant nodes excluded) beside batchlab's \
         `dynet --policy agenda` batches, with the op kinds whose batch counts differ; ops of \
         the generated peer program beside `engine record --level op`, and DyNet's executed op \
         nodes (one_minus is two DyNet nodes).",
        &[
            "workload",
            "batch",
            "hidden",
            "threads",
            "max loss rel. diff",
            "loss check",
            "DyNet batches",
            "batchlab agenda batches",
            "batches equal",
            "differing kinds (batchlab→DyNet)",
            "simulated: DyNet → batchlab rule by rule",
            "program ops",
            "op-level nodes",
            "ops equal",
            "DyNet op nodes",
        ],
    );
    let (mut loss_ok, mut loss_n, mut eq_batches, mut n_batches, mut eq_ops, mut n_ops) =
        (0, 0, 0, 0, 0, 0);
    let mut differing: Vec<String> = Vec::new();
    for ((w, b, h, th), m) in &pts {
        let errs: Vec<f64> = m
            .values()
            .filter_map(|r| PeersRow::of(r)?.metrics.loss_rel_err)
            .collect();
        let max_err = errs
            .iter()
            .copied()
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
        if let Some(e) = max_err {
            loss_n += 1;
            if e <= LOSS_TOLERANCE {
                loss_ok += 1;
            }
        }
        let da = measured(m, "dynet-agenda").map(|r| r.metrics);
        let dyn_b = da.and_then(|x| x.batches);
        let bl_b = m.values().find_map(|r| metrics(r)?.agenda_batches);
        let kinds = da
            .map(|x| kind_differences(x.dynet_by_kind.as_ref(), x.agenda_by_op.as_ref()))
            .unwrap_or_default();
        let chain = da
            .and_then(|x| x.attribution.as_ref())
            .map(attribution)
            .unwrap_or_default();
        if let (Some(x), Some(y)) = (dyn_b, bl_b) {
            n_batches += 1;
            if x == y {
                eq_batches += 1;
            } else {
                differing.push(format!("{w} b{b} h{h}: {chain}"));
            }
        }
        let prog = m.values().find_map(|r| metrics(r)?.program_ops);
        let expected = m.values().find_map(|r| Some(metrics(r)?.expected_ops));
        if let (Some(x), Some(y)) = (prog, expected) {
            n_ops += 1;
            if x == y {
                eq_ops += 1;
            }
        }
        checks.push(vec![
            w.clone(),
            b.to_string(),
            h.to_string(),
            th.to_string(),
            max_err.map(|e| format!("{e:.1e}")).unwrap_or_default(),
            max_err
                .map(|e| if e <= LOSS_TOLERANCE { "pass" } else { "FAIL" }.to_string())
                .unwrap_or_default(),
            dyn_b.map(|v| v.to_string()).unwrap_or_default(),
            bl_b.map(|v| v.to_string()).unwrap_or_default(),
            dyn_b
                .zip(bl_b)
                .map(|(x, y)| if x == y { "yes" } else { "no" }.to_string())
                .unwrap_or_default(),
            kinds.join(", "),
            chain,
            prog.map(|v| v.to_string()).unwrap_or_default(),
            expected.map(|v| v.to_string()).unwrap_or_default(),
            prog.zip(expected)
                .map(|(x, y)| if x == y { "yes" } else { "no" }.to_string())
                .unwrap_or_default(),
            da.and_then(|x| x.dynet_nodes)
                .map(|v| {
                    let two = da.and_then(|x| x.two_node_ops).unwrap_or(0);
                    if two > 0 {
                        format!("{v} (= ops + {two} one_minus)")
                    } else {
                        v.to_string()
                    }
                })
                .unwrap_or_default(),
        ]);
    }

    let workloads = distinct(rows.peers().map(|r| r.config.workload.clone()));
    let threads = ascending(rows.peers().map(|r| r.config.threads));
    let fig = figure(
        ctx,
        rows,
        &pts,
        "instances / s (log scale)",
        format!(
            "batchlab beside the real DyNet and PyTorch on {}: instances per second (higher is better)",
            list(&distinct(rows.ok().map(|r| &r.provenance.machine.cpu)))
        ),
    );
    ctx.figure(sec, "peers", fig)?;
    ctx.table(sec, t)?;
    ctx.table(sec, split)?;
    ctx.table(sec, checks)?;

    let versions = distinct(
        rows.peers()
            .filter(|r| r.metrics.framework != "batchlab")
            .map(|r| format!("{} {}", r.metrics.framework, r.metrics.version)),
    );
    sec.setup = format!(
        "Workloads {}; batch {}; hidden {}; threads {}; record and weight seed {}; per system {} \
         round(s) of one process each (order rotated every round), each a warm-up and {} timed \
         run(s). Peers: {}. Same weights: every system loads the model `engine export-model` \
         writes. PyTorch by depth / agenda / FSM: the same cells as row-wise modules run by \
         `batchlab_torch.run`, one call per batch of the schedule (the FSM learned by `search \
         train` on PyTorch's graph of the FSM's training trace); scheduling is timed.",
        list(&workloads),
        list(&ascending(rows.peers().map(|r| r.config.batch))),
        list(&ascending(rows.peers().map(|r| r.config.hidden))),
        list(&threads),
        list(&ascending(rows.peers().map(|r| r.config.seed))),
        list(&ascending(rows.peers().map(|r| r.config.rounds))),
        list(&ascending(rows.peers().map(|r| r.config.repeats))),
        if versions.is_empty() {
            "none ran".to_string()
        } else {
            versions.join(", ")
        },
    );
    let rng = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if v.is_empty() {
            "no pair measured".to_string()
        } else {
            format!("{}× over {} trace(s)", span(lo, hi, 3), v.len())
        }
    };
    sec.reading = format!(
        "edbatch ÷ DyNet autobatch {}; reference ÷ DyNet {}. Same weights: loss within 1e-4 on \
         {loss_ok} of {loss_n} trace(s). DyNet's batches equal batchlab's agenda count on \
         {eq_batches} of {n_batches}; generated ops equal the op-level trace on {eq_ops} of {n_ops}.",
        rng(&r_ed),
        rng(&r_ref),
    );
    sec.reading += " ";
    sec.reading += &effects_reading(&all_effects, 1.2);
    for (s, e) in &why {
        sec.notes.push(format!("¹ {s}: {e}"));
    }
    if !differing.is_empty() {
        sec.notes.push(format!(
            "Batch counts differ where DyNet's autobatch signatures differ from batchlab's op \
             types (docs/peers.md). A simulation of both agenda schedules that reproduces DyNet's \
             count exactly switches DyNet's rules to batchlab's one at a time: `+mean` makes mean \
             batchable (DyNet's `Average` has no autobatch signature, so every mean runs alone), \
             `+one_minus` makes it one node (dynet38's Python API spells 1 - x as Negate then \
             +1), `+sums` types sums as batchlab does (DyNet's `Sum` signature is its argument \
             count without shapes: a cell's 3-term sum and a 3-word port sum share batches, 2- \
             and 3-word port sums do not), `+types` every other op, `+ties` uses batchlab's \
             tie-break. Here: {}.",
            differing.join("; ")
        ));
    }
    if let Some(q) = quick_note(rows, "a small grid (docs/peers.md gives the full one)") {
        sec.notes.push(q);
    }
    Ok(())
}

/// The peers' figure: per workload and thread count a panel of grouped bars,
/// one bar per system of [`SYSTEMS`] that measured there (instances per
/// second, log scale), two panels a row.
pub(super) fn figure(
    ctx: &Ctx,
    rows: &RowSet,
    pts: &[(Point, Systems)],
    y_label: &str,
    title: String,
) -> Figure {
    let tput = |m: &Systems, s: &str| measured(m, s).map(|r| r.metrics.instances_per_s);
    let mut panels = Vec::new();
    // The points' workloads (a GPU point's names its device), first seen first.
    let mut workloads: Vec<&String> = Vec::new();
    for (p, _) in pts {
        if !workloads.contains(&&p.0) {
            workloads.push(&p.0);
        }
    }
    for w in workloads {
        for th in &ascending(rows.peers().map(|r| r.config.threads)) {
            let here: Vec<&(Point, Systems)> = pts
                .iter()
                .filter(|(p, _)| p.0 == *w && p.3 == *th)
                .collect();
            if here.is_empty() {
                continue;
            }
            let categories: Vec<String> = here
                .iter()
                .map(|((_, b, h, _), _)| format!("b{b} h{h}"))
                .collect();
            let series: Vec<BarSeries> = SYSTEMS
                .iter()
                .filter(|(s, _)| here.iter().any(|(_, m)| tput(m, s).is_some()))
                .map(|(s, c)| BarSeries {
                    name: (*c).to_string(),
                    values: here.iter().map(|(_, m)| tput(m, s)).collect(),
                    paper: Vec::new(),
                })
                .collect();
            panels.push(Panel::new(
                format!("{w}, {th} thread{}", if *th == 1 { "" } else { "s" }),
                GroupedBars {
                    x_label: "batch, hidden".into(),
                    y_label: y_label.into(),
                    y_scale: Scale::Log10,
                    categories,
                    series,
                    reference_lines: Vec::new(),
                },
            ));
        }
    }
    let cols = panels.len().clamp(1, 2);
    let fig = Figure::grid(title, panels, cols, ctx.stamp.clone());
    let (w, h) = (fig.width.max(1600) + 200 * cols as u32, fig.height + 100);
    fig.with_size(w, h)
}
