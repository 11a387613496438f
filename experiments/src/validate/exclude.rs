//! `exclude` entries: every value must be a point of the full grid's axis
//! (so a typo cannot silently exclude nothing), every entry must name a field.

use serde::Serialize;
use serde_json::Value;
use serde_saphyr::Location;

use super::Cx;
use crate::config::{Exclude, Grid};
use crate::error::SpecError;
use crate::spec::{List, RawExclude, RawSpec};

/// A list as (value, location) pairs.
fn items<T: Serialize>(l: &Option<List<T>>) -> Option<(Location, Vec<(Value, Location)>)> {
    let l = l.as_ref()?;
    let v = (l.value.iter())
        .map(|s| {
            (
                serde_json::to_value(&s.value).unwrap_or(Value::Null),
                s.referenced,
            )
        })
        .collect();
    Some((l.referenced, v))
}

fn axis<T: Serialize>(v: &[T]) -> Vec<Value> {
    v.iter()
        .filter_map(|x| serde_json::to_value(x).ok())
        .collect()
}

/// (field, config key, list, the full grid's axis) of an entry.
type Field = (
    &'static str,
    &'static str,
    Option<(Location, Vec<(Value, Location)>)>,
    Vec<Value>,
);

fn fields(e: &RawExclude, g: &Grid) -> Vec<Field> {
    vec![
        (
            "workloads",
            "workload",
            items(&e.workloads),
            axis(&g.workloads),
        ),
        ("batches", "batch", items(&e.batches), axis(&g.batches)),
        ("hiddens", "hidden", items(&e.hiddens), axis(&g.hiddens)),
        ("seeds", "seed", items(&e.seeds), axis(&g.seeds)),
        ("cells", "cell", items(&e.cells), axis(&g.cells)),
        (
            "fixed_inputs",
            "fixed_inputs",
            items(&e.fixed_inputs),
            axis(&g.fixed_inputs),
        ),
        ("policies", "policy", items(&e.policies), axis(&g.policies)),
        (
            "encodings",
            "encoding",
            items(&e.encodings),
            axis(&g.encodings),
        ),
        (
            "executors",
            "executor",
            items(&e.executors),
            axis(&g.executors),
        ),
        ("devices", "device", items(&e.devices), axis(&g.devices)),
    ]
}

pub(super) fn excludes(cx: &Cx, r: &RawSpec, full: &Grid) -> Result<Vec<Exclude>, SpecError> {
    let Some(list) = &r.exclude else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (i, entry) in list.value.iter().enumerate() {
        let mut ex = Exclude { fields: Vec::new() };
        for (field, key, values, axis) in fields(&entry.value, full) {
            let Some((at, values)) = values else {
                continue;
            };
            let path = format!("exclude[{i}].{field}");
            if values.is_empty() {
                return Err(cx.at(at, &path, "must not be empty".into()));
            }
            for (j, (v, loc)) in values.iter().enumerate() {
                if !axis.contains(v) {
                    let msg = format!("{v} is not in the grid's {field}, so it excludes nothing");
                    return Err(cx.at(*loc, &format!("{path}[{j}]"), msg));
                }
            }
            ex.fields.push((
                key.to_string(),
                values.into_iter().map(|(v, _)| v).collect(),
            ));
        }
        if ex.fields.is_empty() {
            let msg = "names no field (it would exclude every run)".to_string();
            return Err(cx.at(entry.referenced, &format!("exclude[{i}]"), msg));
        }
        out.push(ex);
    }
    Ok(out)
}
