//! Why a replay fails: [`ReplayError`], one error over every executor,
//! backend and device, wrapping the core's, the device's and VPPS's own, and
//! [`LayoutMismatch`], a layout file that cannot drive its cell.

use thiserror::Error;

use crate::backend::vpps::VppsError;
use crate::cells::CellError;
use crate::device::DeviceError;
use crate::modeldir::TensorsError;
use crate::sched::PolicyError;
use crate::workloads::{BindError, ExpandError};

/// Replay failures.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// The trace's workload is neither one of the zoo nor defined by a model
    /// folder, so its types have no cells.
    #[error(
        "trace workload {0:?} has no cell definitions: replay needs a trace recorded by `engine record` (see `engine workloads`), or a model folder (--model DIR, docs/torch.md)"
    )]
    NoCells(String),
    /// Neither `meta.hidden` nor the type names give the hidden size.
    #[error("the trace gives no hidden size (meta.hidden, or `[h=N]` in type names)")]
    NoHidden,
    /// A type is not a role of the workload.
    #[error("type {type_name:?} is not a role of workload {workload}")]
    UnknownType {
        /// Type name.
        type_name: String,
        /// Workload.
        workload: String,
    },
    /// A type's hidden size differs from the trace's.
    #[error("type {type_name:?} does not have the trace's hidden size {hidden}")]
    HiddenMismatch {
        /// Type name.
        type_name: String,
        /// Expected hidden size.
        hidden: usize,
    },
    /// A cell failed to instantiate.
    #[error(transparent)]
    Cell(#[from] CellError),
    /// A node's arguments do not fit its cell.
    #[error("node {node}: {source}")]
    Bind {
        /// Node.
        node: u32,
        /// Cause.
        source: BindError,
    },
    /// A node's recorded data (trace `data` field) does not fit its cell.
    #[error("node {node}: field `data`: {message}")]
    NodeData {
        /// Node.
        node: u32,
        /// What is wrong.
        message: String,
    },
    /// The batching policy failed.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A layout file does not fit the trace's cells.
    #[error(transparent)]
    Layout(#[from] LayoutMismatch),
    /// Expanding the trace to primitive ops failed.
    #[error(transparent)]
    Expand(#[from] ExpandError),
    /// The device failed (or is missing).
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The worker threads could not be started.
    #[error("cannot start the replay's worker threads: {0}")]
    Threads(String),
    /// Training needs a loss: the workload has no loss-sum node.
    #[error(
        "workload {0} has no loss (no loss.sum node, or, in a model folder, no scalar output nothing reads): nothing to train"
    )]
    NoLoss(String),
    /// A model folder's weights file lacks a parameter or has it misshapen.
    #[error(transparent)]
    Weights(#[from] TensorsError),
    /// This executor does not train (yet).
    #[error(
        "the {0} executor does not run the backward pass; train with reference, cavs, policy or edbatch"
    )]
    NotForTraining(&'static str),
    /// The VPPS executor failed.
    #[error(transparent)]
    Vpps(#[from] VppsError),
    /// A backend was handed an executor of another kind than it was
    /// prepared for. [`Session`](crate::session::Session) borrows its executor at `open`, so this is
    /// a bug, never a user's error.
    #[error("internal error: {0} (a bug in batchlab: please report it)")]
    Internal(&'static str),
}

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
