//! The layout file (`batchlab-layout`, version 1; `docs/layout-format.md`).
//!
//! It carries everything the replay engine needs to run a cell's batches out
//! of one arena without re-planning: the in-cell schedule with each batch's
//! op execution order, every variable's offset and size, and per operand
//! the access plan with addresses and strides. Field order is fixed by the
//! structs, so equal plans give byte-identical files.

use std::path::Path;

use engine::cells::{Cell, PrimOp, ValueKind};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cost::{Access, OperandCost, Totals};
use crate::plan::{Allocation, CellPlan};
use crate::problem::{DTYPE_BYTES, Problem};
use crate::schedule::in_cell_signature;

/// Value of the `format` field.
pub const FORMAT: &str = "batchlab-layout";
/// Value of the `version` field this crate writes and reads.
pub const VERSION: u32 = 1;

/// Which allocation a file describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocationKind {
    /// The planner's layout.
    Planned,
    /// DyNet-style declaration order (the baseline).
    Dynet,
}

/// Where a variable comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VarKind {
    /// A port input (one row per instance).
    Input,
    /// A parameter (stored once).
    Param,
    /// An op result (one row per instance).
    Op,
}

/// Access plan of one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanKind {
    /// Read or written in place.
    Contiguous,
    /// One variable read by every op with op stride 0.
    Broadcast,
    /// Gathered into a temporary first.
    Gather,
    /// Written to a temporary, then scattered.
    Scatter,
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutFile {
    /// Always `batchlab-layout`.
    pub format: String,
    /// Always 1.
    pub version: u32,
    /// Cell name (instantiate it at `hidden` to run the file).
    pub cell: String,
    /// Hidden size.
    pub hidden: usize,
    /// Instances per batch (rows of every non-parameter variable).
    pub batch: usize,
    /// Planned or baseline.
    pub allocation: AllocationKind,
    /// Bytes per element (4: f32).
    pub dtype_bytes: u64,
    /// Total arena bytes.
    pub arena_bytes: u64,
    /// Every variable once, in memory order.
    pub variables: Vec<VariableEntry>,
    /// Batches in execution order.
    pub schedule: Vec<BatchEntry>,
    /// Sums over the schedule.
    pub totals: TotalsEntry,
}

/// One variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariableEntry {
    /// Value id in the cell.
    pub value: usize,
    /// Value name.
    pub name: String,
    /// Origin.
    pub kind: VarKind,
    /// Shape of one instance's tensor.
    pub shape: Vec<usize>,
    /// Byte offset in the arena.
    pub offset: u64,
    /// Bytes occupied.
    pub bytes: u64,
    /// Bytes between consecutive instances' rows (0 for a parameter).
    pub instance_stride: u64,
}

/// One batched op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchEntry {
    /// Primitive op of every op in the batch.
    pub op: PrimOp,
    /// In-cell signature shared by the ops.
    pub signature: String,
    /// Op indices in execution order.
    pub ops: Vec<usize>,
    /// Their result names, same order.
    pub outs: Vec<String>,
    /// One per argument position.
    pub operands: Vec<OperandEntry>,
    /// The results.
    pub result: OperandEntry,
}

/// One operand of a batch: entry `i` belongs to op `ops[i]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperandEntry {
    /// Value ids.
    pub values: Vec<usize>,
    /// Value names.
    pub names: Vec<String>,
    /// Arena offsets of the values.
    pub offsets: Vec<u64>,
    /// Access plan.
    pub plan: PlanKind,
    /// Bytes gathered or scattered (0 unless `gather` / `scatter`).
    pub bytes: u64,
    /// Bytes DyNet would copy to materialise a per-instance broadcast.
    pub broadcast_bytes: u64,
    /// Bytes from one op's block to the next (0 for a broadcast); for a
    /// gather or scatter, in the packed temporary.
    pub op_stride: u64,
    /// Bytes from one instance's row to the next (0 for parameters).
    pub instance_stride: u64,
}

/// Totals (see `docs/layout-format.md` for each field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct TotalsEntry {
    pub batches: u64,
    pub gathers: u64,
    pub scatters: u64,
    pub memory_kernels: u64,
    pub copy_bytes: u64,
    pub broadcasts: u64,
    pub broadcast_bytes: u64,
    pub copy_bytes_per_instance_weights: u64,
    pub paper_kernels: u64,
    pub paper_bytes: u64,
    pub paper_bytes_per_instance_weights: u64,
}

impl From<&Totals> for TotalsEntry {
    fn from(t: &Totals) -> Self {
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
}

/// Why a layout file could not be read or written.
#[derive(Debug, Error)]
pub enum LayoutFileError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not valid JSON for this format.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// `format` or `version` is not ours.
    #[error("{path}: not a {FORMAT} version {VERSION} file (format `{format}`, version {version})")]
    Format {
        /// The file.
        path: String,
        /// Its `format`.
        format: String,
        /// Its `version`.
        version: u32,
    },
}

impl LayoutFile {
    /// The planned layout of `plan`.
    ///
    /// # Panics
    /// If `cell` is not the cell `plan` was made from (a caller bug: value
    /// and op ids would not match).
    pub fn planned(cell: &Cell, plan: &CellPlan) -> LayoutFile {
        let alloc = &plan.planned.planned;
        build(cell, plan, &plan.problem, alloc, AllocationKind::Planned)
    }

    /// The DyNet baseline of `plan`.
    ///
    /// # Panics
    /// If `cell` is not the cell `plan` was made from.
    pub fn baseline(cell: &Cell, plan: &CellPlan) -> LayoutFile {
        build(
            cell,
            plan,
            &plan.problem,
            &plan.baseline,
            AllocationKind::Dynet,
        )
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Plain structs of strings and integers always serialize.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Writes the file atomically.
    pub fn write(&self, path: &Path) -> Result<(), LayoutFileError> {
        engine::io::write_atomic(path, self.to_json().as_bytes()).map_err(|source| {
            LayoutFileError::Io {
                path: path.display().to_string(),
                source,
            }
        })
    }

    /// Parses `text`; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<LayoutFile, LayoutFileError> {
        let file: LayoutFile = serde_json::from_str(text).map_err(|e| LayoutFileError::Parse {
            path: path.to_owned(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        if file.format != FORMAT || file.version != VERSION {
            return Err(LayoutFileError::Format {
                path: path.to_owned(),
                format: file.format,
                version: file.version,
            });
        }
        Ok(file)
    }

    /// Reads and parses a file.
    pub fn read(path: &Path) -> Result<LayoutFile, LayoutFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| LayoutFileError::Io {
            path: shown.clone(),
            source,
        })?;
        LayoutFile::parse(&text, &shown)
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
        totals: TotalsEntry::from(&alloc.eval.totals),
    }
}
