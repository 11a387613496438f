//! Building layout files from plans. The format itself (`LayoutFile` and its
//! parts) is `engine::layout`, re-exported here.

use engine::cells::{Cell, ValueKind};

pub use engine::layout::*;

use crate::cost::{Access, OperandCost, Totals};
use crate::plan::{Allocation, CellPlan};
use crate::problem::{DTYPE_BYTES, Problem};
use crate::schedule::in_cell_signature;

/// The planned layout of `plan`.
///
/// # Panics
/// If `cell` is not the cell `plan` was made from (a caller bug: value
/// and op ids would not match).
pub fn planned_file(cell: &Cell, plan: &CellPlan) -> LayoutFile {
    let alloc = &plan.planned.planned;
    build(cell, plan, &plan.problem, alloc, AllocationKind::Planned)
}

/// The DyNet baseline of `plan`.
///
/// # Panics
/// If `cell` is not the cell `plan` was made from.
pub fn baseline_file(cell: &Cell, plan: &CellPlan) -> LayoutFile {
    build(
        cell,
        plan,
        &plan.problem,
        &plan.baseline,
        AllocationKind::Dynet,
    )
}

/// Totals of an evaluation as written to the file.
pub fn totals_entry(t: &Totals) -> TotalsEntry {
    TotalsEntry {
        batches: t.batches,
        gathers: t.gathers,
        scatters: t.scatters,
        memory_kernels: t.memory_kernels,
        copy_bytes: t.copy_bytes,
        broadcasts: t.broadcasts,
        broadcast_bytes: t.broadcast_bytes,
        copy_bytes_per_instance_weights: t.copy_bytes_per_instance_weights,
        paper_kernels: t.paper_kernels(),
        paper_bytes: t.paper_bytes(),
        paper_bytes_per_instance_weights: t.paper_bytes_per_instance_weights(),
    }
}

/// Bytes between instance rows of value `v`.
pub(crate) fn instance_stride(cell: &Cell, v: usize) -> u64 {
    let info = &cell.values[v];
    if info.kind == ValueKind::Param {
        0
    } else {
        (info.numel() as u64).saturating_mul(DTYPE_BYTES)
    }
}

fn build(
    cell: &Cell,
    plan: &CellPlan,
    problem: &Problem,
    alloc: &Allocation,
    kind: AllocationKind,
) -> LayoutFile {
    let offsets = &alloc.layout.offsets;
    let variables = alloc
        .layout
        .order
        .iter()
        .map(|&v| {
            let info = &cell.values[v];
            VariableEntry {
                value: v,
                name: info.name.clone(),
                kind: match info.kind {
                    ValueKind::Input { .. } => VarKind::Input,
                    ValueKind::Param => VarKind::Param,
                    ValueKind::Op { .. } => VarKind::Op,
                },
                shape: info.shape.clone(),
                offset: offsets[v],
                bytes: problem.vars[v].bytes,
                instance_stride: instance_stride(cell, v),
            }
        })
        .collect();
    let operand = |list: &[usize], order: &[usize], c: &OperandCost| {
        let values: Vec<usize> = order.iter().map(|&i| list[i]).collect();
        OperandEntry {
            names: values
                .iter()
                .map(|&v| cell.values[v].name.clone())
                .collect(),
            offsets: values.iter().map(|&v| offsets[v]).collect(),
            plan: match c.access {
                Access::Contiguous => PlanKind::Contiguous,
                Access::Broadcast => PlanKind::Broadcast,
                Access::Gather => PlanKind::Gather,
                Access::Scatter => PlanKind::Scatter,
            },
            bytes: c.copy_bytes,
            broadcast_bytes: c.broadcast_bytes,
            op_stride: if c.access == Access::Broadcast {
                0
            } else {
                problem.vars[values[0]].bytes
            },
            instance_stride: instance_stride(cell, values[0]),
            values,
        }
    };
    let schedule = problem
        .batches
        .iter()
        .zip(&alloc.eval.batches)
        .map(|(spec, cost)| {
            let ops: Vec<usize> = cost.order.iter().map(|&i| spec.ops[i]).collect();
            BatchEntry {
                op: cell.ops[ops[0]].kind,
                signature: in_cell_signature(cell, ops[0]),
                outs: ops
                    .iter()
                    .map(|&o| cell.values[cell.ops[o].out.index()].name.clone())
                    .collect(),
                operands: spec
                    .args
                    .iter()
                    .zip(&cost.args)
                    .map(|(list, c)| operand(list, &cost.order, c))
                    .collect(),
                result: operand(&spec.result, &cost.order, &cost.result),
                ops,
            }
        })
        .collect();
    LayoutFile {
        format: FORMAT.to_owned(),
        version: VERSION,
        cell: plan.cell.clone(),
        hidden: plan.hidden,
        batch: plan.batch,
        allocation: kind,
        dtype_bytes: DTYPE_BYTES,
        arena_bytes: alloc.layout.arena_bytes,
        variables,
        schedule,
        totals: totals_entry(&alloc.eval.totals),
    }
}
