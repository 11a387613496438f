//! # planner — aligned memory layouts for static subgraphs (ED-Batch §3)
//!
//! A cell (static subgraph, `engine::cells`) run over `B` instances executes
//! each of its ops as a batched kernel, and several ops of the cell with the
//! same signature (the four LSTM gate affines) can share one kernel. A
//! batched kernel from a vendor library wants each operand as one strided
//! block: the `k` variables it reads at an argument position must lie back
//! to back in the same op order as the other operands. Where they do not,
//! DyNet-style runtimes gather them into a temporary (and scatter results
//! back) — ED-Batch Table 2 measures up to 66× fewer bytes copied by laying
//! the variables out so that no such copy is needed. This crate computes
//! those layouts offline and counts what remains.
//!
//! ## Pipeline ([`plan_cell`])
//!
//! 1. **In-cell batching** ([`schedule`]): exhaustive search over ED-Batch
//!    Algorithm 1 sequences on the cell's op DAG (lower-bound pruning,
//!    memoisation) for the minimum number of batches, enumerating every
//!    minimum schedule up to a cap.
//! 2. **Alignment** ([`align`]): for each schedule, a PQ-tree
//!    ([`pqtree`], Booth–Lueker) over all variables takes each operand as a
//!    consecutive-set constraint; BROADCASTCONSTRAINT makes the operands of a
//!    batch isomorphic subtrees; DECIDENODESORDER fixes Q-node directions and
//!    P-node permutations with a union–find; a depth-first walk yields the
//!    variable order.
//! 3. **Copy accounting** ([`cost`]): every operand is checked against the
//!    order actually produced — contiguous and aligned, broadcast, or
//!    gathered / scattered — so the counts are truthful even where the
//!    alignment had to give up. The schedule whose layout copies least wins;
//!    the DyNet allocation (values in declaration order) on the same schedule
//!    is the baseline.
//! 4. **Layout file** ([`layout_file`], `docs/layout-format.md`): the schedule,
//!    offsets and per-operand copy plan for the replay engine, re-verified
//!    by [`check`].
//!
//! ## Example
//!
//! ```
//! use engine::cells::CellLibrary;
//! use planner::{PlanOptions, plan_cell};
//!
//! let lib = CellLibrary::builtin()?;
//! let lstm = lib.instantiate("lstm", 64)?;
//! let plan = plan_cell(&lstm, 8, &PlanOptions::default())?;
//! // 7 batches: the four gate affines run as one kernel.
//! assert_eq!(plan.schedule().len(), 7);
//! assert!(plan.schedule().contains(&vec![0, 1, 2, 3]));
//! // DyNet's declaration-order layout gathers the interleaved gate weights...
//! assert!(plan.baseline.eval.totals.copy_bytes > 128 * 1024);
//! // ...the planned layout needs no gather or scatter at all; what is left
//! // is reading x and h_prev with stride 0 (2 operands × 4 gates × 2 kB).
//! assert_eq!(plan.planned.planned.eval.totals.copy_bytes, 0);
//! assert_eq!(plan.planned.planned.eval.totals.broadcast_bytes, 16 * 1024);
//!
//! // The layout file round-trips through the checker.
//! let file = planner::layout_file::planned_file(&lstm, &plan);
//! planner::check::check_layout(&file, &lstm)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod align;
pub mod check;
pub mod cost;
pub mod error;
pub mod explain;
pub mod layout;
pub mod layout_file;
mod plan;
pub mod pqtree;
pub mod problem;
pub mod schedule;

pub use error::PlanError;
pub use layout::Layout;
pub use layout_file::LayoutFile;
pub use plan::{
    Allocation, CellPlan, LayoutSource, PlanOptions, ProblemPlan, plan_cell, plan_problem,
};
pub use problem::{BatchSpec, Problem, Var};
