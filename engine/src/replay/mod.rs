//! The replay engine: executes a recorded trace with real kernels and measures
//! what batching buys (ED-Batch §5, Cavs §3.3).
//!
//! A [`Model`] gives every role of the trace's workload its cell and seeded
//! parameters; a [`Store`] holds every node's outputs in one arena; executors
//! run batches of same-role nodes through the cell interpreter. `reference`
//! runs one node at a time (the numerical oracle); `cavs` batches every ready
//! vertex (rounds over types); `policy` runs any [`BatchPolicy`] — agenda,
//! typewise or a learned FSM — with Cavs-style gather/scatter at cell borders.

mod cellexec;
mod dynet;
#[cfg(feature = "cuda")]
pub mod gpu;
mod incell;
mod interp;
pub mod kernels;
pub mod measure;
mod model;
mod session;
mod store;

use std::time::Instant;

use serde::Serialize;
use thiserror::Error;

pub use incell::{CellProgram, InCellCounts, LayoutMismatch};
pub use model::{Model, RoleModel};
pub use session::{Session, device_present};
pub use store::Store;

use crate::cells::{CellError, CellLibrary};
use crate::graph::NodeId;
use crate::sched::{BatchPolicy, CavsPolicy, PolicyError, SameTypeDag, run_policy_with};
use crate::trace::Trace;
use crate::workloads::BindError;

/// Replay failures.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// The trace's workload is not one of the zoo, so its types have no cells.
    #[error(
        "trace workload {0:?} has no cell definitions: replay needs a trace recorded by `engine record` (see `engine workloads`)"
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

/// Timing split of one run (ED-Batch Fig. 9), in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeSplit {
    /// Building the run's structures (model binding, arena, same-type DAG).
    pub construction: f64,
    /// Choosing batches (the policy, frontier updates).
    pub scheduling: f64,
    /// Running kernels and copies.
    pub execution: f64,
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

/// Result of [`replay`]: the node outputs and the measurements.
pub struct Replayed {
    /// Every node's outputs.
    pub store: Store,
    /// Work counters.
    pub counters: Counters,
    /// Time split.
    pub time: TimeSplit,
    /// Fallback decisions of the policy (FSM misses).
    pub misses: u64,
    /// GPU time between the run's first and last kernel (CUDA events); `None`
    /// on the CPU.
    pub device_s: Option<f64>,
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
    }
}

/// Builds the model of `trace` (cells and seeded weights).
pub fn model(trace: &Trace, cells: &CellLibrary, seed: u64) -> Result<Model, ReplayError> {
    Model::new(trace, cells, seed)
}

/// Runs `trace` with `executor` on the CPU.
pub fn replay(
    trace: &Trace,
    model: &Model,
    cells: &CellLibrary,
    executor: &mut Executor,
) -> Result<Replayed, ReplayError> {
    if let Executor::Dynet(policy) = executor {
        let (store, counters, time, misses) = dynet::run(trace, model, cells, policy.as_mut())?;
        return Ok(Replayed {
            store,
            counters,
            time,
            misses,
            device_s: None,
        });
    }
    let g = &trace.graph;
    let t0 = Instant::now();
    let mut store = Store::new(g, model);
    let mut scratch = interp::Scratch::default();
    let mut data = Vec::new();
    let mut counters = Counters::default();
    let mut time = TimeSplit::default();
    let mut misses = 0;
    match executor {
        Executor::Reference => {
            time.construction = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            for &v in g.topo_order() {
                cellexec::run_batch(
                    g,
                    model,
                    &mut store,
                    &mut scratch,
                    &mut data,
                    &[v],
                    &mut counters,
                );
            }
            time.execution = t1.elapsed().as_secs_f64();
        }
        Executor::Cavs | Executor::Policy(_) | Executor::Dynet(_) | Executor::EdBatch(..) => {
            let mut cavs = CavsPolicy::default();
            let (Some(policy), programs) = instance_policy(executor, &mut cavs) else {
                unreachable!("the reference and dynet are handled above")
            };
            let mut arena = Vec::new();
            let mut tmp = Vec::new();
            let st = SameTypeDag::for_policy(g, policy);
            time.construction = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let mut exec = 0.0;
            let mut on_batch = |batch: &[NodeId]| {
                let t = Instant::now();
                let role = model.type_role[g.node_type(batch[0]).index()];
                match programs.get(role).and_then(Option::as_ref) {
                    Some(prog) => cellexec::run_batch_incell(
                        g,
                        model,
                        prog,
                        &mut store,
                        &mut arena,
                        &mut tmp,
                        &mut data,
                        batch,
                        &mut counters,
                    ),
                    None => cellexec::run_batch(
                        g,
                        model,
                        &mut store,
                        &mut scratch,
                        &mut data,
                        batch,
                        &mut counters,
                    ),
                }
                exec += t.elapsed().as_secs_f64();
            };
            let (_, stats) = run_policy_with(g, &st, policy, &mut on_batch)?;
            misses = stats.misses;
            time.execution = exec;
            time.scheduling = t1.elapsed().as_secs_f64() - exec;
        }
    }
    Ok(Replayed {
        store,
        counters,
        time,
        misses,
        device_s: None,
    })
}

/// Largest normwise relative difference between two runs' node outputs:
/// max over nodes of ‖a − b‖∞ / max(‖b‖∞, 1e-6).
pub fn max_rel_error(trace: &Trace, a: &Store, b: &Store) -> f64 {
    trace
        .graph
        .nodes()
        .map(|v| {
            let (x, y) = (a.node(v), b.node(v));
            let diff = x
                .iter()
                .zip(y)
                .map(|(p, q)| (p - q).abs())
                .fold(0.0f32, f32::max);
            let norm = y.iter().map(|q| q.abs()).fold(0.0f32, f32::max).max(1e-6);
            f64::from(diff / norm)
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests;
