//! One replay API over every device (candle's pattern): a [`Session`] is opened
//! for a trace, its model and an executor on a [`DeviceKind`], then run as often
//! as needed. On the CPU it is a thin wrapper of [`replay`](super::replay); on
//! CUDA it holds the uploaded programs and buffers. Asking for CUDA on a
//! machine (or build) without it is a typed [`DeviceError`], never a fall back.

use super::{Executor, Model, ReplayError, Replayed, replay};
use crate::cells::CellLibrary;
use crate::device::{DeviceError, DeviceKind};
use crate::trace::Trace;

/// An executor prepared on a device.
pub enum Session {
    /// The CPU executors.
    Cpu,
    /// The CUDA executors.
    #[cfg(feature = "cuda")]
    Cuda(Box<super::gpu::CudaReplay>),
}

impl Session {
    /// Prepares `executor` for `trace` on `device`.
    pub fn open(
        device: DeviceKind,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &Executor,
    ) -> Result<Session, ReplayError> {
        match device {
            DeviceKind::Cpu => Ok(Session::Cpu),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(n) => {
                let dev = crate::device::CudaDevice::shared(n)?;
                let r = super::gpu::CudaReplay::new(dev, trace, model, cells, executor)?;
                Ok(Session::Cuda(Box::new(r)))
            }
            #[cfg(not(feature = "cuda"))]
            DeviceKind::Cuda(_) => {
                let _ = (trace, model, cells, executor);
                Err(DeviceError::NotBuilt.into())
            }
        }
    }

    /// Runs the trace once.
    pub fn run(
        &mut self,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &mut Executor,
    ) -> Result<Replayed, ReplayError> {
        match self {
            Session::Cpu => replay(trace, model, cells, executor),
            #[cfg(feature = "cuda")]
            Session::Cuda(r) => r.run(trace, model, executor),
        }
    }
}

/// Whether `device` can run here: `Ok(false)` only for CUDA missing on this
/// machine or build (what device-parameterised tests skip on); other failures
/// are errors.
pub fn device_present(device: DeviceKind) -> Result<bool, DeviceError> {
    match crate::device::check_available(device) {
        Ok(()) => Ok(true),
        Err(DeviceError::CudaUnavailable { .. } | DeviceError::NotBuilt) => Ok(false),
        Err(e) => Err(e),
    }
}
