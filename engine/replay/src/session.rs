//! One replay API over every device (candle's pattern): a [`Session`] is opened
//! for a trace, its model, cells and an executor on a [`DeviceKind`], which it
//! borrows, then run as often as needed. It owns everything a run needs — compiled programs, packed
//! weights, the node store, batch buffers — so repeated runs reuse them. Asking
//! for CUDA on a machine (or build) without it is a typed [`DeviceError`],
//! never a fall back.

use crate::backend::cpu::{CpuOptions, CpuReplay};
use crate::backend::cuda::CudaBackend;
use crate::backend::vpps::{KernelInfo, Plan, VppsError};
use crate::cells::CellLibrary;
use crate::device::{DeviceError, DeviceKind};
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::model::Model;
use crate::run::{BackwardSchedule, Replayed, TrainOptions, TrainRun};
use crate::store::Store;
use crate::trace::Trace;
use crate::usage;

/// How to open a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionOptions {
    /// CPU threads and fusion (ignored on CUDA).
    pub cpu: CpuOptions,
}

enum Backend {
    Cpu(Box<CpuReplay>),
    Cuda(Box<CudaBackend>),
}

/// An executor prepared on a device for one trace, its model and cells: it
/// borrows them at [`Session::open`], so every run is of what it was
/// prepared for.
pub struct Session<'a> {
    backend: Backend,
    trace: &'a Trace,
    model: &'a Model,
    cells: &'a CellLibrary,
    executor: &'a mut Executor,
}

impl<'a> Session<'a> {
    /// Prepares `executor` for `trace` on `device` with default options.
    pub fn open(
        device: DeviceKind,
        trace: &'a Trace,
        model: &'a Model,
        cells: &'a CellLibrary,
        executor: &'a mut Executor,
    ) -> Result<Session<'a>, ReplayError> {
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
        trace: &'a Trace,
        model: &'a Model,
        cells: &'a CellLibrary,
        executor: &'a mut Executor,
        opts: &SessionOptions,
    ) -> Result<Session<'a>, ReplayError> {
        let backend = match device {
            DeviceKind::Cpu if matches!(executor, Executor::Vpps(..)) => {
                return Err(VppsError::CudaOnly.into());
            }
            DeviceKind::Cpu => {
                Backend::Cpu(Box::new(CpuReplay::new(trace, model, executor, &opts.cpu)?))
            }
            DeviceKind::Cuda(n) => Backend::Cuda(Box::new(CudaBackend::open(
                n, trace, model, cells, executor,
            )?)),
        };
        Ok(Session {
            backend,
            trace,
            model,
            cells,
            executor,
        })
    }

    /// Runs the trace once; the outputs are then in [`Session::outputs`].
    pub fn run(&mut self) -> Result<Replayed, ReplayError> {
        let before = usage::now();
        let (trace, model, executor) = (self.trace, self.model, &mut *self.executor);
        let (counters, time, misses, device_s) = match &mut self.backend {
            Backend::Cpu(r) => {
                let run = r.run(trace, model, self.cells, executor)?;
                (run.counters, run.time, run.misses, None)
            }
            Backend::Cuda(r) => r.run(trace, model, executor)?,
        };
        Ok(Replayed {
            counters,
            time,
            misses,
            device_s,
            usage: usage::since(before, usage::now()),
        })
    }

    /// One training step's passes: forward, then backward in the order
    /// `backward` says (CPU, or vpps's one kernel on CUDA; the CUDA replay
    /// of the other executors has no backward pass: a typed
    /// error).
    pub fn train(
        &mut self,
        backward: BackwardSchedule<'_>,
        opts: &TrainOptions,
    ) -> Result<TrainRun, ReplayError> {
        let (trace, model, executor) = (self.trace, self.model, &mut *self.executor);
        match &mut self.backend {
            Backend::Cpu(r) => r.train(trace, model, self.cells, executor, backward, opts),
            // VPPS' one kernel has no options to take.
            Backend::Cuda(r) => r.train(trace, model, executor, backward),
        }
    }

    /// The trace the session runs.
    pub fn trace(&self) -> &'a Trace {
        self.trace
    }

    /// The model the session runs.
    pub fn model(&self) -> &'a Model {
        self.model
    }

    /// The cells of the model.
    pub fn cells(&self) -> &'a CellLibrary {
        self.cells
    }

    /// The executor (its policy's state, such as an FSM's misses).
    pub fn executor(&self) -> &Executor {
        self.executor
    }

    /// The gradients of the last training run (per role and value id, like
    /// the model's parameters).
    pub fn gradients(&self) -> Option<Vec<Vec<Vec<f32>>>> {
        match &self.backend {
            Backend::Cpu(r) => r.gradients(self.model),
            Backend::Cuda(r) => r.gradients(),
        }
    }

    /// Every node's outputs of the last run (all zero before the first).
    pub fn outputs(&self) -> &Store {
        match &self.backend {
            Backend::Cpu(r) => r.outputs(),
            Backend::Cuda(r) => r.outputs(),
        }
    }

    /// The outputs, consuming the session.
    pub fn into_outputs(self) -> Store {
        match self.backend {
            Backend::Cpu(r) => r.into_outputs(),
            Backend::Cuda(r) => r.into_outputs(),
        }
    }

    /// The CPU side of the session, where it runs on the CPU.
    pub fn cpu(&self) -> Option<&CpuReplay> {
        match &self.backend {
            Backend::Cpu(r) => Some(r),
            Backend::Cuda(..) => None,
        }
    }

    /// The CPU side of the session, mutable.
    pub fn cpu_mut(&mut self) -> Option<&mut CpuReplay> {
        match &mut self.backend {
            Backend::Cpu(r) => Some(r),
            Backend::Cuda(..) => None,
        }
    }

    /// For a VPPS session: its placement and the compiled kernel (registers,
    /// spills, NVRTC compile and load time).
    pub fn vpps_plan(&self) -> Option<(&Plan, &KernelInfo)> {
        match &self.backend {
            Backend::Cuda(r) => r.vpps_plan(),
            Backend::Cpu(..) => None,
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

/// Runs `trace` once with `executor` on the CPU in a fresh session (default
/// options) and returns the measurements and every node's outputs. Repeated
/// runs belong in a [`Session`], which reuses its buffers.
pub fn replay(
    trace: &Trace,
    model: &Model,
    cells: &CellLibrary,
    executor: &mut Executor,
) -> Result<(Replayed, Store), ReplayError> {
    let mut s = Session::open(DeviceKind::Cpu, trace, model, cells, executor)?;
    let r = s.run()?;
    Ok((r, s.into_outputs()))
}
