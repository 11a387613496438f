//! One replay API over every device (candle's pattern): a [`Session`] is opened
//! for a trace, its model and an executor on a [`DeviceKind`], then run as often
//! as needed. It owns everything a run needs — compiled programs, packed
//! weights, the node store, batch buffers — so repeated runs reuse them. Asking
//! for CUDA on a machine (or build) without it is a typed [`DeviceError`],
//! never a fall back.

use super::cpu::{CpuOptions, CpuReplay};
use super::{Executor, Model, ReplayError, Replayed, Store, usage};
use crate::cells::CellLibrary;
use crate::device::{DeviceError, DeviceKind};
use crate::trace::Trace;

/// How to open a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionOptions {
    /// CPU threads and fusion (ignored on CUDA).
    pub cpu: CpuOptions,
}

enum Backend {
    Cpu(Box<CpuReplay>),
    #[cfg(feature = "cuda")]
    Cuda(Box<super::gpu::CudaReplay>, Store),
}

/// An executor prepared on a device.
pub struct Session {
    backend: Backend,
}

impl Session {
    /// Prepares `executor` for `trace` on `device` with default options.
    pub fn open(
        device: DeviceKind,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &Executor,
    ) -> Result<Session, ReplayError> {
        Session::open_with(
            device,
            trace,
            model,
            cells,
            executor,
            &SessionOptions::default(),
        )
    }

    /// Prepares `executor` for `trace` on `device`.
    pub fn open_with(
        device: DeviceKind,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &Executor,
        opts: &SessionOptions,
    ) -> Result<Session, ReplayError> {
        let backend = match device {
            DeviceKind::Cpu if matches!(executor, Executor::Vpps(..)) => {
                return Err(super::vpps::VppsError::CudaOnly.into());
            }
            DeviceKind::Cpu => {
                let _ = cells;
                Backend::Cpu(Box::new(CpuReplay::new(trace, model, executor, &opts.cpu)?))
            }
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(n) => {
                let dev = crate::device::CudaDevice::shared(n)?;
                let r = super::gpu::CudaReplay::new(dev, trace, model, cells, executor)?;
                Backend::Cuda(Box::new(r), Store::new(&trace.graph, model))
            }
            #[cfg(not(feature = "cuda"))]
            DeviceKind::Cuda(_) => return Err(DeviceError::NotBuilt.into()),
        };
        Ok(Session { backend })
    }

    /// Runs the trace once; the outputs are then in [`Session::outputs`].
    pub fn run(
        &mut self,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &mut Executor,
    ) -> Result<Replayed, ReplayError> {
        let before = usage::now();
        let (counters, time, misses, device_s) = match &mut self.backend {
            Backend::Cpu(r) => {
                let run = r.run(trace, model, cells, executor)?;
                (run.counters, run.time, run.misses, None)
            }
            #[cfg(feature = "cuda")]
            Backend::Cuda(r, out) => {
                let run = r.run(trace, model, executor)?;
                *out = run.store;
                (run.counters, run.time, run.misses, run.device_s)
            }
        };
        Ok(Replayed {
            counters,
            time,
            misses,
            device_s,
            usage: usage::since(before, usage::now()),
        })
    }

    /// One training step's passes: forward, then backward with `backward`
    /// batching the reversed graph (CPU; the CUDA backend has no backward
    /// pass: a typed error).
    pub fn train(
        &mut self,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &mut Executor,
        backward: &mut dyn crate::sched::BatchPolicy,
        opts: &super::cpu::TrainOptions,
    ) -> Result<super::cpu::TrainRun, ReplayError> {
        match &mut self.backend {
            Backend::Cpu(r) => r.train(trace, model, cells, executor, backward, opts),
            #[cfg(feature = "cuda")]
            Backend::Cuda(..) => Err(ReplayError::NotForTraining("CUDA")),
        }
    }

    /// The gradients of the last training run (per role and value id, like
    /// the model's parameters).
    pub fn gradients(&self, model: &Model) -> Option<Vec<Vec<Vec<f32>>>> {
        match &self.backend {
            Backend::Cpu(r) => r.gradients(model),
            #[cfg(feature = "cuda")]
            Backend::Cuda(..) => None,
        }
    }

    /// Every node's outputs of the last run (all zero before the first).
    pub fn outputs(&self) -> &Store {
        match &self.backend {
            Backend::Cpu(r) => r.outputs(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(_, s) => s,
        }
    }

    /// The outputs, consuming the session.
    pub fn into_outputs(self) -> Store {
        match self.backend {
            Backend::Cpu(r) => r.into_outputs(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(_, s) => s,
        }
    }

    /// The CPU side of the session, where it runs on the CPU.
    pub fn cpu(&self) -> Option<&CpuReplay> {
        match &self.backend {
            Backend::Cpu(r) => Some(r),
            #[cfg(feature = "cuda")]
            Backend::Cuda(..) => None,
        }
    }

    /// The CPU side of the session, mutable.
    pub fn cpu_mut(&mut self) -> Option<&mut CpuReplay> {
        match &mut self.backend {
            Backend::Cpu(r) => Some(r),
            #[cfg(feature = "cuda")]
            Backend::Cuda(..) => None,
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
