//! # engine-replay — batchlab's executors, devices and training over the cell IR
//!
//! Executes a recorded trace ([`engine_core::trace`]) with real kernels and
//! measures it, forward and backward. A [`Session`](session::Session)
//! prepares an [`Executor`](executor::Executor) — reference, DyNet, Cavs,
//! policy, ED-Batch or VPPS — for a trace and its [`model`] on a device
//! ([`device`]), and runs it on a [`backend`] (CPU, CUDA, VPPS); every pass,
//! on every backend, walks its batches with [`run`]'s schedule walker into
//! the node [`store`]. Around them: the cells' in-cell programs
//! ([`incell`]), the timing protocol ([`measure`], [`usage`]), the checks
//! against the reference executor, a float64 oracle and a model folder's
//! expected tensors ([`compare`], [`check`], [`expected`]), a run's memory
//! estimate ([`footprint`]) and its errors ([`error`]); training loops and
//! checkpoints over sessions ([`train`]); a trace's model and program for
//! other frameworks ([`export`]). Users normally reach it through the
//! `engine` crate, which re-exports these modules (and `engine-core`'s) under
//! the same names.
//!
//! Why a crate of its own: the replay grew to half of the engine (training,
//! then VPPS's placement, script compiler, emulator and kernel generator), and
//! its CPU GEMM, CUDA backend and tests change far more often than the IR,
//! traces and policies that `search` and `planner` build on. Split, those two
//! compile against `engine-core` alone, and a change to a kernel rebuilds only
//! this crate and what sits above it.
//!
//! Replay a TreeLSTM mini-batch with the Cavs executor and check it against
//! the unbatched reference:
//!
//! ```
//! use engine_core::cells::CellLibrary;
//! use engine_core::trace::Level;
//! use engine_core::workloads::{self, DataChoice, RecordOptions};
//! use engine_replay::compare::max_rel_error;
//! use engine_replay::executor::Executor;
//! use engine_replay::{model, session};
//!
//! let cells = CellLibrary::builtin()?;
//! let trace = workloads::record(
//!     &RecordOptions {
//!         workload: workloads::workload("tree-lstm").unwrap(),
//!         data: DataChoice::Default,
//!         batch: 4,
//!         hidden: 16,
//!         level: Level::Cell,
//!         seed: 1,
//!     },
//!     &cells,
//! )?;
//! let model = model::model(&trace, &cells, 7)?;
//! let (cavs, out) = session::replay(&trace, &model, &cells, &mut Executor::Cavs)?;
//! let (one_by_one, reference) = session::replay(&trace, &model, &cells, &mut Executor::Reference)?;
//! assert!(cavs.counters.batches < one_by_one.counters.batches);
//! assert!(max_rel_error(&trace, &out, &reference) < 1e-4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod backend;
pub mod check;
pub mod compare;
pub mod device;
pub mod error;
pub mod executor;
pub mod expected;
pub mod export;
pub mod footprint;
pub mod incell;
pub mod measure;
pub mod model;
pub mod run;
pub mod session;
pub mod store;
pub mod train;
pub mod usage;

#[cfg(test)]
pub(crate) mod tests;

// The core's modules under the names the replay's code has always used
// (`crate::cells`, `crate::trace`, ...): the split moved files, not paths.
use engine_core::{cells, data, graph, io, layout, memory, modeldir, sched, trace, workloads};
