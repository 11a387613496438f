//! ED-Batch's static-subgraph execution: a batch of same-role nodes runs its
//! cell by the *in-cell schedule* of a layout file, where ops of equal
//! signature share one batched kernel (the four LSTM gates are one), reading
//! and writing the cell's variables in the file's memory order.
//!
//! Per run of a batch of `k` nodes the cell's non-parameter variables live in
//! one arena, one record per instance holding its variables in the layout's
//! order (instance-major); parameters live once in a parameter arena, also in
//! layout order. An operand of an in-cell batch whose variables are consecutive
//! in execution order is then one strided matrix read in place — the four LSTM
//! gate products become a single GEMM against the stacked weights; one variable
//! for every op is a broadcast (op stride 0); anything else is gathered into a
//! packed temporary first, the copy DyNet-style allocation pays. Results are
//! computed into a packed buffer and stored into the records (a copy every
//! layout pays alike; it is counted as a scatter only when the results are not
//! consecutive, as the planner counts). Contiguity depends only on the order,
//! not on `k`, so it is decided once when the program is built; the planner's
//! own labels are not trusted.

use thiserror::Error;

use super::interp::{Operand, exec_op};
use super::kernels::{self, Binary, Unary};
use super::model::RoleModel;
use crate::cells::{Cell, PrimOp, ValueKind};
use crate::layout::LayoutFile;

/// A layout that cannot drive this cell.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LayoutMismatch {
    /// The file is for another cell or hidden size.
    #[error(
        "layout {file}: is for cell {cell} at hidden {hidden}, the trace needs {want_cell} at hidden {want_hidden}"
    )]
    OtherCell {
        /// Layout file.
        file: String,
        /// Its cell.
        cell: String,
        /// Its hidden size.
        hidden: usize,
        /// The role's cell.
        want_cell: String,
        /// The trace's hidden size.
        want_hidden: usize,
    },
    /// The file does not describe the cell consistently.
    #[error("layout {file}: {reason}")]
    Inconsistent {
        /// Layout file.
        file: String,
        /// What is wrong.
        reason: String,
    },
}

/// How an operand is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Consecutive blocks in execution order: read in place.
    InPlace,
    /// One variable for every op: read with op stride 0.
    Broadcast,
    /// Copied into a temporary first.
    Gather,
}

/// One in-cell batch: its ops (same kind), how each operand is read, and
/// whether the results land consecutively in the records.
pub(crate) struct BatchProg {
    pub(crate) ops: Vec<usize>,
    pub(crate) args: Vec<Access>,
    pub(crate) result_in_place: bool,
}

/// A role's cell compiled for batched execution from a layout file.
pub struct CellProgram {
    /// Offset of each non-parameter value within an instance's record.
    pub(crate) unit: Vec<usize>,
    /// Floats of one instance's record.
    pub(crate) units: usize,
    /// Parameters in layout order.
    pub(crate) params: Vec<f32>,
    /// Offset of each parameter value in `params`.
    pub(crate) param_at: Vec<usize>,
    pub(crate) batches: Vec<BatchProg>,
}

/// Counters of one in-cell run.
#[derive(Default)]
pub struct InCellCounts {
    /// Batched kernels (one per in-cell batch).
    pub kernels: u64,
    /// Gather/scatter kernels inside the cell.
    pub copy_kernels: u64,
    /// Bytes moved by them.
    pub copy_bytes: u64,
}

impl CellProgram {
    /// Compiles `file` for role model `rm` (cell and weights at the trace's hidden size).
    pub fn new(
        file: &LayoutFile,
        rm: &RoleModel,
        source: &str,
    ) -> Result<CellProgram, LayoutMismatch> {
        let cell = &rm.cell;
        if file.cell != cell.name || file.hidden != cell.hidden {
            return Err(LayoutMismatch::OtherCell {
                file: source.to_string(),
                cell: file.cell.clone(),
                hidden: file.hidden,
                want_cell: cell.name.clone(),
                want_hidden: cell.hidden,
            });
        }
        let bad = |reason: String| LayoutMismatch::Inconsistent {
            file: source.to_string(),
            reason,
        };
        let n = cell.values.len();
        let mut seen = vec![false; n];
        let (mut unit, mut units) = (vec![usize::MAX; n], 0);
        let (mut param_at, mut params) = (vec![usize::MAX; n], Vec::new());
        for var in &file.variables {
            let v = var.value;
            if v >= n || seen[v] {
                return Err(bad(format!(
                    "variable {v} is not a value of the cell or is listed twice"
                )));
            }
            seen[v] = true;
            if cell.values[v].kind == ValueKind::Param {
                param_at[v] = params.len();
                params.extend_from_slice(&rm.params[v]);
            } else {
                unit[v] = units;
                units += cell.values[v].numel();
            }
        }
        if let Some(v) = seen.iter().position(|s| !s) {
            return Err(bad(format!(
                "value {} ({}) has no place",
                v, cell.values[v].name
            )));
        }
        let mut done = vec![false; cell.ops.len()];
        let mut batches = Vec::with_capacity(file.schedule.len());
        for (b, entry) in file.schedule.iter().enumerate() {
            let ops = entry.ops.clone();
            let first = *ops
                .first()
                .ok_or_else(|| bad(format!("batch {b} is empty")))?;
            for &o in &ops {
                let op = cell
                    .ops
                    .get(o)
                    .ok_or_else(|| bad(format!("batch {b}: no op {o}")))?;
                if done[o]
                    || op.kind != cell.ops[first].kind
                    || op.args.len() != cell.ops[first].args.len()
                {
                    return Err(bad(format!(
                        "batch {b}: op {o} repeated or unlike the batch"
                    )));
                }
                done[o] = true;
            }
            let arity = cell.ops[first].args.len();
            let access = |values: Vec<usize>| access_of(cell, &unit, &param_at, &values);
            let args = (0..arity)
                .map(|i| {
                    access(
                        ops.iter()
                            .map(|&o| cell.ops[o].args[i].0 as usize)
                            .collect(),
                    )
                })
                .collect();
            let result = access(ops.iter().map(|&o| cell.ops[o].out.0 as usize).collect());
            batches.push(BatchProg {
                ops,
                args,
                result_in_place: result == Access::InPlace || entry.ops.len() == 1,
            });
        }
        if let Some(o) = done.iter().position(|d| !d) {
            return Err(bad(format!("op {o} is in no batch")));
        }
        Ok(CellProgram {
            unit,
            units,
            params,
            param_at,
            batches,
        })
    }

    /// The program without a layout: variables in the cell's value order, every
    /// op its own batch (Cavs' op-by-op execution of the cell over the batch).
    pub fn op_by_op(rm: &RoleModel) -> CellProgram {
        let cell = &rm.cell;
        let n = cell.values.len();
        let (mut unit, mut units) = (vec![usize::MAX; n], 0);
        let (mut param_at, mut params) = (vec![usize::MAX; n], Vec::new());
        for (v, info) in cell.values.iter().enumerate() {
            if info.kind == ValueKind::Param {
                param_at[v] = params.len();
                params.extend_from_slice(&rm.params[v]);
            } else {
                unit[v] = units;
                units += info.numel();
            }
        }
        let batches = cell
            .ops
            .iter()
            .enumerate()
            .map(|(o, op)| BatchProg {
                ops: vec![o],
                args: vec![Access::InPlace; op.args.len()],
                result_in_place: true,
            })
            .collect();
        CellProgram {
            unit,
            units,
            params,
            param_at,
            batches,
        }
    }

    /// Floats of the value arena for `k` instances.
    pub fn arena_len(&self, k: usize) -> usize {
        self.units * k
    }

    /// Where value `v` of instance `r` starts (non-parameters only).
    pub fn at(&self, v: usize, r: usize) -> usize {
        r * self.units + self.unit[v]
    }

    /// Runs every in-cell batch over `k` instances whose inputs are already in
    /// `arena`; `tmp` is scratch for gathers and results.
    pub fn run(
        &self,
        cell: &Cell,
        k: usize,
        data: &[(u32, u32)],
        arena: &mut [f32],
        tmp: &mut Vec<Vec<f32>>,
    ) -> InCellCounts {
        let mut c = InCellCounts::default();
        for b in &self.batches {
            let first = &cell.ops[b.ops[0]];
            let arity = first.args.len();
            tmp.resize_with(arity + 1, Vec::new);
            let (ins, out) = tmp.split_at_mut(arity);
            let mut views = Vec::with_capacity(arity);
            for (i, acc) in b.args.iter().enumerate() {
                let v0 = first.args[i].0 as usize;
                let info = &cell.values[v0];
                let numel = info.numel();
                let per_row = info.kind != ValueKind::Param;
                let view = match (acc, per_row) {
                    (Access::Gather, _) => {
                        let buf = &mut ins[i];
                        buf.clear();
                        if per_row {
                            for r in 0..k {
                                for &o in &b.ops {
                                    let at = self.at(cell.ops[o].args[i].0 as usize, r);
                                    buf.extend_from_slice(&arena[at..at + numel]);
                                }
                            }
                        } else {
                            for &o in &b.ops {
                                let v = cell.ops[o].args[i].0 as usize;
                                buf.extend_from_slice(
                                    &self.params[self.param_at[v]..self.param_at[v] + numel],
                                );
                            }
                        }
                        c.copy_kernels += 1;
                        c.copy_bytes += buf.len() as u64 * 4;
                        View {
                            src: Src::Tmp(i),
                            base: 0,
                            rs: if per_row { b.ops.len() * numel } else { 0 },
                            os: numel,
                        }
                    }
                    (acc, true) => View {
                        src: Src::Arena,
                        base: self.unit[v0],
                        rs: self.units,
                        os: if *acc == Access::Broadcast { 0 } else { numel },
                    },
                    (acc, false) => View {
                        src: Src::Params,
                        base: self.param_at[v0],
                        rs: 0,
                        os: if *acc == Access::Broadcast { 0 } else { numel },
                    },
                };
                views.push(view);
            }
            let m = b.ops.len();
            let out_numel = cell.values[first.out.0 as usize].numel();
            let y = &mut out[0];
            y.clear();
            y.resize(k * m * out_numel, 0.0);
            let srcs = Sources {
                arena,
                params: &self.params,
                tmp: ins,
            };
            exec_batch(cell, &b.ops, k, data, &views, &srcs, y);
            c.kernels += 1;
            // Store the results into the instances' records.
            for r in 0..k {
                for (j, &o) in b.ops.iter().enumerate() {
                    let at = self.at(cell.ops[o].out.0 as usize, r);
                    let from = (r * m + j) * out_numel;
                    arena[at..at + out_numel].copy_from_slice(&y[from..from + out_numel]);
                }
            }
            if !b.result_in_place {
                c.copy_kernels += 1;
                c.copy_bytes += y.len() as u64 * 4;
            }
        }
        c
    }
}

/// Where an operand's data is.
#[derive(Clone, Copy)]
enum Src {
    Arena,
    Params,
    Tmp(usize),
}

/// An operand of a batch as a strided view: op `j`'s data for instance `r`
/// starts at `base + r·rs + j·os`.
#[derive(Clone, Copy)]
struct View {
    src: Src,
    base: usize,
    rs: usize,
    os: usize,
}

struct Sources<'a> {
    arena: &'a [f32],
    params: &'a [f32],
    tmp: &'a [Vec<f32>],
}

impl Sources<'_> {
    fn data(&self, v: &View) -> &[f32] {
        match v.src {
            Src::Arena => self.arena,
            Src::Params => self.params,
            Src::Tmp(i) => &self.tmp[i],
        }
    }

    /// Op `j`'s `len` floats of instance `r`.
    fn seg(&self, v: &View, r: usize, j: usize, len: usize) -> &[f32] {
        let at = v.base + r * v.rs + j * v.os;
        &self.data(v)[at..at + len]
    }
}

/// Runs the ops of one in-cell batch into `y`, packed as `[k][ops][out]`.
#[allow(clippy::too_many_arguments)]
fn exec_batch(
    cell: &Cell,
    ops: &[usize],
    k: usize,
    data: &[(u32, u32)],
    views: &[View],
    s: &Sources,
    y: &mut [f32],
) {
    let first = &cell.ops[ops[0]];
    let m = ops.len();
    let out = cell.values[first.out.0 as usize].numel();
    let row = m * out;
    let shape = |i: usize| &cell.values[first.args[i].0 as usize].shape;
    let numel = |i: usize| cell.values[first.args[i].0 as usize].numel();
    let per_row = |i: usize| cell.values[first.args[i].0 as usize].kind != ValueKind::Param;
    match first.kind {
        PrimOp::Affine | PrimOp::Matmul => {
            let terms: Vec<(usize, usize)> = if first.kind == PrimOp::Affine {
                for r in 0..k {
                    for j in 0..m {
                        y[r * row + j * out..r * row + (j + 1) * out]
                            .copy_from_slice(s.seg(&views[0], r, j, out));
                    }
                }
                (1..views.len()).step_by(2).map(|i| (i, i + 1)).collect()
            } else {
                vec![(0, 1)]
            };
            for (wi, xi) in terms {
                let (wv, xv) = (views[wi], views[xi]);
                let n = numel(xi);
                let w_shape = shape(wi);
                let p = n / w_shape.get(1).copied().unwrap_or(1).max(1);
                if !per_row(wi) && per_row(xi) && p == 1 {
                    if xv.os == 0 && wv.os == numel(wi) {
                        // One input for every op and stacked weights: one GEMM.
                        let x = &s.data(&xv)[xv.base..];
                        let w = &s.data(&wv)[wv.base..wv.base + m * numel(wi)];
                        kernels::gemm_xwt_strided(k, row, n, x, xv.rs, w, 1.0, y, row);
                    } else {
                        for j in 0..m {
                            let x = &s.data(&xv)[xv.base + j * xv.os..];
                            let w = s.seg(&wv, 0, j, numel(wi));
                            kernels::gemm_xwt_strided(
                                k,
                                out,
                                n,
                                x,
                                xv.rs,
                                w,
                                1.0,
                                &mut y[j * out..],
                                row,
                            );
                        }
                    }
                } else {
                    // Per-instance matrices (MV-RNN): a small product per instance and op.
                    let (mm, nn) = (w_shape[0], w_shape.get(1).copied().unwrap_or(1));
                    for r in 0..k {
                        for j in 0..m {
                            let a = s.seg(&wv, r, j, numel(wi));
                            let bb = s.seg(&xv, r, j, n);
                            let at = r * row + j * out;
                            kernels::gemm(mm, nn, p, a, bb, 1.0, &mut y[at..at + out]);
                        }
                    }
                }
            }
        }
        PrimOp::Sigmoid | PrimOp::Tanh | PrimOp::Relu | PrimOp::OneMinus => {
            let f = match first.kind {
                PrimOp::Sigmoid => Unary::Sigmoid,
                PrimOp::Tanh => Unary::Tanh,
                PrimOp::Relu => Unary::Relu,
                _ => Unary::OneMinus,
            };
            let v = &views[0];
            for r in 0..k {
                let yr = &mut y[r * row..(r + 1) * row];
                if v.os == out {
                    // Consecutive operand: the whole batch of this instance at once.
                    kernels::unary(f, s.seg(v, r, 0, row), yr);
                } else {
                    for j in 0..m {
                        kernels::unary(f, s.seg(v, r, j, out), &mut yr[j * out..(j + 1) * out]);
                    }
                }
            }
        }
        PrimOp::Add | PrimOp::Sub | PrimOp::Mul => {
            let f = match first.kind {
                PrimOp::Add => Binary::Add,
                PrimOp::Sub => Binary::Sub,
                _ => Binary::Mul,
            };
            let (a, bv) = (&views[0], &views[1]);
            for r in 0..k {
                let yr = &mut y[r * row..(r + 1) * row];
                if a.os == out && bv.os == out && per_row(0) && per_row(1) {
                    kernels::binary(f, s.seg(a, r, 0, row), s.seg(bv, r, 0, row), yr);
                } else {
                    for j in 0..m {
                        let (x0, x1) = (s.seg(a, r, j, out), s.seg(bv, r, j, out));
                        kernels::binary(f, x0, x1, &mut yr[j * out..(j + 1) * out]);
                    }
                }
            }
        }
        _ => {
            // Everything else, instance by instance and op by op on segments.
            let mut args: Vec<Operand> = Vec::with_capacity(views.len());
            let mut d = [(0u32, 0u32)];
            for (r, node) in data.iter().enumerate().take(k) {
                d[0] = *node;
                for (j, &o) in ops.iter().enumerate() {
                    args.clear();
                    for (i, v) in views.iter().enumerate() {
                        args.push(Operand {
                            data: s.seg(v, r, j, numel(i)),
                            per_row: per_row(i),
                        });
                    }
                    let at = r * row + j * out;
                    exec_op(cell, &cell.ops[o], 1, &d, &args, &mut y[at..at + out]);
                }
            }
        }
    }
}

/// Decides how an operand made of `values` (one per op, in execution order) is read.
fn access_of(cell: &Cell, unit: &[usize], param_at: &[usize], values: &[usize]) -> Access {
    if values.len() == 1 {
        return Access::InPlace;
    }
    if values.iter().all(|&v| v == values[0]) {
        return Access::Broadcast;
    }
    let params = values
        .iter()
        .filter(|&&v| cell.values[v].kind == ValueKind::Param)
        .count();
    if params != 0 && params != values.len() {
        return Access::Gather;
    }
    let at = |v: usize| if params > 0 { param_at[v] } else { unit[v] };
    let consecutive = values
        .windows(2)
        .all(|w| at(w[1]) == at(w[0]) + cell.values[w[0]].numel());
    if consecutive {
        Access::InPlace
    } else {
        Access::Gather
    }
}
