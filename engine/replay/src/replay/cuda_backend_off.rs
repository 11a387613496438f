//! The CUDA side of a [`Session`](super::Session) in a build without the
//! `cuda` feature: a type with no values, whose `open` is the typed error
//! [`DeviceError::NotBuilt`], so the session's code is the same in both
//! builds (candle's stub-backend pattern).

use super::run::PassRunParts;
use super::{Executor, Model, ReplayError, Store, TrainRun};
use crate::cells::CellLibrary;
use crate::device::DeviceError;
use crate::trace::Trace;

/// No CUDA in this build: never made.
pub(super) enum CudaBackend {}

impl CudaBackend {
    pub(super) fn open(
        _n: usize,
        _trace: &Trace,
        _model: &Model,
        _cells: &CellLibrary,
        _executor: &Executor,
    ) -> Result<CudaBackend, ReplayError> {
        Err(DeviceError::NotBuilt.into())
    }

    pub(super) fn run(
        &mut self,
        _trace: &Trace,
        _model: &Model,
        _executor: &mut Executor,
    ) -> Result<PassRunParts, ReplayError> {
        match *self {}
    }

    pub(super) fn train(
        &mut self,
        _trace: &Trace,
        _model: &Model,
        _executor: &mut Executor,
        _backward: super::BackwardSchedule<'_>,
    ) -> Result<TrainRun, ReplayError> {
        match *self {}
    }

    pub(super) fn gradients(&self) -> Option<Vec<Vec<Vec<f32>>>> {
        match *self {}
    }

    pub(super) fn outputs(&self) -> &Store {
        match *self {}
    }

    pub(super) fn into_outputs(self) -> Store {
        match self {}
    }

    pub(super) fn vpps_plan(&self) -> Option<(&super::vpps::Plan, &super::vpps::KernelInfo)> {
        match *self {}
    }
}
