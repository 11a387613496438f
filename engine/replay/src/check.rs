//! A float64 oracle for gradients: the trace's loss computed node by node in
//! f64 with plain loops (no batching, no packing, nothing shared with the
//! executors but the cell definitions and the port binding), so central
//! finite differences of it are exact to ~1e-9 and can judge the f32
//! gradients of every executor ([`finite_difference`]).

use crate::cells::{Cell, PrimOp, ValueKind};
use crate::graph::NodeId;
use crate::model::Model;
use crate::trace::Trace;

/// Parameters in f64, per role and value id (the shape of
/// [`crate::model::RoleModel::params`]).
pub type Params64 = Vec<Vec<Vec<f64>>>;

/// The model's parameters widened to f64.
pub fn params64(model: &Model) -> Params64 {
    model
        .roles
        .iter()
        .map(|r| {
            r.params
                .iter()
                .map(|p| p.iter().map(|&x| f64::from(x)).collect())
                .collect()
        })
        .collect()
}

/// Node `v`'s cell values in f64 before its ops run: each parameter as
/// `param(i)` gives it, each input the sum of its producers' outputs (which
/// `add(u, producer's role, output, into)` adds in), the rest zeros. One
/// definition of "a cell's inputs" for the oracle and the checks that
/// recompute a node from other sources.
pub(crate) fn cell_inputs(
    model: &Model,
    g: &crate::graph::Graph,
    v: NodeId,
    mut param: impl FnMut(usize) -> Vec<f64>,
    mut add: impl FnMut(NodeId, usize, usize, &mut [f64]),
) -> Vec<Vec<f64>> {
    let cell = &model.roles[model.type_role[g.node_type(v).index()]].cell;
    let mut vals: Vec<Vec<f64>> = cell
        .values
        .iter()
        .enumerate()
        .map(|(i, info)| match info.kind {
            ValueKind::Param => param(i),
            _ => vec![0.0; info.numel()],
        })
        .collect();
    for (p, port) in cell.ports.iter().enumerate() {
        for &u in model.bindings.port(v, p) {
            let ur = model.type_role[g.node_type(u).index()];
            for (j, input) in port.inputs.iter().enumerate() {
                add(u, ur, j, &mut vals[input.index()]);
            }
        }
    }
    vals
}

/// The loss (sum of the loss-sum nodes' outputs) of `trace` under `params`.
pub fn loss_f64(trace: &Trace, model: &Model, params: &Params64) -> f64 {
    let g = &trace.graph;
    let mut outs: Vec<Vec<Vec<f64>>> = vec![Vec::new(); g.len()];
    let mut loss = 0.0;
    for &v in g.topo_order() {
        let role = model.type_role[g.node_type(v).index()];
        let rm = &model.roles[role];
        let cell = &rm.cell;
        let mut vals = cell_inputs(
            model,
            g,
            v,
            |i| params[role][i].clone(),
            |u, _, j, into| {
                for (d, s) in into.iter_mut().zip(&outs[u.index()][j]) {
                    *d += s;
                }
            },
        );
        let data = model.node_data(v);
        for op in &cell.ops {
            let y = eval(cell, op, &vals, data);
            vals[op.out.index()] = y;
        }
        outs[v.index()] = cell
            .outputs
            .iter()
            .map(|o| vals[o.index()].clone())
            .collect();
        if rm.role.loss {
            loss += outs[v.index()].iter().flatten().sum::<f64>();
        }
    }
    loss
}

/// Value `value` of node `v`'s cell, computed in f64 from its producers'
/// outputs in `store` (e.g. the logits behind a loss, for predictions).
pub fn cell_value(
    trace: &Trace,
    model: &Model,
    store: &crate::store::Store,
    v: NodeId,
    value: usize,
) -> Vec<f64> {
    let g = &trace.graph;
    let role = model.type_role[g.node_type(v).index()];
    let rm = &model.roles[role];
    let cell = &rm.cell;
    let mut vals = cell_inputs(
        model,
        g,
        v,
        |i| rm.params[i].iter().map(|&x| f64::from(x)).collect(),
        |u, ur, j, into| {
            for (d, &s) in into.iter_mut().zip(store.output(u, ur, j)) {
                *d += f64::from(s);
            }
        },
    );
    let data = model.node_data(v);
    for op in &cell.ops {
        vals[op.out.index()] = eval(cell, op, &vals, data);
        if op.out.index() == value {
            break;
        }
    }
    std::mem::take(&mut vals[value])
}

/// `y = a·b` for `a` `[m, n]` and `b` `[n, p]`, row major.
fn matmul(m: usize, n: usize, p: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; m * p];
    for i in 0..m {
        for k in 0..n {
            let a = a[i * n + k];
            for j in 0..p {
                y[i * p + j] += a * b[k * p + j];
            }
        }
    }
    y
}

pub(crate) fn eval(
    cell: &Cell,
    op: &crate::cells::Op,
    vals: &[Vec<f64>],
    data: (u32, u32),
) -> Vec<f64> {
    let arg = |i: usize| &vals[op.args[i].index()];
    let shape = |i: usize| &cell.values[op.args[i].index()].shape;
    let map = |f: &dyn Fn(f64) -> f64| arg(0).iter().map(|&x| f(x)).collect::<Vec<f64>>();
    let zip = |f: &dyn Fn(f64, f64) -> f64| {
        arg(0)
            .iter()
            .zip(arg(1))
            .map(|(&a, &b)| f(a, b))
            .collect::<Vec<f64>>()
    };
    let product = |wi: usize, xi: usize| {
        let s = shape(wi);
        let (m, n) = (s[0], s.get(1).copied().unwrap_or(1));
        let p = arg(xi).len() / n.max(1);
        matmul(m, n, p, arg(wi), arg(xi))
    };
    match op.kind {
        PrimOp::Affine => {
            let mut y = arg(0).clone();
            for i in (1..op.args.len()).step_by(2) {
                for (d, s) in y.iter_mut().zip(product(i, i + 1)) {
                    *d += s;
                }
            }
            y
        }
        PrimOp::Matmul => product(0, 1),
        PrimOp::Add => zip(&|a, b| a + b),
        PrimOp::Sub => zip(&|a, b| a - b),
        PrimOp::Mul => zip(&|a, b| a * b),
        PrimOp::Sum | PrimOp::Mean => {
            let mut y = vec![0.0; arg(0).len()];
            for i in 0..op.args.len() {
                for (d, s) in y.iter_mut().zip(arg(i)) {
                    *d += s;
                }
            }
            if op.kind == PrimOp::Mean {
                let n = op.args.len() as f64;
                y.iter_mut().for_each(|v| *v /= n);
            }
            y
        }
        PrimOp::Sigmoid => map(&|x| 1.0 / (1.0 + (-x).exp())),
        PrimOp::Tanh => map(&|x| x.tanh()),
        PrimOp::Relu => map(&|x| x.max(0.0)),
        PrimOp::Gelu => map(&|x| 0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2))),
        PrimOp::Scale => {
            let c = f64::from(op.factor.unwrap_or(1.0));
            map(&|x| c * x)
        }
        PrimOp::Exp => map(&|x| x.exp()),
        PrimOp::OneMinus => map(&|x| 1.0 - x),
        PrimOp::Concat => (0..op.args.len()).flat_map(|i| arg(i).clone()).collect(),
        PrimOp::Slice => {
            let inner: usize = shape(0)[1..].iter().product();
            let (start, len) = op.slice.unwrap_or((0, 0));
            arg(0)[start * inner..(start + len) * inner].to_vec()
        }
        PrimOp::Lookup => {
            let rows = shape(0)[0].max(1);
            let n = cell.values[op.out.index()].numel();
            let r = data.0 as usize % rows;
            arg(0)[r * n..(r + 1) * n].to_vec()
        }
        PrimOp::LayerNorm => {
            let x = arg(0);
            let n = x.len().max(1) as f64;
            let mean = x.iter().sum::<f64>() / n;
            let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            let inv = 1.0 / (var + f64::from(crate::cells::LAYER_NORM_EPS)).sqrt();
            x.iter().map(|v| (v - mean) * inv).collect()
        }
        PrimOp::Softmax => {
            let w = shape(0)[0].max(1);
            arg(0)
                .chunks(w)
                .flat_map(|c| {
                    let max = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = c.iter().map(|x| (x - max).exp()).collect();
                    let s: f64 = e.iter().sum();
                    e.into_iter().map(move |x| x / s)
                })
                .collect()
        }
        PrimOp::PickLoss => {
            let w = shape(0)[0].max(1);
            arg(0)
                .chunks(w)
                .map(|c| {
                    let max = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let s: f64 = c.iter().map(|x| (x - max).exp()).sum();
                    s.ln() + max - c[data.1 as usize % w]
                })
                .collect()
        }
    }
}

/// Central finite differences of [`loss_f64`] at up to `per_tensor`
/// elements of every parameter tensor (the first ones, then evenly spaced;
/// for lookup tables the rows the trace reads), step `eps`: per role and
/// value id, `(element, derivative)` pairs.
pub fn finite_difference(
    trace: &Trace,
    model: &Model,
    per_tensor: usize,
    eps: f64,
) -> Vec<Vec<Vec<(usize, f64)>>> {
    let mut params = params64(model);
    let g = &trace.graph;
    let mut out = Vec::new();
    for role in 0..model.roles.len() {
        let cell = &model.roles[role].cell;
        let mut per_value = Vec::new();
        for v in 0..cell.values.len() {
            let len = params[role][v].len();
            if len == 0 {
                per_value.push(Vec::new());
                continue;
            }
            let table = cell
                .ops
                .iter()
                .any(|op| op.kind == PrimOp::Lookup && op.args[0].index() == v);
            let mut elems: Vec<usize> = if table {
                // Rows the trace's lookups of this role read.
                let rows = cell.values[v].shape[0].max(1);
                let n = len / rows;
                let mut e: Vec<usize> = g
                    .nodes()
                    .filter(|&u| model.type_role[g.node_type(u).index()] == role)
                    .map(|u| (model.node_data(u).0 as usize % rows) * n)
                    .collect();
                e.sort_unstable();
                e.dedup();
                e.truncate(per_tensor);
                e
            } else {
                let step = (len / per_tensor.max(1)).max(1);
                (0..len).step_by(step).take(per_tensor).collect()
            };
            elems.dedup();
            let mut d = Vec::with_capacity(elems.len());
            for e in elems {
                let x = params[role][v][e];
                params[role][v][e] = x + eps;
                let up = loss_f64(trace, model, &params);
                params[role][v][e] = x - eps;
                let down = loss_f64(trace, model, &params);
                params[role][v][e] = x;
                d.push((e, (up - down) / (2.0 * eps)));
            }
            per_value.push(d);
        }
        out.push(per_value);
    }
    out
}

/// `erf(z)` in f64 by its Maclaurin series (the reference's own, not the
/// executors' approximation): |z| < 4 takes at most 90 terms; beyond, erf
/// is ±1 to within 2e-8.
fn erf(z: f64) -> f64 {
    if z.abs() >= 4.0 {
        return z.signum();
    }
    let (mut term, mut sum) = (z, z);
    for n in 1..90 {
        term *= -z * z / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}
