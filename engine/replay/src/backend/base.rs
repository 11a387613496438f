//! The [`Backend`] trait: what a device does for a
//! [`Session`](crate::session::Session) (burn's `backend/base.rs`).

use crate::backend::cpu::CpuReplay;
use crate::backend::vpps::{KernelInfo, Plan};
use crate::cells::CellLibrary;
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::model::Model;
use crate::run::{BackwardSchedule, ForwardRun, TrainOptions, TrainRun};
use crate::store::Store;
use crate::trace::Trace;

/// What a session was opened for, and so what every call of its backend
/// runs: the trace, its model and the cells, which the session borrows.
/// The executor travels beside it, since a run mutates it (a policy's
/// state, an FSM's misses).
#[derive(Clone, Copy)]
pub(crate) struct Work<'s> {
    pub trace: &'s Trace,
    pub model: &'s Model,
    pub cells: &'s CellLibrary,
}

/// An executor prepared on one device for one [`Work`]: it owns every
/// buffer its runs need, runs the forward pass and the training step, and
/// keeps the last run's outputs (and gradients) for reading back.
///
/// The session calls it with the same work and executor it was opened
/// with: a backend need not check that they are the ones it prepared.
/// The accessors that only one backend has answer `None` by default, so a
/// backend implements what it has and nothing more, and the session asks
/// without knowing which backend it holds.
pub(crate) trait Backend {
    /// How the backend is opened: the CPU's threads and fusion, a CUDA
    /// device's ordinal.
    type Config
    where
        Self: Sized;

    /// Prepares `executor` for `work`: compiles each role's program, uploads
    /// what the device keeps, allocates the node store. An executor the
    /// backend cannot run is a typed error here, never at the first run.
    fn open(config: Self::Config, work: Work<'_>, executor: &Executor) -> Result<Self, ReplayError>
    where
        Self: Sized;

    /// Runs the forward pass once; the outputs are then in
    /// [`outputs`](Backend::outputs).
    fn forward(
        &mut self,
        work: Work<'_>,
        executor: &mut Executor,
    ) -> Result<ForwardRun, ReplayError>;

    /// One training step: the forward pass, then the backward pass in the
    /// order `backward` says, with `opts`; the gradients are then in
    /// [`gradients`](Backend::gradients). A backend without a backward pass
    /// says so with [`ReplayError::NotForTraining`].
    fn train(
        &mut self,
        work: Work<'_>,
        executor: &mut Executor,
        backward: BackwardSchedule<'_>,
        opts: &TrainOptions,
    ) -> Result<TrainRun, ReplayError>;

    /// Every node's outputs of the last run (all zero before the first).
    fn outputs(&self) -> &Store;

    /// The outputs, consuming the backend.
    fn into_outputs(self: Box<Self>) -> Store;

    /// The gradients of the last training step, per role and cell value
    /// (the shapes of the model's parameters); `None` before one.
    fn gradients(&self, model: &Model) -> Option<Vec<Vec<Vec<f32>>>>;

    /// The CPU backend itself (its threads, GEMM log and flops).
    fn cpu(&self) -> Option<&CpuReplay> {
        None
    }

    /// The CPU backend itself, mutable (to switch its GEMM log).
    fn cpu_mut(&mut self) -> Option<&mut CpuReplay> {
        None
    }

    /// VPPS's placement and compiled kernel (registers, spills, NVRTC
    /// compile and load time).
    fn vpps_plan(&self) -> Option<(&Plan, &KernelInfo)> {
        None
    }
}
