//! ED-Batch's static-subgraph execution: a batch of same-role nodes runs its
//! cell by the *in-cell schedule* of a layout file, where ops of equal
//! signature share one batched kernel (the four LSTM gates are one), reading
//! and writing the cell's variables in the file's memory order.
//!
//! Per run of a batch of `k` nodes the cell's non-parameter variables live in
//! one arena, block after block in the layout's order (a block = `k` rows of a
//! variable); parameters live once in a parameter arena, also in layout order.
//! An operand of an in-cell batch is read in place when its blocks are
//! consecutive in execution order, with stride 0 when it is one variable for
//! every op (a broadcast), and otherwise gathered into a temporary first — the
//! copy DyNet-style allocation pays; a result that is not consecutive is
//! written to a temporary and scattered. Contiguity depends only on the order,
//! not on `k`, so it is decided once when the program is built; the planner's
//! own labels are not trusted.

use thiserror::Error;

use super::interp::{Operand, exec_op};
use super::model::RoleModel;
use crate::cells::{Cell, ValueKind};
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
enum Access {
    /// Consecutive blocks in execution order: read in place.
    InPlace,
    /// One variable for every op: read with op stride 0.
    Broadcast,
    /// Copied into a temporary first.
    Gather,
}

struct BatchProg {
    ops: Vec<usize>,
    args: Vec<Access>,
    result_in_place: bool,
}

/// A role's cell compiled for batched execution from a layout file.
pub struct CellProgram {
    /// Offset of each non-parameter value in units of rows (× k = floats).
    unit: Vec<usize>,
    units: usize,
    params: Vec<f32>,
    param_at: Vec<usize>,
    batches: Vec<BatchProg>,
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

    /// Floats of the value arena for `k` rows.
    pub fn arena_len(&self, k: usize) -> usize {
        self.units * k
    }

    /// Where value `v`'s block starts for `k` rows (non-parameters only).
    pub fn block(&self, v: usize, k: usize) -> usize {
        self.unit[v] * k
    }

    /// Runs every in-cell batch over `k` rows whose inputs are already in
    /// `arena`; `tmp` is scratch for gathers and scattered results.
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
            let m = b.ops.len();
            let first = &cell.ops[b.ops[0]];
            tmp.resize_with(first.args.len() + 1, Vec::new);
            // Gathers first: pack non-contiguous operands into temporaries.
            for (i, acc) in b.args.iter().enumerate() {
                if *acc != Access::Gather {
                    continue;
                }
                let buf = &mut tmp[i];
                buf.clear();
                for &o in &b.ops {
                    let v = cell.ops[o].args[i].0 as usize;
                    buf.extend_from_slice(self.slice(cell, v, k, arena));
                }
                c.copy_kernels += 1;
                c.copy_bytes += buf.len() as u64 * 4;
            }
            let out_numel = cell.values[first.out.0 as usize].numel();
            let res_len = m * k * out_numel;
            let (res_start, res_tmp) = if b.result_in_place {
                (self.block(first.out.0 as usize, k), false)
            } else {
                (0, true)
            };
            let (tmps, out_tmp) = tmp.split_at_mut(first.args.len());
            let out_tmp = &mut out_tmp[0];
            if res_tmp {
                out_tmp.clear();
                out_tmp.resize(res_len, 0.0);
            }
            {
                let (lo, rest) = arena.split_at_mut(if res_tmp { 0 } else { res_start });
                let (res, hi) = rest.split_at_mut(if res_tmp { 0 } else { res_len });
                let out: &mut [f32] = if res_tmp { out_tmp } else { res };
                let hi_base = res_start + if res_tmp { 0 } else { res_len };
                let read = |start: usize, len: usize| -> &[f32] {
                    if start + len <= res_start && !res_tmp {
                        &lo[start..start + len]
                    } else if res_tmp {
                        &hi[start..start + len]
                    } else {
                        &hi[start - hi_base..start - hi_base + len]
                    }
                };
                for (j, &o) in b.ops.iter().enumerate() {
                    let op = &cell.ops[o];
                    let operands: Vec<Operand> = op
                        .args
                        .iter()
                        .enumerate()
                        .map(|(i, a)| {
                            let v = a.0 as usize;
                            let info = &cell.values[v];
                            let per_row = info.kind != ValueKind::Param;
                            let len = if per_row {
                                k * info.numel()
                            } else {
                                info.numel()
                            };
                            let data = match b.args[i] {
                                Access::Gather => &tmps[i][j * len..(j + 1) * len],
                                _ if per_row => read(self.block(v, k), len),
                                _ => &self.params[self.param_at[v]..self.param_at[v] + len],
                            };
                            Operand { data, per_row }
                        })
                        .collect();
                    let y = &mut out[j * k * out_numel..(j + 1) * k * out_numel];
                    exec_op(cell, op, k, data, &operands, y);
                }
            }
            c.kernels += 1;
            if res_tmp {
                for (j, &o) in b.ops.iter().enumerate() {
                    let start = self.block(cell.ops[o].out.0 as usize, k);
                    let n = k * out_numel;
                    arena[start..start + n]
                        .copy_from_slice(&tmp[first.args.len()][j * n..(j + 1) * n]);
                }
                c.copy_kernels += 1;
                c.copy_bytes += res_len as u64 * 4;
            }
        }
        c
    }

    fn slice<'a>(&'a self, cell: &Cell, v: usize, k: usize, arena: &'a [f32]) -> &'a [f32] {
        let info = &cell.values[v];
        if info.kind == ValueKind::Param {
            &self.params[self.param_at[v]..self.param_at[v] + info.numel()]
        } else {
            let s = self.block(v, k);
            &arena[s..s + k * info.numel()]
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
