//! A replay judged by the numbers the recording framework computed: a model
//! folder's `expected.safetensors` (written by `batchlab_torch`) holds
//! PyTorch's own outputs of every node (`out/<role>/<j>`: one row per node
//! of the role, in node order), the loss (`loss`), the gradient of every
//! parameter (`grad/<name>`), and one recorded call per role value by value
//! (`probe/<role>/<value>`, the call's node in the metadata `probe/<role>`).
//!
//! [`check_outputs`] compares a run's node outputs and loss with them; where
//! a node differs it says why, in this order: the node's cell recomputed in
//! f64 from PyTorch's own inputs (a match means the executor is wrong, not
//! the cell), then the role's probe op by op (the first op whose value
//! differs names the lowering that is wrong), else the node's inputs or
//! data differ.

use serde::Serialize;

use crate::cells::ValueKind;
use crate::check::{cell_inputs, eval};
use crate::compare::rel_error;
use crate::error::ReplayError;
use crate::graph::NodeId;
use crate::model::Model;
use crate::modeldir::Tensors;
use crate::store::Store;
use crate::trace::Trace;

/// The tolerance of `engine replay --check`: relative, normwise per tensor.
pub const TOLERANCE: f64 = 1e-4;

/// Where a run differs from the expected numbers.
#[derive(Clone, Debug, Serialize)]
pub struct Difference {
    /// The node (trace id).
    pub node: u32,
    /// Its role and cell.
    pub role: String,
    /// Its cell.
    pub cell: String,
    /// Its sample, if it has one.
    pub instance: Option<u32>,
    /// The cell output that differs.
    pub output: usize,
    /// Its relative difference ([`rel_error`]).
    pub rel_error: f64,
    /// Why, as far as the expected numbers tell (see the module docs).
    pub diagnosis: String,
}

/// A run against the expected numbers.
#[derive(Clone, Debug, Serialize)]
pub struct ExpectedCheck {
    /// Largest [`rel_error`] of a node output.
    pub max_rel_error: f64,
    /// The run's loss (sum of the loss roles' outputs, in f64), if the
    /// model has a loss.
    pub loss: Option<f64>,
    /// The expected loss.
    pub expected_loss: Option<f64>,
    /// |loss − expected| / |expected|.
    pub loss_rel_error: Option<f64>,
    /// The first node (in topological order) over the tolerance, else the
    /// node that differs most.
    pub worst: Option<Difference>,
    /// Every output and the loss within [`TOLERANCE`].
    pub passed: bool,
}

fn nodes_per_role(trace: &Trace, model: &Model) -> (Vec<usize>, Vec<usize>) {
    let g = &trace.graph;
    let mut count = vec![0usize; model.roles.len()];
    let mut row = vec![0usize; g.len()];
    for v in g.nodes() {
        let r = model.type_role[g.node_type(v).index()];
        row[v.index()] = count[r];
        count[r] += 1;
    }
    (count, row)
}

/// The expected rows of output `j` of role `r` (`[count, *shape]`).
fn expected_rows<'a>(
    expected: &'a Tensors,
    model: &Model,
    r: usize,
    j: usize,
    count: usize,
) -> Result<&'a [f32], ReplayError> {
    let rm = &model.roles[r];
    let out = rm.cell.outputs[j];
    let mut shape = vec![count];
    shape.extend(&rm.cell.values[out.index()].shape);
    let why = format!("output {j} of the {count} nodes of role {}", rm.role.role);
    Ok(&expected
        .require(&format!("out/{}/{j}", rm.role.role), &shape, &why)?
        .data)
}

/// Compares the node outputs and loss in `store` with `expected`.
pub fn check_outputs(
    trace: &Trace,
    model: &Model,
    store: &Store,
    expected: &Tensors,
) -> Result<ExpectedCheck, ReplayError> {
    let g = &trace.graph;
    let (count, row) = nodes_per_role(trace, model);
    let mut tables: Vec<Vec<&[f32]>> = Vec::with_capacity(model.roles.len());
    for (r, rm) in model.roles.iter().enumerate() {
        let mut per_out = Vec::new();
        if count[r] > 0 {
            for j in 0..rm.cell.outputs.len() {
                per_out.push(expected_rows(expected, model, r, j, count[r])?);
            }
        }
        tables.push(per_out);
    }
    let mut max = 0.0f64;
    let mut first: Option<(NodeId, usize, f64)> = None;
    let mut most: Option<(NodeId, usize, f64)> = None;
    let mut loss = 0.0f64;
    let mut has_loss = false;
    for &v in g.topo_order() {
        let r = model.type_role[g.node_type(v).index()];
        let rm = &model.roles[r];
        for (j, table) in tables[r].iter().enumerate() {
            let n = store.output(v, r, j).len();
            let want = &table[row[v.index()] * n..(row[v.index()] + 1) * n];
            let e = rel_error(store.output(v, r, j), want);
            if e > max {
                max = e;
                most = Some((v, j, e));
            }
            if e > TOLERANCE && first.is_none() {
                first = Some((v, j, e));
            }
        }
        if rm.role.loss {
            has_loss = true;
            loss += store
                .output(v, r, 0)
                .iter()
                .map(|&x| f64::from(x))
                .sum::<f64>();
        }
    }
    let loss = has_loss.then_some(loss);
    // A model with a loss is checked on it: a recording without one is
    // incomplete, not a pass.
    let expected_loss = match loss {
        None => None,
        Some(_) => Some(f64::from(
            expected
                .require("loss", &[1], "the loss the recording computed")?
                .data[0],
        )),
    };
    let loss_rel_error = match (loss, expected_loss) {
        (Some(a), Some(b)) if a.is_finite() && b.is_finite() => {
            Some((a - b).abs() / b.abs().max(1e-12))
        }
        (Some(_), Some(_)) => Some(f64::INFINITY),
        _ => None,
    };
    let worst = first.or(most).map(|(v, j, e)| {
        let r = model.type_role[g.node_type(v).index()];
        let rm = &model.roles[r];
        Difference {
            node: v.0,
            role: rm.role.role.clone(),
            cell: rm.cell.name.clone(),
            instance: g.instance(v),
            output: j,
            rel_error: e,
            diagnosis: if e > TOLERANCE {
                diagnose(trace, model, expected, &tables, &row, v, j)
            } else {
                String::new()
            },
        }
    });
    let passed = max <= TOLERANCE && loss_rel_error.is_none_or(|e| e <= TOLERANCE);
    Ok(ExpectedCheck {
        max_rel_error: max,
        loss,
        expected_loss,
        loss_rel_error,
        worst,
        passed,
    })
}

/// Why node `v`'s output `j` differs (see the module docs).
fn diagnose(
    trace: &Trace,
    model: &Model,
    expected: &Tensors,
    tables: &[Vec<&[f32]>],
    row: &[usize],
    v: NodeId,
    j: usize,
) -> String {
    let g = &trace.graph;
    let r = model.type_role[g.node_type(v).index()];
    let rm = &model.roles[r];
    let cell = &rm.cell;
    // The cell in f64, fed the expected outputs of its producers.
    let mut vals = cell_inputs(
        model,
        g,
        v,
        |i| rm.params[i].iter().map(|&x| f64::from(x)).collect(),
        |u, ur, k, into| {
            let n = into.len();
            let src = &tables[ur][k][row[u.index()] * n..(row[u.index()] + 1) * n];
            for (d, &s) in into.iter_mut().zip(src) {
                *d += f64::from(s);
            }
        },
    );
    let data = model.node_data(v);
    for op in &cell.ops {
        vals[op.out.index()] = eval(cell, op, &vals, data);
    }
    let out = &vals[cell.outputs[j].index()];
    let n = out.len();
    let want = &tables[r][j][row[v.index()] * n..(row[v.index()] + 1) * n];
    let mine: Vec<f32> = out.iter().map(|&x| x as f32).collect();
    if rel_error(&mine, want) <= TOLERANCE {
        return "its cell, recomputed from PyTorch's own inputs, gives PyTorch's output: the executor computes this node wrongly".into();
    }
    match probe(model, expected, r) {
        Some(ProbeResult::Differs { op, value, rel_error }) => format!(
            "cell op `{value}` ({op}) differs from PyTorch's value on the role's recorded call by {rel_error:.2e}: the lowering of that op is wrong"
        ),
        Some(ProbeResult::Agrees) => "its cell agrees with PyTorch op by op on the role's recorded call; on this node its inputs or its data (token id, label) differ".into(),
        None => "the folder has no recorded call of this role to compare op by op".into(),
    }
}

/// The role's cell run in f64 on its recorded call (`probe/<role>/...`).
#[derive(Clone, Debug, PartialEq)]
pub enum ProbeResult {
    /// Every value the probe holds agrees.
    Agrees,
    /// The first op whose value does not.
    Differs {
        /// The op kind.
        op: String,
        /// The value it computes.
        value: String,
        /// Its relative difference.
        rel_error: f64,
    },
}

/// Runs role `r`'s cell on its probe; `None` when the folder has none.
pub fn probe(model: &Model, expected: &Tensors, r: usize) -> Option<ProbeResult> {
    let rm = &model.roles[r];
    let cell = &rm.cell;
    let key = |name: &str| format!("probe/{}/{name}", rm.role.role);
    let node: u32 = expected
        .metadata
        .get(&format!("probe/{}", rm.role.role))?
        .parse()
        .ok()?;
    let data = model.node_data(NodeId(node));
    let mut vals: Vec<Vec<f64>> = Vec::with_capacity(cell.values.len());
    for (i, info) in cell.values.iter().enumerate() {
        vals.push(match info.kind {
            ValueKind::Param => rm.params[i].iter().map(|&x| f64::from(x)).collect(),
            ValueKind::Input { .. } => match expected.get(&key(&info.name)) {
                Some(t) if t.data.len() == info.numel() => {
                    t.data.iter().map(|&x| f64::from(x)).collect()
                }
                _ => return None,
            },
            _ => vec![0.0; info.numel()],
        });
    }
    for op in &cell.ops {
        let y = eval(cell, op, &vals, data);
        let name = &cell.values[op.out.index()].name;
        if let Some(t) = expected.get(&key(name))
            && t.data.len() == y.len()
        {
            let mine: Vec<f32> = y.iter().map(|&x| x as f32).collect();
            let e = rel_error(&mine, &t.data);
            if e > TOLERANCE {
                return Some(ProbeResult::Differs {
                    op: op.kind.name().to_string(),
                    value: name.clone(),
                    rel_error: e,
                });
            }
            // Continue from PyTorch's value, so one op's error is not
            // blamed on the next.
            vals[op.out.index()] = t.data.iter().map(|&x| f64::from(x)).collect();
        } else {
            vals[op.out.index()] = y;
        }
    }
    Some(ProbeResult::Agrees)
}

/// Every parameter's gradient against `grad/<name>` (a parameter shared by
/// several roles: the sum of theirs): the largest [`rel_error`] and the
/// parameter it is in (`None` for a model without parameters). A missing
/// gradient is an error naming it.
pub fn check_gradients(
    model: &Model,
    grads: &[Vec<Vec<f32>>],
    expected: &Tensors,
) -> Result<Option<(f64, String)>, ReplayError> {
    let mut by_name: std::collections::BTreeMap<&str, Vec<f32>> = std::collections::BTreeMap::new();
    for (r, rm) in model.roles.iter().enumerate() {
        for (vi, info) in rm.cell.values.iter().enumerate() {
            if !matches!(info.kind, ValueKind::Param) {
                continue;
            }
            let g = &grads[r][vi];
            let acc = by_name
                .entry(&info.name)
                .or_insert_with(|| vec![0.0; g.len()]);
            for (a, b) in acc.iter_mut().zip(g) {
                *a += b;
            }
        }
    }
    if by_name.is_empty() {
        return Ok(None);
    }
    let mut worst = (0.0, String::new());
    for (name, got) in by_name {
        let want = expected.get(&format!("grad/{name}")).ok_or_else(|| {
            crate::modeldir::TensorsError::Missing {
                file: expected.file.clone(),
                tensor: format!("grad/{name}"),
                why: "the gradient of a parameter the model reads".into(),
            }
        })?;
        let e = rel_error(&got, &want.data);
        if e > worst.0 || worst.1.is_empty() {
            worst = (e, name.to_string());
        }
    }
    Ok(Some(worst))
}
