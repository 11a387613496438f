//! The grid of one mode (full or quick): defaults, required fields, ranges,
//! names, and whether every cell takes every hidden size.

use engine::sched::Encoding;
use serde_saphyr::{Location, Spanned};

use super::fields::users;
use super::{Cx, MAX_BATCH, MAX_EPISODES, MAX_HIDDEN, MAX_REPEATS, MAX_ROUNDS, MAX_THREADS};
use crate::config::{DagShape, FsmRule, Grid, OptimiseRule, PolicyChoice, parse_policy};
use crate::error::SpecError;
use crate::spec::{Kind, List, RawQuick, RawSpec};

/// Fields a kind cannot do without (`policies` checks its traces' own,
/// which may come from `traces` entries instead).
fn required(kind: Kind, field: &str) -> bool {
    match field {
        "workloads" | "batches" => kind != Kind::Policies && users("workloads").contains(&kind),
        "policies" | "executors" | "systems" => users(field).contains(&kind),
        _ => false,
    }
}

/// The quick override if any, else the main field, with its path.
fn pick<'a, T>(
    main: &'a Option<T>,
    over: Option<&'a Option<T>>,
    name: &str,
) -> Option<(&'a T, String)> {
    match over.and_then(Option::as_ref) {
        Some(v) => Some((v, format!("quick.{name}"))),
        None => main.as_ref().map(|v| (v, name.to_string())),
    }
}

fn missing(cx: &Cx, r: &RawSpec, field: &str) -> SpecError {
    let msg = format!("missing: kind {} needs it", cx.kind.name());
    cx.at(r.kind.referenced, field, msg)
}

pub(super) fn all_encodings() -> Vec<String> {
    Encoding::ALL.iter().map(|e| e.name().to_string()).collect()
}

pub(super) fn grid(cx: &Cx, r: &RawSpec, quick: bool) -> Result<Grid, SpecError> {
    let q: Option<&RawQuick> = r.quick.as_ref().filter(|_| quick).map(|q| &q.value);
    let names = |main: &Option<List<String>>,
                 over: Option<&Option<List<String>>>,
                 name: &str|
     -> Result<Vec<String>, SpecError> {
        match pick(main, over, name) {
            Some((l, f)) if name == "encodings" => encodings(cx, l, &f),
            Some((l, f)) => cx.list(l, &f, |v| cx.check_name(name, v)),
            None if required(cx.kind, name) => Err(missing(cx, r, name)),
            None => Ok(Vec::new()),
        }
    };
    let sizes = |main: &Option<List<u64>>,
                 over: Option<&Option<List<u64>>>,
                 name: &str,
                 max: u64|
     -> Result<Option<Vec<usize>>, SpecError> {
        let check = |&v: &u64| match v {
            0 => Err(format!("{v} is out of range 1..={max}")),
            v if v > max => Err(format!("{v} is out of range 1..={max}")),
            _ => Ok(()),
        };
        match pick(main, over, name) {
            Some((l, f)) => Ok(Some(
                cx.list(l, &f, check)?
                    .into_iter()
                    .map(|v| v as usize)
                    .collect(),
            )),
            None if required(cx.kind, name) => Err(missing(cx, r, name)),
            None => Ok(None),
        }
    };
    let seeds = match pick(&r.seeds, q.map(|q| &q.seeds), "seeds") {
        Some((l, f)) => cx.list(l, &f, |_| Ok(()))?,
        None => vec![1],
    };
    let repeats = match pick(&r.repeats, q.map(|q| &q.repeats), "repeats") {
        Some((v, f)) => cx.range(v, &f, 1, MAX_REPEATS)?,
        None if cx.kind == Kind::PlannerCompile => 5,
        None => 3,
    };
    let workloads = names(&r.workloads, q.map(|q| &q.workloads), "workloads")?;
    let batches = sizes(&r.batches, q.map(|q| &q.batches), "batches", MAX_BATCH)?;
    let hiddens = sizes(&r.hiddens, q.map(|q| &q.hiddens), "hiddens", MAX_HIDDEN)?;
    let mut cells = names(&r.cells, q.map(|q| &q.cells), "cells")?;
    if cells.is_empty() {
        cells = cx.cells.names().map(str::to_owned).collect();
    }
    let fixed_inputs = match &r.fixed_inputs {
        Some(l) => cx.list(l, "fixed_inputs", |_| Ok(()))?,
        None => vec![false],
    };
    let mut encodings = names(&r.encodings, q.map(|q| &q.encodings), "encodings")?;
    if encodings.is_empty() {
        encodings = all_encodings();
    }
    let mut devices = names(&r.devices, None, "devices")?;
    if devices.is_empty() {
        devices = vec!["cpu".into()];
    }
    let layout_batch = match &r.layout_batch {
        Some(v) => cx.range(v, "layout_batch", 1, MAX_BATCH)?,
        None => 8,
    };
    let fsm = fsm(
        cx,
        r,
        q.and_then(|q| q.episodes.as_ref()),
        q.and_then(|q| q.optimise_budget.as_ref()),
    )?;
    let threads = sizes(&r.threads, q.map(|q| &q.threads), "threads", MAX_THREADS)?;
    let rounds = match pick(&r.rounds, q.map(|q| &q.rounds), "rounds") {
        Some((v, f)) => cx.range(v, &f, 1, MAX_ROUNDS)?,
        None if cx.kind == Kind::Replay => 1,
        None => 3,
    };
    let optimise = optimise(cx, r, q.and_then(|q| q.optimise_budget.as_ref()))?;
    let policies = names(&r.policies, q.map(|q| &q.policies), "policies")?;
    if optimise.is_none()
        && let Some((l, field)) = pick(&r.policies, q.map(|q| &q.policies), "policies")
        && let Some((i, p)) = (l.value.iter().enumerate())
            .find(|(_, p)| parse_policy(&p.value).is_some_and(PolicyChoice::needs_optimise))
    {
        let msg = format!("{:?} needs an `optimise` block", p.value);
        return Err(cx.at(p.referenced, &format!("{field}[{i}]"), msg));
    }
    let mut grid = Grid {
        seeds,
        repeats,
        batches: batches.unwrap_or(vec![8]),
        hiddens: hiddens.unwrap_or(vec![64]),
        cells,
        fixed_inputs,
        policies,
        encodings,
        executors: names(&r.executors, q.map(|q| &q.executors), "executors")?,
        devices,
        check: r.check.as_ref().is_none_or(|c| c.value),
        train: r.train.as_ref().is_some_and(|t| t.value),
        lazy: match &r.lazy {
            Some(l) => cx.list(l, "lazy", |_| Ok(()))?,
            None => vec![true],
        },
        fuse: match &r.fuse {
            Some(l) => cx.list(l, "fuse", |_| Ok(()))?,
            None => vec![true],
        },
        layout_batch,
        fsm,
        optimise,
        workloads,
        threads,
        systems: names(&r.systems, q.map(|q| &q.systems), "systems")?,
        rounds,
        traces: Vec::new(),
        random_dag: DagShape::default(),
        exclude: Vec::new(),
    };
    if cx.kind == Kind::Policies {
        grid.traces = super::traces::trace_sets(cx, r, q)?;
        grid.random_dag = super::traces::dag_shape(cx, r)?;
        // The axes `exclude` is checked against: every set's values.
        grid.workloads = union(&grid.traces, |t| &t.workloads);
        grid.batches = union(&grid.traces, |t| &t.batches);
        grid.hiddens = union(&grid.traces, |t| &t.hiddens);
        grid.seeds = union(&grid.traces, |t| &t.seeds);
    }
    check_hiddens(cx, r, q, &grid)?;
    Ok(grid)
}

/// The distinct values of `f` over `sets`, in first-seen order.
fn union<T: Clone + PartialEq>(
    sets: &[crate::config::TraceSet],
    f: impl Fn(&crate::config::TraceSet) -> &[T],
) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in sets.iter().flat_map(|s| f(s).iter()) {
        if !out.contains(x) {
            out.push(x.clone());
        }
    }
    out
}

fn encodings(cx: &Cx, l: &List<String>, field: &str) -> Result<Vec<String>, SpecError> {
    if l.value.len() == 1 && l.value[0].value == "all" {
        return Ok(all_encodings());
    }
    cx.list(l, field, |v| cx.check_name("encodings", v))
}

fn fsm(
    cx: &Cx,
    r: &RawSpec,
    quick_episodes: Option<&Spanned<u64>>,
    quick_budget: Option<&Spanned<f64>>,
) -> Result<FsmRule, SpecError> {
    let f = r.fsm.as_ref().map(|f| &f.value);
    let replay = matches!(cx.kind, Kind::Replay | Kind::Peers);
    let opt = |v: Option<&Spanned<u64>>, name: &str, max: u64| {
        v.map(|v| cx.range(v, name, 1, max)).transpose()
    };
    let batch = opt(f.and_then(|f| f.batch.as_ref()), "fsm.batch", MAX_BATCH)?;
    let hidden = opt(f.and_then(|f| f.hidden.as_ref()), "fsm.hidden", MAX_HIDDEN)?;
    let episodes = match quick_episodes {
        Some(e) => cx.range(e, "quick.episodes", 1, MAX_EPISODES)?,
        None => opt(
            f.and_then(|f| f.episodes.as_ref()),
            "fsm.episodes",
            MAX_EPISODES,
        )?
        .unwrap_or(1000),
    };
    let encodings = match f.and_then(|f| f.encodings.as_ref()) {
        Some(l) => encodings(cx, l, "fsm.encodings")?,
        // Kind `policies` writes no list for "all", so the configurations
        // (and hashes) of specs without one stay what they were.
        None if cx.kind == Kind::Policies => Vec::new(),
        None => all_encodings(),
    };
    let seed = f.and_then(|f| f.seed.as_ref()).map(|s| s.value);
    let nodes = opt(
        f.and_then(|f| f.nodes.as_ref()),
        "fsm.nodes",
        super::MAX_NODES,
    )?;
    let teacher_budget_ms = match f.and_then(|f| f.teacher_budget.as_ref()) {
        Some(b) if r.optimise.is_none() => {
            let msg = "needs an `optimise` block (its max_width bounds the teacher's search)";
            return Err(cx.at(b.referenced, "fsm.teacher_budget", msg.into()));
        }
        Some(b) => Some(match quick_budget {
            Some(q) => budget_ms(cx, q, "quick.optimise_budget")?,
            None => budget_ms(cx, b, "fsm.teacher_budget")?,
        }),
        None => None,
    };
    Ok(FsmRule {
        batch: batch.or(replay.then_some(32)),
        hidden: hidden.or(replay.then_some(64)),
        seed: seed.or(replay.then_some(1)),
        trainer_seed: f
            .and_then(|f| f.trainer_seed.as_ref())
            .map_or(1, |s| s.value),
        episodes: episodes as u32,
        encodings,
        nodes,
        teacher_budget_ms,
    })
}

/// A budget in seconds, checked, as milliseconds.
fn budget_ms(cx: &Cx, b: &Spanned<f64>, field: &str) -> Result<u64, SpecError> {
    if !(b.value.is_finite() && b.value > 0.0 && b.value <= MAX_OPTIMISE_S) {
        let msg = format!("{} seconds is out of range (0, {MAX_OPTIMISE_S}]", b.value);
        return Err(cx.at(b.referenced, field, msg));
    }
    Ok((b.value * 1000.0).round() as u64)
}

/// Longest optimiser budget per trace, seconds.
const MAX_OPTIMISE_S: f64 = 3600.0;
/// Widest beam a spec may ask for.
const MAX_WIDTH: u64 = 1 << 16;

fn optimise(
    cx: &Cx,
    r: &RawSpec,
    quick_budget: Option<&Spanned<f64>>,
) -> Result<Option<OptimiseRule>, SpecError> {
    let Some(o) = r.optimise.as_ref().map(|o| &o.value) else {
        return Ok(None);
    };
    let budget_ms = match (quick_budget, &o.budget) {
        (Some(b), _) => budget_ms(cx, b, "quick.optimise_budget")?,
        (None, Some(b)) => budget_ms(cx, b, "optimise.budget")?,
        (None, None) => 10_000,
    };
    let max_width = match &o.max_width {
        Some(w) => cx.range(w, "optimise.max_width", 1, MAX_WIDTH)?,
        None => 256,
    };
    Ok(Some(OptimiseRule {
        budget_ms,
        max_width,
        timed: o.timed.as_ref().is_some_and(|t| t.value),
    }))
}

/// Every (cell, hidden) pair of the grid instantiates, so a hidden size a
/// cell cannot take fails here, at the hidden's line.
fn check_hiddens(cx: &Cx, r: &RawSpec, q: Option<&RawQuick>, g: &Grid) -> Result<(), SpecError> {
    let (list, field) = match q.and_then(|q| q.hiddens.as_ref()) {
        Some(l) => (Some(l), "quick.hiddens"),
        None => (r.hiddens.as_ref(), "hiddens"),
    };
    let mut hiddens: Vec<(usize, Location, String)> = match list {
        Some(l) => (l.value.iter().enumerate())
            .map(|(i, h)| (h.value as usize, h.referenced, format!("{field}[{i}]")))
            .collect(),
        None => vec![(64, r.kind.referenced, "hiddens (default 64)".into())],
    };
    if let (Some(h), Some(f)) = (g.fsm.hidden, r.fsm.as_ref()) {
        let at = f
            .value
            .hidden
            .as_ref()
            .map_or(f.referenced, |s| s.referenced);
        hiddens.push((h, at, "fsm.hidden".into()));
    }
    let cells: Vec<&str> = match cx.kind {
        Kind::PlannerMemory | Kind::PlannerCompile => g.cells.iter().map(String::as_str).collect(),
        _ => (g.workloads.iter())
            .filter_map(|w| engine::workloads::workload(w))
            .flat_map(|w| w.roles.iter().map(|r| r.cell))
            .collect(),
    };
    for (h, at, field) in hiddens {
        for cell in &cells {
            if let Err(e) = cx.cells.instantiate(cell, h) {
                let msg = format!("hidden {h} does not fit cell {cell}: {e}");
                return Err(cx.at(at, &field, msg));
            }
        }
    }
    Ok(())
}
