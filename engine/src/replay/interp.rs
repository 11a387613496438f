//! Runs one cell over `k` rows at once (k = 1: one node, the reference; k > 1:
//! a batch of same-role nodes, Cavs style). Every op is one kernel over all k
//! rows: a parameter shared by the rows becomes one GEMM with the rows as the
//! batch dimension; per-row matrices (MV-RNN) loop per row.

use super::kernels::{self, Binary, Unary};
use super::model::RoleModel;
use crate::cells::{PrimOp, ValueKind};

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

/// Runs every op of the cell over `k` rows whose inputs are already in
/// `scratch`; `data[r]` = (lookup row, label) of row r. Returns kernels launched.
pub fn run_cell(rm: &RoleModel, k: usize, data: &[(u32, u32)], scratch: &mut Scratch) -> u64 {
    let cell = &rm.cell;
    let mut kernels = 0;
    for op in &cell.ops {
        let out = op.out.0 as usize;
        let out_numel = cell.values[out].numel();
        let mut y = std::mem::take(&mut scratch.vals[out]);
        y.clear();
        y.resize(k * out_numel, 0.0);
        let vals = &scratch.vals;
        // (data, per-row?) of an argument.
        let arg = |i: usize| -> (&[f32], bool, &[usize]) {
            let a = op.args[i].0 as usize;
            let info = &cell.values[a];
            match info.kind {
                ValueKind::Param => (&rm.params[a], false, &info.shape),
                _ => (&vals[a], true, &info.shape),
            }
        };
        match op.kind {
            PrimOp::Affine => {
                let (bias, _, _) = arg(0);
                for r in 0..k {
                    y[r * out_numel..(r + 1) * out_numel].copy_from_slice(bias);
                }
                for pair in (1..op.args.len()).step_by(2) {
                    let (w, w_rows, w_shape) = arg(pair);
                    let (x, x_rows, _) = arg(pair + 1);
                    product(k, w, w_rows, w_shape, x, x_rows, 1.0, &mut y);
                }
            }
            PrimOp::Matmul => {
                let (a, a_rows, a_shape) = arg(0);
                let (b, b_rows, _) = arg(1);
                product(k, a, a_rows, a_shape, b, b_rows, 0.0, &mut y);
            }
            PrimOp::Add | PrimOp::Sub | PrimOp::Mul => {
                let f = match op.kind {
                    PrimOp::Add => Binary::Add,
                    PrimOp::Sub => Binary::Sub,
                    _ => Binary::Mul,
                };
                kernels::binary(f, arg(0).0, arg(1).0, &mut y);
            }
            PrimOp::Sum | PrimOp::Mean => {
                for i in 0..op.args.len() {
                    kernels::accumulate(&mut y, arg(i).0);
                }
                if op.kind == PrimOp::Mean {
                    let s = 1.0 / op.args.len() as f32;
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
                kernels::unary(f, arg(0).0, &mut y);
            }
            PrimOp::Concat => {
                // Along dim 0 of each row = concatenating the rows' flat blocks.
                let mut offset = 0;
                for i in 0..op.args.len() {
                    let a = op.args[i].0 as usize;
                    let n = cell.values[a].numel();
                    let (src, _, _) = arg(i);
                    for r in 0..k {
                        y[r * out_numel + offset..r * out_numel + offset + n]
                            .copy_from_slice(row(src, n, r));
                    }
                    offset += n;
                }
            }
            PrimOp::Slice => {
                let a = op.args[0].0 as usize;
                let info = &cell.values[a];
                let inner: usize = info.shape[1..].iter().product();
                let (start, _) = op.slice.unwrap_or((0, 0));
                let src = &vals[a];
                for r in 0..k {
                    let from = r * info.numel() + start * inner;
                    y[r * out_numel..(r + 1) * out_numel]
                        .copy_from_slice(&src[from..from + out_numel]);
                }
            }
            PrimOp::Lookup => {
                let (table, _, shape) = arg(0);
                let rows = shape.first().copied().unwrap_or(1).max(1);
                for (r, d) in data.iter().enumerate().take(k) {
                    let i = d.0 as usize % rows;
                    y[r * out_numel..(r + 1) * out_numel]
                        .copy_from_slice(&table[i * out_numel..(i + 1) * out_numel]);
                }
            }
            PrimOp::Softmax => kernels::softmax(arg(0).0, arg(0).2[0], &mut y),
            PrimOp::PickLoss => {
                let labels: Vec<u32> = data.iter().take(k).map(|d| d.1).collect();
                kernels::pick_loss(arg(0).0, arg(0).2[0], &labels, &mut y);
            }
        }
        scratch.vals[out] = y;
        kernels += 1;
    }
    kernels
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
