//! Runs one cell over `k` rows at once (k = 1: one node, the reference; k > 1:
//! a batch of same-role nodes, Cavs style). Every op is one kernel over all k
//! rows: a parameter shared by the rows becomes one GEMM with the rows as the
//! batch dimension; per-row matrices (MV-RNN) loop per row.

use super::kernels::{self, Binary, Unary};
use super::model::RoleModel;
use crate::cells::{Cell, Op, PrimOp, ValueKind};

/// Per-value buffers of a cell run, reused across runs.
#[derive(Default)]
pub struct Scratch {
    /// Data of every value id: `k × numel` floats (params are not copied here).
    pub vals: Vec<Vec<f32>>,
}

impl Scratch {
    /// Makes room for the cell's values, resizing input buffers to `k` rows of
    /// zeros (callers then add their producers' data in).
    pub fn prepare_inputs(&mut self, rm: &RoleModel, k: usize) {
        let cell = &rm.cell;
        self.vals.resize_with(cell.values.len(), Vec::new);
        for port in &cell.ports {
            for &v in &port.inputs {
                let buf = &mut self.vals[v.0 as usize];
                buf.clear();
                buf.resize(k * cell.values[v.0 as usize].numel(), 0.0);
            }
        }
    }
}

/// Row `r` of per-instance value data.
fn row(data: &[f32], numel: usize, r: usize) -> &[f32] {
    &data[r * numel..(r + 1) * numel]
}

/// One operand of an op: its data and whether it holds one row per instance
/// (a parameter is shared by all rows).
#[derive(Clone, Copy)]
pub struct Operand<'a> {
    /// `k × numel` floats, or `numel` for a shared operand.
    pub data: &'a [f32],
    /// One row per instance?
    pub per_row: bool,
}

/// Runs every op of the cell over `k` rows whose inputs are already in
/// `scratch`; `data[r]` = (lookup row, label) of row r. Returns kernels launched.
pub fn run_cell(rm: &RoleModel, k: usize, data: &[(u32, u32)], scratch: &mut Scratch) -> u64 {
    let cell = &rm.cell;
    for op in &cell.ops {
        let out = op.out.0 as usize;
        let mut y = std::mem::take(&mut scratch.vals[out]);
        let operands: Vec<Operand> = op
            .args
            .iter()
            .map(|a| {
                let a = a.0 as usize;
                match cell.values[a].kind {
                    ValueKind::Param => Operand {
                        data: &rm.params[a],
                        per_row: false,
                    },
                    _ => Operand {
                        data: &scratch.vals[a],
                        per_row: true,
                    },
                }
            })
            .collect();
        y.resize(k * cell.values[out].numel(), 0.0);
        exec_op(cell, op, k, data, &operands, &mut y);
        drop(operands);
        scratch.vals[out] = y;
    }
    cell.ops.len() as u64
}

/// Runs one op of `cell` over `k` rows into `y` (`k × numel(out)` floats; its
/// previous content is ignored).
pub fn exec_op(
    cell: &Cell,
    op: &Op,
    k: usize,
    data: &[(u32, u32)],
    args: &[Operand],
    y: &mut [f32],
) {
    let out_numel = cell.values[op.out.0 as usize].numel();
    debug_assert_eq!(y.len(), k * out_numel);
    let shape = |i: usize| -> &[usize] { &cell.values[op.args[i].0 as usize].shape };
    let numel = |i: usize| cell.values[op.args[i].0 as usize].numel();
    match op.kind {
        PrimOp::Affine => {
            for r in 0..k {
                y[r * out_numel..(r + 1) * out_numel].copy_from_slice(&args[0].data[..out_numel]);
            }
            for pair in (1..args.len()).step_by(2) {
                let (w, x) = (args[pair], args[pair + 1]);
                product(k, w.data, w.per_row, shape(pair), x.data, x.per_row, 1.0, y);
            }
        }
        PrimOp::Matmul => {
            let (a, b) = (args[0], args[1]);
            product(k, a.data, a.per_row, shape(0), b.data, b.per_row, 0.0, y);
        }
        PrimOp::Add | PrimOp::Sub | PrimOp::Mul => {
            let f = match op.kind {
                PrimOp::Add => Binary::Add,
                PrimOp::Sub => Binary::Sub,
                _ => Binary::Mul,
            };
            kernels::binary(f, args[0].data, args[1].data, y);
        }
        PrimOp::Sum | PrimOp::Mean => {
            y.fill(0.0);
            for a in args {
                kernels::accumulate(y, a.data);
            }
            if op.kind == PrimOp::Mean {
                let s = 1.0 / args.len() as f32;
                y.iter_mut().for_each(|v| *v *= s);
            }
        }
        PrimOp::Sigmoid | PrimOp::Tanh | PrimOp::Relu | PrimOp::OneMinus => {
            let f = match op.kind {
                PrimOp::Sigmoid => Unary::Sigmoid,
                PrimOp::Tanh => Unary::Tanh,
                PrimOp::Relu => Unary::Relu,
                _ => Unary::OneMinus,
            };
            kernels::unary(f, args[0].data, y);
        }
        PrimOp::Concat => {
            // Along dim 0 of each row = concatenating the rows' flat blocks.
            let mut offset = 0;
            for (i, a) in args.iter().enumerate() {
                let n = numel(i);
                for r in 0..k {
                    y[r * out_numel + offset..r * out_numel + offset + n]
                        .copy_from_slice(row(a.data, n, r));
                }
                offset += n;
            }
        }
        PrimOp::Slice => {
            let inner: usize = shape(0)[1..].iter().product();
            let (start, _) = op.slice.unwrap_or((0, 0));
            let n = numel(0);
            for r in 0..k {
                let from = r * n + start * inner;
                y[r * out_numel..(r + 1) * out_numel]
                    .copy_from_slice(&args[0].data[from..from + out_numel]);
            }
        }
        PrimOp::Lookup => {
            let rows = shape(0).first().copied().unwrap_or(1).max(1);
            let table = args[0].data;
            for (r, d) in data.iter().enumerate().take(k) {
                let i = d.0 as usize % rows;
                y[r * out_numel..(r + 1) * out_numel]
                    .copy_from_slice(&table[i * out_numel..(i + 1) * out_numel]);
            }
        }
        PrimOp::Softmax => kernels::softmax(args[0].data, shape(0)[0], y),
        PrimOp::PickLoss => {
            let labels: Vec<u32> = data.iter().take(k).map(|d| d.1).collect();
            kernels::pick_loss(args[0].data, shape(0)[0], &labels, y);
        }
    }
}

/// `y (+)= a · b` per row, where `a` is `[m, n]` and `b` is `[n]` or `[n, p]`
/// per row; either may be shared (a parameter) or per row.
#[allow(clippy::too_many_arguments)]
fn product(
    k: usize,
    a: &[f32],
    a_rows: bool,
    a_shape: &[usize],
    b: &[f32],
    b_rows: bool,
    beta: f32,
    y: &mut [f32],
) {
    let (m, n) = (a_shape[0], a_shape.get(1).copied().unwrap_or(1));
    let b_numel = if b_rows { b.len() / k.max(1) } else { b.len() };
    let p = b_numel / n.max(1);
    if !a_rows && b_rows && p == 1 {
        // The common case: one weight matrix for every row — a single GEMM.
        kernels::gemm_xwt(k, m, n, b, a, beta, y);
        return;
    }
    let a_numel = m * n;
    for r in 0..k {
        let ar = if a_rows { row(a, a_numel, r) } else { a };
        let br = if b_rows { row(b, b_numel, r) } else { b };
        kernels::gemm(m, n, p, ar, br, beta, &mut y[r * m * p..(r + 1) * m * p]);
    }
}
