//! The whole-folder check of [`ModelDir::open`](super::ModelDir::open), after
//! each file parsed on its own: the roles against each other (every feeder's
//! cell can feed the port that lists it; a loss is one scalar nothing reads),
//! the trace against the manifest (its counts, each type's batchability,
//! each node's instance and arguments) and the weights against the cells
//! (every parameter present at its shape). A folder that passes runs in
//! every tool; one that does not is refused by every tool with the same
//! message, naming the file and the field, before any of them computes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use super::{MANIFEST, Manifest, ModelDirError, Tensors};
use crate::cells::Cell;
use crate::trace::Trace;
use crate::workloads::{Workload, bind_ports, check_feeders};

/// Each role's cell, instantiated once per cell name.
pub(super) type Cells<'a> = BTreeMap<&'a str, Cell>;

/// The roles against each other: losses, and bindings ([`check_feeders`]).
pub(super) fn roles(manifest: &Manifest, mfile: &str, cells: &Cells) -> Result<(), ModelDirError> {
    let field = |field: String, message: String| ModelDirError::Field {
        file: mfile.to_string(),
        field,
        message,
    };
    let losses: HashSet<&str> = manifest
        .roles
        .iter()
        .filter(|r| r.loss)
        .map(|r| r.role.as_str())
        .collect();
    for (i, r) in manifest.roles.iter().enumerate() {
        let cell = &cells[r.cell.as_str()];
        if r.loss {
            let scalar = cell.outputs.len() == 1 && cell.value(cell.outputs[0]).numel() == 1;
            if !scalar {
                let shapes: Vec<String> = cell
                    .output_shapes()
                    .iter()
                    .map(|s| format!("{s:?}"))
                    .collect();
                return Err(field(
                    format!("roles[{i}].loss"),
                    format!(
                        "role `{}` is a loss, but its cell `{}` gives {} output(s) of shape {}: a loss is one scalar (the training loss sums them)",
                        r.role,
                        r.cell,
                        cell.outputs.len(),
                        shapes.join(", ")
                    ),
                ));
            }
        }
        for (p, feeders) in r.ports.iter().enumerate() {
            for f in feeders {
                if losses.contains(f.as_str()) {
                    return Err(field(
                        format!("roles[{i}].ports[{p}]"),
                        format!(
                            "role `{}` reads loss role `{f}`: a loss is a scalar nothing reads; read, it would count twice in the training loss (on its own and through `{}`)",
                            r.role, r.role
                        ),
                    ));
                }
            }
        }
    }
    let table: Vec<(&str, &[Vec<String>], &Cell)> = manifest
        .roles
        .iter()
        .map(|r| (r.role.as_str(), r.ports.as_slice(), &cells[r.cell.as_str()]))
        .collect();
    check_feeders(&table).map_err(|m| {
        let (r, f) = (&manifest.roles[m.role], &manifest.roles[m.feeder]);
        field(
            format!("roles[{}].ports[{}]", m.role, m.port),
            format!(
                "role `{}` feeds it, but {} (cells/{}.yaml against cells/{}.yaml)",
                f.role, m.source, r.cell, f.cell
            ),
        )
    })
}

/// The trace against the manifest and the roles.
pub(super) fn trace(
    manifest: &Manifest,
    mfile: &str,
    tfile: &str,
    trace: &Trace,
    workload: &Workload,
    cells: &Cells,
) -> Result<(), ModelDirError> {
    let g = &trace.graph;
    let mismatch = |message: String| ModelDirError::Mismatch {
        file: tfile.to_string(),
        message,
    };
    if manifest.nodes != g.len() as u64 {
        return Err(ModelDirError::Field {
            file: mfile.to_string(),
            field: "nodes".into(),
            message: format!("says {} nodes, but {tfile} has {}", manifest.nodes, g.len()),
        });
    }
    if let Some(b) = trace.meta.batch_size
        && u64::from(b) != manifest.instances
    {
        return Err(mismatch(format!(
            "field `meta.batch_size`: {b}, but {MANIFEST} field `instances` says {} samples",
            manifest.instances
        )));
    }
    let role_of_type: HashMap<&str, usize> = manifest
        .roles
        .iter()
        .enumerate()
        .map(|(i, r)| (r.type_name.as_str(), i))
        .collect();
    // `open` has checked that every type is a role's.
    let type_role: Vec<usize> = g
        .types()
        .iter()
        .map(|(_, ty)| role_of_type.get(ty.name.as_str()).copied().unwrap_or(0))
        .collect();
    for ((_, ty), &i) in g.types().iter().zip(&type_role) {
        let r = &manifest.roles[i];
        if ty.batchable != r.batchable {
            return Err(ModelDirError::Field {
                file: mfile.to_string(),
                field: format!("roles[{i}].batchable"),
                message: format!(
                    "{}, but {tfile} says type `{}` is {}batchable",
                    r.batchable,
                    ty.name,
                    if ty.batchable { "" } else { "not " }
                ),
            });
        }
    }
    for v in g.nodes() {
        if let Some(k) = g.instance(v)
            && u64::from(k) >= manifest.instances
        {
            return Err(mismatch(format!(
                "node {}: field `instance`: {k} is out of range: {MANIFEST} says {} samples (instances 0..{})",
                v.0, manifest.instances, manifest.instances
            )));
        }
        let role = &workload.roles[type_role[g.node_type(v).index()]];
        let arg_roles: Vec<&str> = g
            .args(v)
            .iter()
            .map(|a| {
                workload.roles[type_role[g.node_type(*a).index()]]
                    .role
                    .as_str()
            })
            .collect();
        bind_ports(role, &cells[role.cell.as_str()], &arg_roles).map_err(|e| {
            let args: Vec<String> = g
                .args(v)
                .iter()
                .zip(&arg_roles)
                .map(|(a, r)| format!("node {} of role `{r}`", a.0))
                .collect();
            mismatch(format!(
                "node {} (type `{}`): field `args`: {e} (its arguments: {}; the ports' roles are in {MANIFEST})",
                v.0,
                g.types().name(g.node_type(v)),
                if args.is_empty() { "none".to_string() } else { args.join(", ") }
            ))
        })?;
    }
    Ok(())
}

/// The weights against the cells: every parameter of every role's cell, at
/// its shape. Returns the weights, read once.
pub(super) fn weights(path: &Path, cells: &Cells) -> Result<Tensors, ModelDirError> {
    let weights = Tensors::read(path)?;
    for (name, cell) in cells {
        for &p in &cell.params {
            let v = cell.value(p);
            weights.require(
                &v.name,
                &v.shape,
                &format!(
                    "parameter `{}` of cell `{name}` (cells/{name}.yaml)",
                    v.name
                ),
            )?;
        }
    }
    Ok(weights)
}
