//! The executors ([`Executor`]), whose batching a replay measures (ED-Batch
//! §5, Cavs §3.3). `reference` runs one node at a time (the numerical
//! oracle); `cavs` batches every ready vertex (rounds over types); `policy`
//! runs any [`BatchPolicy`] — agenda, typewise or a learned FSM — with
//! Cavs-style gather/scatter at cell borders; `edbatch` adds the planner's
//! in-cell layouts ([`compile_layouts`]); `dynet` batches primitive ops;
//! `vpps` compiles the policy's batches into a script that one persistent
//! kernel runs. A [`Session`](crate::session::Session) prepares one on a
//! device; every backend takes the same enum.

use crate::backend::vpps::VppsOptions;
use crate::error::ReplayError;
use crate::incell::CellProgram;
use crate::layout::LayoutFile;
use crate::model::Model;
use crate::sched::{BatchPolicy, CavsPolicy};

/// The executors a [`Session`](crate::session::Session) prepares and runs.
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
    /// ([`vpps`](crate::backend::vpps)).
    Vpps(Box<dyn BatchPolicy + Send>, VppsOptions),
}

/// Compiles layout files (`(source, file)`) into per-role programs: each role
/// gets the file of its cell, if any. A file for a cell no role uses is
/// ignored; a file at another hidden size, or inconsistent with its cell, is an
/// error naming it.
pub fn compile_layouts(
    model: &Model,
    files: &[(String, LayoutFile)],
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
