//! # engine-replay — batchlab's executors, devices and training over the cell IR
//!
//! Executes a recorded trace ([`engine_core::trace`]) with real kernels and
//! measures it: the reference, DyNet, Cavs, policy, ED-Batch and VPPS
//! executors ([`replay`]) on the CPU or CUDA behind one device seam
//! ([`device`]), forward and backward; training loops and checkpoints over
//! them ([`train`]); a trace's model and program for other frameworks
//! ([`export`]). Users normally reach it through the `engine` crate, which
//! re-exports these modules (and `engine-core`'s) under the same names.
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
//! use engine_replay::replay::{self, Executor};
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
//! let model = replay::model(&trace, &cells, 7)?;
//! let (cavs, out) = replay::replay(&trace, &model, &cells, &mut Executor::Cavs)?;
//! let (one_by_one, reference) = replay::replay(&trace, &model, &cells, &mut Executor::Reference)?;
//! assert!(cavs.counters.batches < one_by_one.counters.batches);
//! assert!(replay::max_rel_error(&trace, &out, &reference) < 1e-4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod device;
pub mod export;
pub mod replay;
pub mod train;

// The core's modules under the names the replay's code has always used
// (`crate::cells`, `crate::trace`, ...): the split moved files, not paths.
use engine_core::{cells, data, graph, io, layout, memory, modeldir, sched, trace, workloads};
