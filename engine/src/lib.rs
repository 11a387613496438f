//! # engine — batchlab's graph IR, traces, cells, workloads, runtime policies and replay
//!
//! The bottom of the pipeline (`docs/`, `ARCHITECTURE.md`): everything else
//! depends on it, and it depends on none of the other crates. It is one
//! library over two workspace members under `engine/`: `engine-core`
//! (`engine/core`: the IR, traces, cells, workloads, policies, layouts) and
//! `engine-replay` (`engine/replay`: the executors, devices, training and
//! export), re-exported module by module under the names below, plus the
//! `engine` command. Why the replay is its own crate: `engine-replay`'s
//! overview.
//!
//! - [`cells`]: cells (static subgraphs) as YAML data, instantiated at a
//!   hidden size; [`workloads`]: the zoo (roles, data, the builder that
//!   unrolls a sample) and the recorder that turns a mini-batch of real
//!   samples into a [`trace`] (an operator-typed dataflow graph, [`graph`]).
//! - [`sched`]: the frontier, state encodings and the runtime batching
//!   policies (heuristics and the FSM lookup); [`layout`]: memory layout
//!   files, which the engine consumes and `planner` writes.
//! - [`session`]: executes a trace with real kernels on the CPU or CUDA
//!   ([`device`], [`backend`]) with the reference, DyNet, Cavs, policy,
//!   ED-Batch and VPPS executors ([`executor`]) and the trace's [`model`],
//!   and [`measure`]s them (the replay's other modules — [`run`], [`store`],
//!   [`incell`], [`compare`], [`check`], [`expected`], [`usage`],
//!   [`error`] — are in `engine-replay`'s overview); [`memory`] refuses a
//!   record or a replay whose estimate (a replay's: [`footprint`]) the
//!   machine cannot hold.
//! - [`export`]: a trace's model and program for other frameworks;
//!   [`dot`]: the one Graphviz writer; [`io`], [`tool`], [`fieldpath`],
//!   [`yaml`]: what the command-line tools share (atomic writes, exit codes,
//!   errors that name the field).
//!
//! Record a TreeLSTM mini-batch of real SST trees, then replay it with the
//! Cavs executor and check it against the unbatched reference:
//!
//! ```
//! use engine::cells::CellLibrary;
//! use engine::graph::stats;
//! use engine::compare::max_rel_error;
//! use engine::executor::Executor;
//! use engine::trace::Level;
//! use engine::workloads::{self, DataChoice, RecordOptions};
//! use engine::{model, session};
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
//! assert!(s.lower_bound <= s.nodes);
//!
//! let model = model::model(&trace, &cells, 7)?;
//! let (cavs, out) = session::replay(&trace, &model, &cells, &mut Executor::Cavs)?;
//! let (one_by_one, reference) = session::replay(&trace, &model, &cells, &mut Executor::Reference)?;
//! assert!(cavs.counters.batches < one_by_one.counters.batches);
//! assert!(max_rel_error(&trace, &out, &reference) < 1e-4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub use engine_core::{
    alloc, cells, data, dot, fieldpath, flag_range_test, graph, io, layout, memory, modeldir,
    outln, sched, tool, trace, workloads, yaml,
};
pub use engine_replay::{
    backend, check, compare, device, error, executor, expected, export, footprint, incell, measure,
    model, run, session, store, train, usage,
};
