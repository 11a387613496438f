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
//! packed temporary first, the copy DyNet-style allocation pays. Results that
//! are consecutive in the records are written there directly; others are
//! computed into a packed temporary and scattered (a counted copy, as the
//! planner counts). Contiguity depends only on the order, not on `k`, so it is
//! decided once when the program is built; the planner's own labels are not
//! trusted. The backends compile a program for themselves
//! (`backend::cpu::plan`, `backend::cuda::program`).

use crate::cells::{Cell, ValueKind};
use crate::error::LayoutMismatch;
use crate::layout::LayoutFile;
use crate::model::RoleModel;

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
#[derive(Clone)]
pub(crate) struct BatchProg {
    pub(crate) ops: Vec<usize>,
    pub(crate) args: Vec<Access>,
    pub(crate) result_in_place: bool,
}

impl BatchProg {
    /// The batch of `ops` with its operands and result classified against
    /// the value places `unit` and `param_at` (a one-op batch writes its
    /// result in place).
    fn classify(cell: &Cell, unit: &[usize], param_at: &[usize], ops: Vec<usize>) -> BatchProg {
        let access = |values: Vec<usize>| access_of(cell, unit, param_at, &values);
        let arity = cell.ops[ops[0]].args.len();
        let args = (0..arity)
            .map(|i| access(ops.iter().map(|&o| cell.ops[o].args[i].index()).collect()))
            .collect();
        let result = access(ops.iter().map(|&o| cell.ops[o].out.index()).collect());
        BatchProg {
            result_in_place: result == Access::InPlace || ops.len() == 1,
            ops,
            args,
        }
    }
}

/// A role's cell compiled for batched execution from a layout file.
#[derive(Clone)]
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
                    || op.factor != cell.ops[first].factor
                {
                    return Err(bad(format!(
                        "batch {b}: op {o} repeated or unlike the batch"
                    )));
                }
                done[o] = true;
            }
            let arity = cell.ops[first].args.len();
            // The executors read one operand of a batch either from the
            // parameters or from the per-instance values (`access_of`).
            for i in 0..arity {
                let params = ops
                    .iter()
                    .filter(|&&o| cell.values[cell.ops[o].args[i].index()].kind == ValueKind::Param)
                    .count();
                if params != 0 && params != ops.len() {
                    return Err(bad(format!(
                        "batch {b}: operand {i} is a parameter in some ops and a per-instance value in others; \
                         write the layout again with this version's `planner layout`"
                    )));
                }
            }
            batches.push(BatchProg::classify(cell, &unit, &param_at, ops));
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

    /// The program with every `slice` the record can serve read in place: a
    /// slice of a value the record holds whole (not a cell input or output,
    /// whose homes a device may move to the producer's or the node's slot)
    /// is that value's floats from `start` on, so its result's unit is the
    /// source's unit plus `start`, and the op and its copy go (and in the
    /// backward its gradient is the source's, added into in place). A
    /// recorded `Linear(x).chunk(5)` then costs what five gate affines cost.
    /// Batches left empty go; the others' operands are classified again
    /// (the sources' units moved).
    pub fn with_slices_in_place(self, cell: &Cell) -> CellProgram {
        use crate::cells::PrimOp;
        let n = cell.values.len();
        let mut boundary = vec![false; n];
        for p in &cell.ports {
            for v in &p.inputs {
                boundary[v.index()] = true;
            }
        }
        for o in &cell.outputs {
            boundary[o.index()] = true;
        }
        // Per op: the slice read in place, as (source, first float).
        let mut alias: Vec<Option<(usize, usize)>> = vec![None; cell.ops.len()];
        for (o, op) in cell.ops.iter().enumerate() {
            let (PrimOp::Slice, Some((start, _))) = (op.kind, op.slice) else {
                continue;
            };
            let (src, out) = (op.args[0].index(), op.out.index());
            if boundary[src] || boundary[out] || cell.values[src].kind == ValueKind::Param {
                continue;
            }
            let inner: usize = cell.values[src].shape[1..].iter().product();
            alias[o] = Some((src, start * inner));
        }
        if alias.iter().all(Option::is_none) {
            return self;
        }
        // The other values close up in their order (neighbours stay
        // neighbours), then each sliced value takes its place in its source;
        // ops are in dependency order, so a slice of a slice finds its
        // source placed.
        let mut aliased = vec![false; n];
        for (o, a) in alias.iter().enumerate() {
            if a.is_some() {
                aliased[cell.ops[o].out.index()] = true;
            }
        }
        let mut order: Vec<usize> = (0..n)
            .filter(|&v| self.unit[v] != usize::MAX && !aliased[v])
            .collect();
        order.sort_by_key(|&v| self.unit[v]);
        let mut unit = vec![usize::MAX; n];
        let mut units = 0;
        for v in order {
            unit[v] = units;
            units += cell.values[v].numel();
        }
        for (o, a) in alias.iter().enumerate() {
            if let Some((src, at)) = *a {
                unit[cell.ops[o].out.index()] = unit[src] + at;
            }
        }
        let batches = self
            .batches
            .iter()
            .filter_map(|b| {
                let ops: Vec<usize> = b
                    .ops
                    .iter()
                    .copied()
                    .filter(|&o| alias[o].is_none())
                    .collect();
                if ops.is_empty() {
                    return None;
                }
                Some(BatchProg::classify(cell, &unit, &self.param_at, ops))
            })
            .collect();
        CellProgram {
            unit,
            units,
            params: self.params,
            param_at: self.param_at,
            batches,
        }
    }

    /// Operands the program gathers in every run of a batch (per in-cell
    /// batch and operand read with `Access::Gather`): `(parameters,
    /// per-instance values)`. A planned layout exists to make both zero.
    pub fn gathers(&self, cell: &Cell) -> (usize, usize) {
        let (mut params, mut values) = (0, 0);
        for b in &self.batches {
            for (i, acc) in b.args.iter().enumerate() {
                if *acc == Access::Gather {
                    let v = cell.ops[b.ops[0]].args[i].index();
                    if cell.values[v].kind == ValueKind::Param {
                        params += 1;
                    } else {
                        values += 1;
                    }
                }
            }
        }
        (params, values)
    }

    /// Floats of the value arena for `k` instances.
    pub fn arena_len(&self, k: usize) -> usize {
        self.units * k
    }

    /// Where value `v` of instance `r` starts (non-parameters only).
    pub fn at(&self, v: usize, r: usize) -> usize {
        r * self.units + self.unit[v]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::PrimOp;

    fn node_role() -> (crate::model::Model, usize) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../core/tests/fixtures/model-tree");
        let d = crate::modeldir::ModelDir::open(&dir).unwrap();
        let m = crate::model::Model::new(&d.trace, &d.cells, 7).unwrap();
        let r = m.roles.iter().position(|r| r.cell.name == "node").unwrap();
        (m, r)
    }

    #[test]
    fn a_chunked_affine_reads_its_slices_in_place_and_the_record_closes_up() {
        let (m, r) = node_role();
        let rm = &m.roles[r];
        let cell = &rm.cell;
        let plain = CellProgram::op_by_op(rm);
        let p = plain.clone().with_slices_in_place(cell);
        let slices: Vec<&crate::cells::Op> = cell
            .ops
            .iter()
            .filter(|o| o.kind == PrimOp::Slice)
            .collect();
        assert_eq!(slices.len(), 5);
        assert!(
            p.batches
                .iter()
                .all(|b| cell.ops[b.ops[0]].kind != PrimOp::Slice)
        );
        assert_eq!(p.batches.len(), plain.batches.len() - 5);
        let sliced: usize = slices
            .iter()
            .map(|o| cell.values[o.out.index()].numel())
            .sum();
        assert_eq!(p.units, plain.units - sliced);
        for o in slices {
            let (src, (start, _)) = (o.args[0].index(), o.slice.unwrap());
            assert_eq!(p.unit[o.out.index()], p.unit[src] + start);
        }
    }

    #[test]
    fn a_slice_of_a_cell_input_keeps_its_copy() {
        let (m, r) = node_role();
        let rm = &m.roles[r];
        // The same values, the first slice reading the cell's first input.
        let mut cell = rm.cell.clone();
        let o = cell
            .ops
            .iter()
            .position(|o| o.kind == PrimOp::Slice)
            .unwrap();
        cell.ops[o].args[0] = cell.ports[0].inputs[0];
        cell.ops[o].slice = Some((0, 1));
        let plain = CellProgram::op_by_op(rm);
        let p = plain.clone().with_slices_in_place(&cell);
        assert!(p.batches.iter().any(|b| b.ops == vec![o]));
        assert_eq!(p.batches.len(), plain.batches.len() - 4);
    }
}
