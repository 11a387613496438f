//! The layout file (`batchlab-layout`, version 1; `docs/layout-format.md`): the
//! planner's output and the replay engine's input. It carries everything needed
//! to run a cell's batches out of one arena without re-planning: the in-cell
//! schedule with each batch's op execution order, every variable's offset and
//! size, and per operand the access plan with addresses and strides. The format
//! lives here, in the crate that consumes it (as policy files do); `planner`
//! writes it. Field order is fixed by the structs, so equal plans give
//! byte-identical files.

use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cells::PrimOp;

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
    /// The file is another batchlab file (a policy, a trace...).
    #[error(
        "{path}: this is a {found} file, not a layout: expected the JSON layout file (format {FORMAT}) that `planner layout --out` writes"
    )]
    WrongKind {
        /// The file.
        path: String,
        /// The format it declares.
        found: String,
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
    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Plain structs of strings and integers always serialize.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Writes the file atomically.
    pub fn write(&self, path: &Path) -> Result<(), LayoutFileError> {
        crate::io::write_atomic(path, self.to_json().as_bytes()).map_err(|source| {
            LayoutFileError::Io {
                path: path.display().to_string(),
                source,
            }
        })
    }

    /// Parses `text`; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<LayoutFile, LayoutFileError> {
        let file: LayoutFile = serde_json::from_str(text).map_err(|e| {
            match crate::fieldpath::declared_format(text) {
                Some(found) if found != FORMAT => LayoutFileError::WrongKind {
                    path: path.to_owned(),
                    found,
                },
                _ => {
                    let json = text.trim_start().starts_with('{');
                    let hint = if json {
                        ""
                    } else {
                        " (a layout file is a JSON object written by `planner layout --out`)"
                    };
                    LayoutFileError::Parse {
                        path: path.to_owned(),
                        line: e.line(),
                        column: e.column(),
                        message: format!("{}{hint}", crate::fieldpath::json_message(&e, text)),
                    }
                }
            }
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
        let text = crate::io::read_to_string(path).map_err(|source| LayoutFileError::Io {
            path: shown.clone(),
            source,
        })?;
        LayoutFile::parse(&text, &shown)
    }
}
