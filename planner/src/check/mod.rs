//! `planner check`: re-verify a layout file against its cell.
//!
//! The file is data from outside (hand-edited, produced by another version,
//! for another hidden size), so nothing in it is trusted: every size is
//! recomputed from the cell, every operand marked contiguous is re-checked
//! against the recorded offsets, every copy count is re-summed. The first
//! violation is reported naming the variable, batch and operand.

use engine::cells::Cell;
use thiserror::Error;

use crate::layout_file::{LayoutFile, TotalsEntry, VarKind, instance_stride};
use crate::problem::{DTYPE_BYTES, Var, cell_vars};
use crate::schedule::in_cell_signature;
use operand::OperandCtx;

mod operand;

/// Why a layout file does not fit its cell.
#[derive(Debug, Error)]
pub enum CheckError {
    /// The file is about another cell or hidden size than the one given.
    #[error("the layout is for {what} `{layout}` but the cell given is `{cell}`")]
    Mismatch {
        /// `cell` or `hidden`.
        what: &'static str,
        /// Value in the file.
        layout: String,
        /// Value of the cell.
        cell: String,
    },
    /// A top-level field is unusable.
    #[error("{field}: {reason}")]
    Field {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A variable entry is wrong.
    #[error("variable `{name}` (value {value}): {reason}")]
    Variable {
        /// Value id.
        value: usize,
        /// Name in the file.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A batch is wrong as a whole.
    #[error("batch {batch}: {reason}")]
    Batch {
        /// Batch index.
        batch: usize,
        /// What is wrong.
        reason: String,
    },
    /// An operand of a batch is wrong.
    #[error("batch {batch} ({ops}), {operand}: {reason}")]
    Operand {
        /// Batch index.
        batch: usize,
        /// Its op results, for orientation.
        ops: String,
        /// `arg N` or `result`.
        operand: String,
        /// What is wrong.
        reason: String,
    },
    /// A total disagrees with the schedule.
    #[error("totals.{field}: the file says {file} but its schedule gives {actual}")]
    Totals {
        /// The field.
        field: &'static str,
        /// Value in the file.
        file: u64,
        /// Recomputed value.
        actual: u64,
    },
}

/// What a successful check saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Batches.
    pub batches: usize,
    /// Operands and results of batches of two or more ops.
    pub operands: usize,
    /// Of these, verified contiguous and aligned.
    pub contiguous: usize,
    /// Of these, broadcasts.
    pub broadcasts: usize,
    /// Of these, gathers plus scatters (`contiguous + broadcasts + copies ==
    /// operands`).
    pub copies: usize,
}

/// Verifies `file` against `cell` (instantiated at the file's hidden size).
pub fn check_layout(file: &LayoutFile, cell: &Cell) -> Result<CheckReport, CheckError> {
    let field = |field, reason: String| CheckError::Field { field, reason };
    if file.cell != cell.name {
        return Err(CheckError::Mismatch {
            what: "cell",
            layout: file.cell.clone(),
            cell: cell.name.clone(),
        });
    }
    if file.hidden != cell.hidden {
        return Err(CheckError::Mismatch {
            what: "hidden size",
            layout: file.hidden.to_string(),
            cell: format!("{} at hidden {}", cell.name, cell.hidden),
        });
    }
    if file.dtype_bytes != DTYPE_BYTES {
        return Err(field(
            "dtype_bytes",
            format!("{} (only 4, f32, is supported)", file.dtype_bytes),
        ));
    }
    let vars = cell_vars(cell, file.batch).map_err(|e| field("batch", e.to_string()))?;
    let offsets = check_variables(file, cell, &vars)?;
    let mut report = CheckReport::default();
    let mut totals = TotalsEntry {
        batches: 0,
        gathers: 0,
        scatters: 0,
        memory_kernels: 0,
        copy_bytes: 0,
        broadcasts: 0,
        broadcast_bytes: 0,
        copy_bytes_per_instance_weights: 0,
        paper_kernels: 0,
        paper_bytes: 0,
        paper_bytes_per_instance_weights: 0,
    };
    let mut produced = vec![false; cell.ops.len()];
    for (b, entry) in file.schedule.iter().enumerate() {
        let bad = |reason: String| CheckError::Batch { batch: b, reason };
        if entry.ops.is_empty() {
            return Err(bad("no ops".into()));
        }
        for &o in &entry.ops {
            if o >= cell.ops.len() {
                return Err(bad(format!(
                    "op {o} out of range (cell has {})",
                    cell.ops.len()
                )));
            }
            if produced[o] {
                return Err(bad(format!("op {o} runs twice")));
            }
        }
        let sig = in_cell_signature(cell, entry.ops[0]);
        for &o in &entry.ops {
            let op = &cell.ops[o];
            if in_cell_signature(cell, o) != sig || op.kind != entry.op {
                return Err(bad(format!(
                    "op {o} ({}) does not match the batch's `{sig}`",
                    in_cell_signature(cell, o)
                )));
            }
            for a in &op.args {
                if let engine::cells::ValueKind::Op { index } = cell.values[a.index()].kind
                    && !produced[index as usize]
                {
                    return Err(bad(format!(
                        "op {o} reads `{}` before the batch computing it",
                        cell.values[a.index()].name
                    )));
                }
            }
        }
        if entry.signature != sig {
            return Err(bad(format!(
                "signature `{}` should be `{sig}`",
                entry.signature
            )));
        }
        let outs: Vec<&str> = entry
            .ops
            .iter()
            .map(|&o| cell.values[cell.ops[o].out.index()].name.as_str())
            .collect();
        if entry.outs != outs {
            return Err(bad(format!("outs {:?} should be {:?}", entry.outs, outs)));
        }
        let arity = cell.ops[entry.ops[0]].args.len();
        if entry.operands.len() != arity {
            return Err(bad(format!(
                "{} operands listed, the op takes {arity}",
                entry.operands.len()
            )));
        }
        let ctx = OperandCtx {
            cell,
            vars: &vars,
            offsets: &offsets,
            batch: b,
            ops_text: outs.join(", "),
            instances: file.batch as u64,
        };
        for (j, o) in entry.operands.iter().enumerate() {
            let expect: Vec<usize> = entry
                .ops
                .iter()
                .map(|&op| cell.ops[op].args[j].index())
                .collect();
            ctx.operand(
                o,
                &expect,
                &format!("arg {}", j + 1),
                false,
                &mut report,
                &mut totals,
            )?;
        }
        let expect: Vec<usize> = entry
            .ops
            .iter()
            .map(|&op| cell.ops[op].out.index())
            .collect();
        ctx.operand(
            &entry.result,
            &expect,
            "result",
            true,
            &mut report,
            &mut totals,
        )?;
        for &o in &entry.ops {
            produced[o] = true;
        }
        report.batches += 1;
        totals.batches += 1;
    }
    if let Some(o) = produced.iter().position(|&p| !p) {
        return Err(field(
            "schedule",
            format!(
                "op {o} (`{}`) is never run",
                cell.values[cell.ops[o].out.index()].name
            ),
        ));
    }
    totals.memory_kernels = totals.gathers + totals.scatters;
    totals.paper_kernels = totals.memory_kernels + totals.broadcasts;
    totals.paper_bytes = totals.copy_bytes + totals.broadcast_bytes;
    totals.paper_bytes_per_instance_weights =
        totals.copy_bytes_per_instance_weights + totals.broadcast_bytes;
    compare_totals(&file.totals, &totals)?;
    Ok(report)
}

/// Checks the variable table; returns offsets by value id.
fn check_variables(file: &LayoutFile, cell: &Cell, vars: &[Var]) -> Result<Vec<u64>, CheckError> {
    let n = cell.values.len();
    if file.variables.len() != n {
        return Err(CheckError::Field {
            field: "variables",
            reason: format!(
                "{} entries but cell `{}` has {n} values",
                file.variables.len(),
                cell.name
            ),
        });
    }
    let mut offsets = vec![u64::MAX; n];
    let mut at = 0u64;
    for e in &file.variables {
        let bad = |reason: String| CheckError::Variable {
            value: e.value,
            name: e.name.clone(),
            reason,
        };
        if e.value >= n || offsets[e.value] != u64::MAX {
            return Err(bad("value id out of range or listed twice".into()));
        }
        let info = &cell.values[e.value];
        let kind = match info.kind {
            engine::cells::ValueKind::Input { .. } => VarKind::Input,
            engine::cells::ValueKind::Param => VarKind::Param,
            engine::cells::ValueKind::Op { .. } => VarKind::Op,
        };
        if e.name != info.name || e.kind != kind {
            return Err(bad(format!(
                "the cell's value {} is `{}` ({kind:?})",
                e.value, info.name
            )));
        }
        if e.shape != info.shape {
            return Err(bad(format!(
                "shape {:?} in the layout but cell `{}` at hidden {} has {:?} (was the layout made for another hidden size?)",
                e.shape, cell.name, cell.hidden, info.shape
            )));
        }
        let want = vars[e.value].bytes;
        if e.bytes != want {
            return Err(bad(format!(
                "{} bytes in the layout but cell `{}` at hidden {}, batch {} needs {want} (was the layout made for another hidden or batch size?)",
                e.bytes, cell.name, cell.hidden, file.batch
            )));
        }
        if e.instance_stride != instance_stride(cell, e.value) {
            return Err(bad(format!(
                "instance_stride {} should be {}",
                e.instance_stride,
                instance_stride(cell, e.value)
            )));
        }
        if e.offset != at {
            return Err(bad(format!(
                "offset {} but the variables before it end at {at} (the arena is packed in listed order)",
                e.offset
            )));
        }
        offsets[e.value] = at;
        at = at
            .checked_add(want)
            .ok_or_else(|| bad("the arena size overflows 64 bits".into()))?;
    }
    if file.arena_bytes != at {
        return Err(CheckError::Field {
            field: "arena_bytes",
            reason: format!("{} but the variables take {at}", file.arena_bytes),
        });
    }
    Ok(offsets)
}

fn compare_totals(file: &TotalsEntry, actual: &TotalsEntry) -> Result<(), CheckError> {
    let pairs = [
        ("batches", file.batches, actual.batches),
        ("gathers", file.gathers, actual.gathers),
        ("scatters", file.scatters, actual.scatters),
        ("memory_kernels", file.memory_kernels, actual.memory_kernels),
        ("copy_bytes", file.copy_bytes, actual.copy_bytes),
        ("broadcasts", file.broadcasts, actual.broadcasts),
        (
            "broadcast_bytes",
            file.broadcast_bytes,
            actual.broadcast_bytes,
        ),
        (
            "copy_bytes_per_instance_weights",
            file.copy_bytes_per_instance_weights,
            actual.copy_bytes_per_instance_weights,
        ),
        ("paper_kernels", file.paper_kernels, actual.paper_kernels),
        ("paper_bytes", file.paper_bytes, actual.paper_bytes),
        (
            "paper_bytes_per_instance_weights",
            file.paper_bytes_per_instance_weights,
            actual.paper_bytes_per_instance_weights,
        ),
    ];
    for (field, f, a) in pairs {
        if f != a {
            return Err(CheckError::Totals {
                field,
                file: f,
                actual: a,
            });
        }
    }
    Ok(())
}
