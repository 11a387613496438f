//! The CUDA backends in a build without the `cuda` feature (this file takes
//! the place of `mod.rs`): `CudaBackend` and `VppsBackend` are both
//! `Unbuilt`, a type with no values whose `open` is the typed error
//! [`DeviceError::NotBuilt`], so the session's code is the same in
//! both builds (candle's stub-backend pattern) and no CUDA backend can be
//! made in this one.

use crate::backend::{Backend, Work};
use crate::device::DeviceError;
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::model::Model;
use crate::run::{BackwardSchedule, ForwardRun, TrainOptions, TrainRun};
use crate::store::Store;

/// No CUDA in this build: never made.
pub(crate) enum Unbuilt {}

/// The forward executors' CUDA replay: not in this build.
pub(crate) type CudaBackend = Unbuilt;

/// VPPS's persistent kernel: not in this build.
pub(crate) type VppsBackend = Unbuilt;

impl Backend for Unbuilt {
    /// The device's ordinal, as in a build with CUDA.
    type Config = usize;

    fn open(_n: usize, _work: Work<'_>, _executor: &Executor) -> Result<Self, ReplayError> {
        Err(DeviceError::NotBuilt.into())
    }

    fn forward(
        &mut self,
        _work: Work<'_>,
        _executor: &mut Executor,
    ) -> Result<ForwardRun, ReplayError> {
        match *self {}
    }

    fn train(
        &mut self,
        _work: Work<'_>,
        _executor: &mut Executor,
        _backward: BackwardSchedule<'_>,
        _opts: &TrainOptions,
    ) -> Result<TrainRun, ReplayError> {
        match *self {}
    }

    fn outputs(&self) -> &Store {
        match *self {}
    }

    fn into_outputs(self: Box<Self>) -> Store {
        match *self {}
    }

    fn gradients(&self, _model: &Model) -> Option<Vec<Vec<Vec<f32>>>> {
        match *self {}
    }
}
