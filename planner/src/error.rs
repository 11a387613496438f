//! Errors of the planning library (the `planner` binary wraps them in `anyhow`).
//!
//! Every variant names the item at fault (cell, batch, operand, variable) so a
//! message is actionable without a debugger.

use engine::cells::CellError;
use thiserror::Error;

/// Why a cell or a batching problem could not be planned.
#[derive(Debug, Error)]
pub enum PlanError {
    /// The cell could not be loaded or instantiated (unknown name, bad file).
    #[error(transparent)]
    Cell(#[from] CellError),
    /// `batch` was 0: a layout over zero instances means nothing.
    #[error("batch size must be at least 1")]
    ZeroBatch,
    /// Some size or offset does not fit in 64 bits.
    #[error("{what} overflows 64 bits (batch {batch})")]
    TooLarge {
        /// Which quantity overflowed.
        what: String,
        /// The batch size used.
        batch: usize,
    },
    /// A hand-built [`Problem`](crate::Problem) is malformed.
    #[error("problem batch {batch}: {reason}")]
    InvalidProblem {
        /// Index of the offending batch (or the variable count for a bad variable).
        batch: usize,
        /// What is wrong.
        reason: String,
    },
}
