//! The traces of a `policies` spec: its `traces` sets (each field an entry
//! lacks taken from the top level), or the one set of the top-level axes;
//! the random DAG generator's block; and the checks a trace can fail before
//! any run: unknown workload or data, a size out of range, `nodes` without
//! `random-dag` or the reverse, a hidden size a cell cannot take, and a
//! trace listed twice.

use serde_saphyr::{Location, Spanned};

use super::{Cx, MAX_BATCH, MAX_HIDDEN};
use crate::config::{DagShape, RANDOM_DAG, TraceSet};
use crate::error::SpecError;
use crate::spec::{List, RawQuick, RawSpec, RawTraces};

/// Most nodes of a random DAG (the generator's limit: about a gigabyte of
/// trace file) and largest `max_nodes`.
pub const MAX_NODES: u64 = 10_000_000;

/// A list field of one set: the entry's, else the top level's.
struct Field<'a, T> {
    list: &'a List<T>,
    path: String,
}

fn field<'a, T>(
    own: &'a Option<List<T>>,
    own_path: &str,
    top: Option<(&'a List<T>, String)>,
) -> Option<Field<'a, T>> {
    match own {
        Some(l) => Some(Field {
            list: l,
            path: own_path.to_string(),
        }),
        None => top.map(|(list, path)| Field { list, path }),
    }
}

/// The top level's value of a field, quick override first.
fn top<'a, T>(
    main: &'a Option<List<T>>,
    over: Option<&'a Option<List<T>>>,
    name: &str,
) -> Option<(&'a List<T>, String)> {
    match over.and_then(Option::as_ref) {
        Some(l) => Some((l, format!("quick.{name}"))),
        None => main.as_ref().map(|l| (l, name.to_string())),
    }
}

fn sizes(cx: &Cx, f: &Field<u64>, max: u64) -> Result<Vec<usize>, SpecError> {
    let v = cx.list(f.list, &f.path, |&v| {
        if (1..=max).contains(&v) {
            Ok(())
        } else {
            Err(format!("{v} is out of range 1..={max}"))
        }
    })?;
    Ok(v.into_iter().map(|v| v as usize).collect())
}

/// Checks a data name: `default`, `synthetic` or a shipped data set (a
/// spec names no files: it must run the same anywhere).
fn check_data(v: &str) -> Result<(), String> {
    use engine::workloads::DataChoice;
    match DataChoice::parse(v) {
        Ok(DataChoice::File(_)) | Err(_) => Err(format!(
            "unknown data {v:?} (expected default, synthetic or a data set of `engine datasets`)"
        )),
        Ok(_) => Ok(()),
    }
}

/// The trace sets of a `policies` spec (see the module docs).
pub(super) fn trace_sets(
    cx: &Cx,
    r: &RawSpec,
    q: Option<&RawQuick>,
) -> Result<Vec<TraceSet>, SpecError> {
    let entries = match q.and_then(|q| q.traces.as_ref()) {
        Some(l) => Some((l, "quick.traces")),
        None => r.traces.as_ref().map(|l| (l, "traces")),
    };
    let tops = Tops {
        workloads: top(&r.workloads, q.map(|q| &q.workloads), "workloads"),
        batches: top(&r.batches, q.map(|q| &q.batches), "batches"),
        hiddens: top(&r.hiddens, q.map(|q| &q.hiddens), "hiddens"),
        seeds: top(&r.seeds, q.map(|q| &q.seeds), "seeds"),
        data: r.data.as_ref().map(|l| (l, "data".to_string())),
        nodes: r.nodes.as_ref().map(|l| (l, "nodes".to_string())),
        max_nodes: r.max_nodes.as_ref(),
    };
    let shape = dag_shape(cx, r)?;
    let mut sets = Vec::new();
    let mut at = Vec::new();
    match entries {
        Some((list, name)) => {
            if list.value.is_empty() {
                return Err(cx.at(list.referenced, name, "must not be empty".into()));
            }
            for (i, e) in list.value.iter().enumerate() {
                let path = format!("{name}[{i}]");
                sets.push(one_set(cx, &e.value, e.referenced, &path, &tops, &shape)?);
                at.push((e.referenced, path));
            }
        }
        None => {
            let none = RawTraces {
                workloads: None,
                batches: None,
                hiddens: None,
                seeds: None,
                data: None,
                nodes: None,
                max_nodes: None,
            };
            sets.push(one_set(cx, &none, r.kind.referenced, "", &tops, &shape)?);
            at.push((r.kind.referenced, "traces".into()));
        }
    }
    if let Some(d) = &r.random_dag
        && !sets
            .iter()
            .any(|s| s.workloads.iter().any(|w| w == RANDOM_DAG))
    {
        let msg = format!("not used: no trace set lists {RANDOM_DAG}");
        return Err(cx.at(d.referenced, "random_dag", msg));
    }
    // A trace in two sets would be run twice under one configuration hash.
    let mut seen: Vec<(String, usize)> = Vec::new();
    for (i, s) in sets.iter().enumerate() {
        for t in points(s) {
            if let Some((_, j)) = seen.iter().find(|(p, _)| *p == t) {
                let msg = format!("{t} is also a trace of {}", at[*j].1);
                return Err(cx.at(at[i].0, &at[i].1, msg));
            }
            seen.push((t, i));
        }
    }
    Ok(sets)
}

/// The top level's fields, which entries fall back on.
struct Tops<'a> {
    workloads: Option<(&'a List<String>, String)>,
    batches: Option<(&'a List<u64>, String)>,
    hiddens: Option<(&'a List<u64>, String)>,
    seeds: Option<(&'a List<u64>, String)>,
    data: Option<(&'a List<String>, String)>,
    nodes: Option<(&'a List<u64>, String)>,
    max_nodes: Option<&'a Spanned<u64>>,
}

fn clone_top<'a, T>(t: &Option<(&'a List<T>, String)>) -> Option<(&'a List<T>, String)> {
    t.as_ref().map(|(l, p)| (*l, p.clone()))
}

/// One set from an entry (`path` empty: the top level alone).
fn one_set(
    cx: &Cx,
    e: &RawTraces,
    loc: Location,
    path: &str,
    tops: &Tops,
    shape: &DagShape,
) -> Result<TraceSet, SpecError> {
    let own = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    let missing = |name: &str| {
        let msg = if path.is_empty() {
            format!("missing: kind {} needs it", cx.kind.name())
        } else {
            format!(
                "missing here and at the top level: kind {} needs it",
                cx.kind.name()
            )
        };
        cx.at(loc, &own(name), msg)
    };
    let workloads = match field(&e.workloads, &own("workloads"), clone_top(&tops.workloads)) {
        Some(f) => cx.list(f.list, &f.path, |v| cx.check_name("workloads", v))?,
        None => return Err(missing("workloads")),
    };
    let dag = workloads.iter().any(|w| w == RANDOM_DAG);
    let zoo = workloads.iter().any(|w| w != RANDOM_DAG);
    let unused = |f: Option<&Spanned<Vec<Spanned<u64>>>>, name: &str, why: &str| match f {
        Some(l) => Err(cx.at(l.referenced, &own(name), format!("not used: {why}"))),
        None => Ok(()),
    };
    let batches = if zoo {
        match field(&e.batches, &own("batches"), clone_top(&tops.batches)) {
            Some(f) => sizes(cx, &f, MAX_BATCH)?,
            None => return Err(missing("batches")),
        }
    } else {
        unused(
            e.batches.as_ref(),
            "batches",
            "random-dag takes its instances from `random_dag`",
        )?;
        Vec::new()
    };
    let hiddens = match field(&e.hiddens, &own("hiddens"), clone_top(&tops.hiddens)) {
        Some(f) if zoo => {
            let v = sizes(cx, &f, MAX_HIDDEN)?;
            check_hiddens(cx, &f, &workloads)?;
            v
        }
        // The default hidden size is checked with the grid's.
        None if zoo => vec![64],
        _ => {
            unused(
                e.hiddens.as_ref(),
                "hiddens",
                "random-dag has no hidden size",
            )?;
            Vec::new()
        }
    };
    let seeds = match field(&e.seeds, &own("seeds"), clone_top(&tops.seeds)) {
        Some(f) => cx.list(f.list, &f.path, |_| Ok(()))?,
        None => vec![1],
    };
    let data = match field(&e.data, &own("data"), clone_top(&tops.data)) {
        Some(f) if zoo => cx.list(f.list, &f.path, |v| check_data(v))?,
        None if zoo => vec!["default".into()],
        _ => {
            if let Some(l) = &e.data {
                let msg = "not used: random-dag records no data".to_string();
                return Err(cx.at(l.referenced, &own("data"), msg));
            }
            Vec::new()
        }
    };
    let nodes = if dag {
        match field(&e.nodes, &own("nodes"), clone_top(&tops.nodes)) {
            Some(f) => {
                let v = sizes(cx, &f, MAX_NODES)?;
                for (j, n) in v.iter().enumerate() {
                    if *n < shape.instances {
                        let msg = format!(
                            "{n} nodes cannot be split into random_dag.instances = {}",
                            shape.instances
                        );
                        return Err(cx.at(
                            f.list.value[j].referenced,
                            &format!("{}[{j}]", f.path),
                            msg,
                        ));
                    }
                }
                v
            }
            None => return Err(missing("nodes")),
        }
    } else {
        unused(
            e.nodes.as_ref(),
            "nodes",
            "only random-dag has a node count",
        )?;
        Vec::new()
    };
    let max_nodes = match e.max_nodes.as_ref().or(tops.max_nodes) {
        Some(m) => Some(cx.range(m, &own("max_nodes"), 1, MAX_NODES)?),
        None => None,
    };
    Ok(TraceSet {
        workloads,
        batches,
        hiddens,
        seeds,
        data,
        nodes,
        max_nodes,
    })
}

/// Every cell of `workloads` takes every hidden size of `f`.
fn check_hiddens(cx: &Cx, f: &Field<u64>, workloads: &[String]) -> Result<(), SpecError> {
    let cells: Vec<&str> = (workloads.iter())
        .filter_map(|w| engine::workloads::workload(w))
        .flat_map(|w| w.roles.iter().map(|r| r.cell))
        .collect();
    for (j, h) in f.list.value.iter().enumerate() {
        for cell in &cells {
            if let Err(e) = cx.cells.instantiate(cell, h.value as usize) {
                let msg = format!("hidden {} does not fit cell {cell}: {e}", h.value);
                return Err(cx.at(h.referenced, &format!("{}[{j}]", f.path), msg));
            }
        }
    }
    Ok(())
}

/// The traces of a set, named for messages (and compared for duplicates).
pub(crate) fn points(s: &TraceSet) -> Vec<String> {
    let mut out = Vec::new();
    for w in &s.workloads {
        if w == RANDOM_DAG {
            for n in &s.nodes {
                for seed in &s.seeds {
                    out.push(format!("{w} n{n} s{seed}"));
                }
            }
            continue;
        }
        for b in &s.batches {
            for h in &s.hiddens {
                for d in &s.data {
                    for seed in &s.seeds {
                        out.push(format!("{w} b{b} h{h} {d} s{seed}"));
                    }
                }
            }
        }
    }
    out
}

/// The `random_dag` block, defaults filled in.
pub(super) fn dag_shape(cx: &Cx, r: &RawSpec) -> Result<DagShape, SpecError> {
    let mut s = DagShape::default();
    let Some(d) = r.random_dag.as_ref().map(|d| &d.value) else {
        return Ok(s);
    };
    let get = |v: &Option<Spanned<u64>>, name: &str, hi: u64, dflt: usize| match v {
        Some(v) => cx.range(v, &format!("random_dag.{name}"), 1, hi),
        None => Ok(dflt),
    };
    // The generator's own limits (`search random-dag`'s ranges).
    s.types = get(&d.types, "types", 1000, s.types)?;
    s.window = get(&d.window, "window", 1_000_000, s.window)?;
    s.max_args = get(&d.max_args, "max_args", 64, s.max_args)?;
    s.instances = get(&d.instances, "instances", MAX_NODES, s.instances)?;
    Ok(s)
}
