//! What a replay session will allocate, estimated from the trace and the
//! cells' shapes before anything is allocated (the weights alone of a
//! `--hidden 100000` LSTM are 320 GB): `engine replay` and the experiments
//! runner refuse a run that does not fit ([`crate::memory`]).
//!
//! The parts follow what a session owns: the model's weights, their packed
//! copies, the node store (every node's outputs), the batch records and
//! temporaries (shared by all roles, sized for the largest role × its node
//! count, an upper bound on its batch), DyNet's op-level arena, and a second
//! store when the run is checked against the reference.

use crate::cells::{CellLibrary, ValueKind};
use crate::error::ReplayError;
use crate::memory::Estimate;
use crate::trace::Trace;

/// Bytes per element (the replay computes in f32).
const F32: u64 = 4;

/// How the run will execute, as far as memory goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunShape {
    /// The op-level DyNet executor (an arena of every op's output).
    pub op_level: bool,
    /// The run is compared with the reference executor (a second store).
    pub check: bool,
    /// `--roofline`: its GEMM-only side packs its own copy of every weight.
    pub roofline: bool,
}

/// The estimate for replaying `trace` (its workload's cells at its hidden
/// size, `hidden` where given).
pub fn estimate(
    trace: &Trace,
    cells: &CellLibrary,
    shape: RunShape,
) -> Result<Estimate, ReplayError> {
    let w = cells
        .workload(&trace.workload)
        .ok_or_else(|| ReplayError::NoCells(trace.workload.clone()))?;
    let g = &trace.graph;
    let hidden = match trace.meta.hidden {
        Some(h) => h as usize,
        None => crate::model::hidden_from_names(g).ok_or(ReplayError::NoHidden)?,
    };
    // Nodes per role (a type unknown to the workload is Model::new's error).
    let mut count = vec![0u64; w.roles.len()];
    let type_role: Vec<Option<usize>> = g
        .types()
        .iter()
        .map(|(_, op)| w.type_role_any(&op.name))
        .collect();
    for &t in g.node_types() {
        if let Some(r) = type_role[t.index()] {
            count[r] += 1;
        }
    }
    let (mut weights, mut outputs, mut records, mut arena) = (0u64, 0u64, 0u64, 0u64);
    for (ri, r) in w.roles.iter().enumerate() {
        let cell = cells.instantiate(&r.cell, hidden)?;
        let numel = |k: &dyn Fn(&ValueKind) -> bool| -> u64 {
            cell.values
                .iter()
                .filter(|v| k(&v.kind))
                .map(|v| v.numel() as u64)
                .sum()
        };
        weights += numel(&|k| matches!(k, ValueKind::Param)) * F32;
        let out: u64 = cell
            .outputs
            .iter()
            .map(|o| cell.values[o.0 as usize].numel() as u64)
            .sum();
        outputs = outputs.saturating_add(out * F32 * count[ri]);
        let per_instance = numel(&|k| !matches!(k, ValueKind::Param)) * F32;
        records = records.max(per_instance.saturating_mul(count[ri]));
        let ops = numel(&|k| matches!(k, ValueKind::Op { .. })) * F32;
        arena = arena.saturating_add(ops.saturating_mul(count[ri]));
    }
    let mut e = Estimate::default();
    e.add("weights", weights);
    e.add("packed weights", weights);
    e.add("node outputs", outputs);
    if shape.op_level {
        e.add("op-level arena", arena);
    } else {
        e.add("batch records and temporaries", records);
    }
    if shape.check {
        e.add("reference outputs for the check", outputs);
    }
    if shape.roofline {
        e.add("the roofline's weights", weights);
    }
    Ok(e)
}
