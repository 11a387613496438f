//! The replay engine: executes a recorded trace with real kernels and measures
//! what batching buys (ED-Batch §5, Cavs §3.3).
//!
//! A [`Model`] gives every role of the trace's workload its cell and seeded
//! parameters; a [`Store`] holds every node's outputs in one arena; a
//! [`Session`] prepares an [`Executor`] on a device (the CPU backend is
//! [`cpu`], CUDA is `gpu`) and runs it as often as needed. `reference` runs
//! one node at a time (the numerical oracle); `cavs` batches every ready
//! vertex (rounds over types); `policy` runs any [`BatchPolicy`] — agenda,
//! typewise or a learned FSM — with Cavs-style gather/scatter at cell
//! borders; `edbatch` adds the planner's in-cell layouts; `dynet` batches
//! primitive ops.

pub mod check;
pub mod cpu;
// The session's CUDA side; without the feature, a stub that cannot be made.
#[cfg(feature = "cuda")]
mod cuda_backend;
#[cfg(not(feature = "cuda"))]
#[path = "cuda_backend_off.rs"]
mod cuda_backend;
pub mod expected;
#[cfg(feature = "cuda")]
pub mod gpu;
mod incell;
pub mod measure;
pub mod memory;
mod model;
pub mod run;
mod session;
mod store;
pub mod usage;
pub mod vpps;

use serde::Serialize;
use thiserror::Error;

pub use incell::{CellProgram, InCellCounts, LayoutMismatch};
pub use model::{Model, RoleModel};
pub use run::{BackwardSchedule, PassRun, TrainOptions, TrainRun};
pub use session::{Session, SessionOptions, device_present};
pub use store::Store;

use crate::cells::{CellError, CellLibrary};
use crate::sched::{BatchPolicy, CavsPolicy, PolicyError};
use crate::trace::Trace;
use crate::workloads::BindError;

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
    Expand(#[from] crate::workloads::ExpandError),
    /// The device failed (or is missing).
    #[error(transparent)]
    Device(#[from] crate::device::DeviceError),
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
    Weights(#[from] crate::modeldir::TensorsError),
    /// This executor does not train (yet).
    #[error(
        "the {0} executor does not run the backward pass; train with reference, cavs, policy or edbatch"
    )]
    NotForTraining(&'static str),
    /// The VPPS executor failed.
    #[error(transparent)]
    Vpps(#[from] vpps::VppsError),
    /// A backend was handed an executor of another kind than it was
    /// prepared for. [`Session`] borrows its executor at `open`, so this is
    /// a bug, never a user's error.
    #[error("internal error: {0} (a bug in batchlab: please report it)")]
    Internal(&'static str),
}

/// Work counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Batches executed.
    pub batches: u64,
    /// Kernels launched (cell ops plus gather/scatter kernels).
    pub kernels: u64,
    /// Bytes copied into batch inputs.
    pub bytes_gathered: u64,
    /// Bytes copied out of batch outputs.
    pub bytes_scattered: u64,
}

impl Counters {
    /// Adds what one chunk of a batch's rows did: its bytes always, its
    /// batch and kernels only for the first chunk (a batch is one launch
    /// however the CPU splits its rows).
    pub(crate) fn add_chunk(&mut self, part: &Counters, first: bool) {
        if first {
            self.batches += part.batches;
            self.kernels += part.kernels;
        }
        self.bytes_gathered += part.bytes_gathered;
        self.bytes_scattered += part.bytes_scattered;
    }
}

/// Timing split of one run (ED-Batch Fig. 9), in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeSplit {
    /// Building the run's structures (model binding, arena, same-type DAG).
    pub construction: f64,
    /// Choosing batches (the policy, frontier updates).
    pub scheduling: f64,
    /// Running kernels and copies.
    pub execution: f64,
    /// The part of scheduling that ran while execution waited for a worker
    /// thread (CPU, two or more threads: the policy decides ahead of the
    /// batches, see `replay::cpu`), so it added next to no wall time;
    /// `execution` is net of it, and the three parts above add up to the
    /// run's wall time. 0 where nothing overlaps.
    pub overlapped: f64,
}

/// The executors of this module.
pub enum Executor {
    /// One node at a time in topological order, no batching: the oracle.
    Reference,
    /// Cavs: every ready vertex, type by type in rounds.
    Cavs,
    /// Any batching policy at the instance level (agenda, typewise, FSM...).
    Policy(Box<dyn BatchPolicy + Send>),
    /// DyNet without static subgraphs: primitive ops batched by the policy
    /// (agenda or depth), gathers around every batched op.
    Dynet(Box<dyn BatchPolicy + Send>),
    /// ED-Batch: cells batched by the policy (the learned FSM), each cell run
    /// by the in-cell schedule and memory order of its layout (per role; a role
    /// without a program runs op by op as in `Policy`).
    EdBatch(Box<dyn BatchPolicy + Send>, Vec<Option<CellProgram>>),
    /// VPPS (CUDA only): batches chosen by the policy, compiled into a script
    /// that one persistent kernel runs with the weights on chip
    /// ([`vpps`]).
    Vpps(Box<dyn BatchPolicy + Send>, vpps::VppsOptions),
}

/// Compiles layout files (`(source, file)`) into per-role programs: each role
/// gets the file of its cell, if any. A file for a cell no role uses is
/// ignored; a file at another hidden size, or inconsistent with its cell, is an
/// error naming it.
pub fn compile_layouts(
    model: &Model,
    files: &[(String, crate::layout::LayoutFile)],
) -> Result<Vec<Option<CellProgram>>, ReplayError> {
    model
        .roles
        .iter()
        .map(|rm| {
            files
                .iter()
                .find(|(_, f)| f.cell == rm.cell.name)
                .map(|(src, f)| CellProgram::new(f, rm, src))
                .transpose()
                .map_err(ReplayError::Layout)
        })
        .collect()
}

/// What one run measured. The node outputs stay in the session
/// ([`Session::outputs`]); [`replay`] returns them beside.
pub struct Replayed {
    /// Work counters.
    pub counters: Counters,
    /// Time split.
    pub time: TimeSplit,
    /// Fallback decisions of the policy (FSM misses).
    pub misses: u64,
    /// GPU time between the run's first and last kernel (CUDA events); `None`
    /// on the CPU.
    pub device_s: Option<f64>,
    /// Process CPU time and minor page faults during the run.
    pub usage: Option<usage::Usage>,
}

/// The instance-level policy an executor batches with (`None` for the
/// reference, which runs one node at a time, and for DyNet, which batches ops),
/// and its per-role in-cell programs (ED-Batch only).
pub(crate) fn instance_policy<'a>(
    executor: &'a mut Executor,
    cavs: &'a mut CavsPolicy,
) -> (Option<&'a mut dyn BatchPolicy>, &'a [Option<CellProgram>]) {
    match executor {
        Executor::Reference | Executor::Dynet(_) => (None, &[]),
        Executor::Cavs => (Some(cavs), &[]),
        Executor::Policy(p) => (Some(p.as_mut()), &[]),
        Executor::EdBatch(p, progs) => (Some(p.as_mut()), progs.as_slice()),
        Executor::Vpps(p, _) => (Some(p.as_mut()), &[]),
    }
}

/// Builds the model of `trace` (cells and seeded weights).
pub fn model(trace: &Trace, cells: &CellLibrary, seed: u64) -> Result<Model, ReplayError> {
    Model::new(trace, cells, seed)
}

/// Runs `trace` once with `executor` on the CPU in a fresh session (default
/// options) and returns the measurements and every node's outputs. Repeated
/// runs belong in a [`Session`], which reuses its buffers.
pub fn replay(
    trace: &Trace,
    model: &Model,
    cells: &CellLibrary,
    executor: &mut Executor,
) -> Result<(Replayed, Store), ReplayError> {
    let mut s = Session::open(
        crate::device::DeviceKind::Cpu,
        trace,
        model,
        cells,
        executor,
    )?;
    let r = s.run()?;
    Ok((r, s.into_outputs()))
}

/// Normwise relative difference of two tensors: ‖a − b‖∞ / max(‖b‖∞, 1e-6)
/// (`b` is the reference).
pub fn rel_error(a: &[f32], b: &[f32]) -> f64 {
    let diff = a
        .iter()
        .zip(b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0f32, f32::max);
    let norm = b.iter().map(|q| q.abs()).fold(0.0f32, f32::max).max(1e-6);
    f64::from(diff / norm)
}

/// Largest normwise relative difference between two runs' node outputs:
/// max over nodes of [`rel_error`].
pub fn max_rel_error(trace: &Trace, a: &Store, b: &Store) -> f64 {
    trace
        .graph
        .nodes()
        .map(|v| rel_error(a.node(v), b.node(v)))
        .fold(0.0, f64::max)
}

/// Largest normwise relative difference between two sets of parameter
/// gradients (per role, per cell value, as [`Session::gradients`] returns
/// them): max over tensors of [`rel_error`].
pub fn max_rel_error_gradients(got: &[Vec<Vec<f32>>], want: &[Vec<Vec<f32>>]) -> f64 {
    worst_gradient(got, want).0
}

/// The tensor where two sets of parameter gradients differ most:
/// `(rel_error, role, value)` (`(0, 0, 0)` when they have no tensors).
pub fn worst_gradient(got: &[Vec<Vec<f32>>], want: &[Vec<Vec<f32>>]) -> (f64, usize, usize) {
    let mut worst = (0.0, 0, 0);
    for (role, (g, w)) in got.iter().zip(want).enumerate() {
        for (value, (g, w)) in g.iter().zip(w).enumerate() {
            let e = rel_error(g, w);
            if e > worst.0 {
                worst = (e, role, value);
            }
        }
    }
    worst
}

/// A training step checked against the reference executor's (CPU, one node
/// at a time, the backward in reverse forward order): the oracle every
/// executor's `--train` run is judged by.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TrainCheck {
    /// |loss − reference loss| / |reference loss|.
    pub loss_rel_error: f64,
    /// [`max_rel_error`] of every node's outputs.
    pub max_rel_error_outputs: f64,
    /// [`max_rel_error_gradients`] of every parameter gradient.
    pub max_rel_error_gradients: f64,
}

impl TrainCheck {
    /// The worst of the three.
    pub fn worst(&self) -> f64 {
        self.loss_rel_error
            .max(self.max_rel_error_outputs)
            .max(self.max_rel_error_gradients)
    }
}

/// Checks the last training step of `session` (loss `loss`) against a
/// reference step on the CPU of the same trace, model and cells. A session that keeps no gradients is
/// [`ReplayError::NotForTraining`].
pub fn check_train(session: &Session<'_>, loss: f64) -> Result<TrainCheck, ReplayError> {
    let got = session.gradients().ok_or(ReplayError::NotForTraining(
        "this session (no gradients kept)",
    ))?;
    let (trace, model, cells) = (session.trace(), session.model(), session.cells());
    let mut ex = Executor::Reference;
    let mut r = Session::open(crate::device::DeviceKind::Cpu, trace, model, cells, &mut ex)?;
    let run = r.train(BackwardSchedule::ReverseForward, &Default::default())?;
    let want = r
        .gradients()
        .ok_or(ReplayError::NotForTraining("the reference"))?;
    Ok(TrainCheck {
        loss_rel_error: ((loss - run.loss) / run.loss.abs().max(1e-30)).abs(),
        max_rel_error_outputs: max_rel_error(trace, session.outputs(), r.outputs()),
        max_rel_error_gradients: max_rel_error_gradients(&got, &want),
    })
}

#[cfg(test)]
pub(crate) mod tests;
