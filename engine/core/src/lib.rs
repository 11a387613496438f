//! # engine-core — batchlab's graph IR, traces, cells, workloads and runtime policies
//!
//! The bottom of the pipeline: everything else depends on it, and it depends
//! on none of batchlab's other crates. Users normally reach it through the
//! `engine` crate, which re-exports every module here under the same name.
//!
//! - [`cells`]: cells (static subgraphs) as YAML data, instantiated at a
//!   hidden size; [`workloads`]: the zoo (roles, data, the builder that
//!   unrolls a sample) and the recorder that turns a mini-batch of real
//!   samples into a [`trace`] (an operator-typed dataflow graph, [`graph`]).
//! - [`sched`]: the frontier, state encodings and the runtime batching
//!   policies (heuristics and the FSM lookup); [`layout`]: memory layout
//!   files, which the replay consumes and `planner` writes.
//! - [`modeldir`]: model folders, models recorded outside batchlab (from
//!   PyTorch by `batchlab_torch`): their manifest, cells, trace and
//!   safetensors weights, checked as a whole.
//! - [`memory`]: what a record or a replay may allocate, against what the
//!   machine can give; [`dot`]: the one Graphviz writer; [`io`], [`tool`],
//!   [`fieldpath`], [`yaml`]: what the command-line tools share (atomic
//!   writes, exit codes, errors that name the field).
//!
//! Record a TreeLSTM mini-batch of real SST trees and batch it by depth:
//!
//! ```
//! use engine_core::cells::CellLibrary;
//! use engine_core::graph::stats;
//! use engine_core::sched::{DepthPolicy, SameTypeDag, run_policy};
//! use engine_core::trace::Level;
//! use engine_core::workloads::{self, DataChoice, RecordOptions};
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
//! let s = stats(&trace.graph);
//! let same_type = SameTypeDag::new(&trace.graph);
//! let (_, run) = run_policy(&trace.graph, &same_type, &mut DepthPolicy::default())?;
//! assert!(s.lower_bound as u64 <= run.batches && run.batches <= s.nodes as u64);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod alloc;
pub mod cells;
pub mod data;
pub mod dot;
pub mod fieldpath;
pub mod graph;
pub mod io;
pub mod layout;
pub mod memory;
pub mod modeldir;
pub mod sched;
pub mod tool;
pub mod trace;
pub mod workloads;
pub mod yaml;
