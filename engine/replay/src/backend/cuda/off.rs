//! The CUDA backend in a build without the `cuda` feature (this file takes
//! the place of `mod.rs`): only the CUDA side of a
//! [`Session`](crate::session::Session), a type with no values, whose `open`
//! is the typed error [`DeviceError::NotBuilt`], so the session's code is the
//! same in both builds (candle's stub-backend pattern).

use crate::backend::vpps::{KernelInfo, Plan};
use crate::cells::CellLibrary;
use crate::device::DeviceError;
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::model::Model;
use crate::run::{BackwardSchedule, PassRunParts, TrainRun};
use crate::store::Store;
use crate::trace::Trace;

/// No CUDA in this build: never made.
pub(crate) enum CudaBackend {}

impl CudaBackend {
    pub(crate) fn open(
        _n: usize,
        _trace: &Trace,
        _model: &Model,
        _cells: &CellLibrary,
        _executor: &Executor,
    ) -> Result<CudaBackend, ReplayError> {
        Err(DeviceError::NotBuilt.into())
    }

    pub(crate) fn run(
        &mut self,
        _trace: &Trace,
        _model: &Model,
        _executor: &mut Executor,
    ) -> Result<PassRunParts, ReplayError> {
        match *self {}
    }

    pub(crate) fn train(
        &mut self,
        _trace: &Trace,
        _model: &Model,
        _executor: &mut Executor,
        _backward: BackwardSchedule<'_>,
    ) -> Result<TrainRun, ReplayError> {
        match *self {}
    }

    pub(crate) fn gradients(&self) -> Option<Vec<Vec<Vec<f32>>>> {
        match *self {}
    }

    pub(crate) fn outputs(&self) -> &Store {
        match *self {}
    }

    pub(crate) fn into_outputs(self) -> Store {
        match self {}
    }

    pub(crate) fn vpps_plan(&self) -> Option<(&Plan, &KernelInfo)> {
        match *self {}
    }
}
