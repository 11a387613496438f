//! One replay API over every device (candle's pattern): a [`Session`] is opened
//! for a trace, its model, cells and an executor on a [`DeviceKind`], which it
//! borrows, then run as often as needed. It owns everything a run needs — compiled programs, packed
//! weights, the node store, batch buffers — so repeated runs reuse them. Asking
//! for CUDA on a machine (or build) without it is a typed [`DeviceError`],
//! never a fall back.
//!
//! The session holds its [`backend`](crate::backend) as one trait object:
//! opening it is the one place that chooses a backend by device (and, on
//! CUDA, by executor); every other method is a call of the trait.

use crate::backend::cpu::{CpuOptions, CpuReplay};
use crate::backend::cuda::{CudaBackend, VppsBackend};
use crate::backend::vpps::{KernelInfo, Plan};
use crate::backend::{Backend, Work};
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

/// An executor prepared on a device for one trace, its model and cells: it
/// borrows them at [`Session::open`], so every run is of what it was
/// prepared for.
pub struct Session<'a> {
    backend: Box<dyn Backend>,
    work: Work<'a>,
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

    /// Prepares `executor` for `trace` on `device`: on the CPU the CPU
    /// backend (VPPS there is a typed error, [`VppsError::CudaOnly`]), on
    /// CUDA VPPS's kernel for the VPPS executor and the CUDA replay for the
    /// others.
    ///
    /// [`VppsError::CudaOnly`]: crate::backend::vpps::VppsError::CudaOnly
    pub fn open_with(
        device: DeviceKind,
        trace: &'a Trace,
        model: &'a Model,
        cells: &'a CellLibrary,
        executor: &'a mut Executor,
        opts: &SessionOptions,
    ) -> Result<Session<'a>, ReplayError> {
        let work = Work {
            trace,
            model,
            cells,
        };
        let backend: Box<dyn Backend> = match device {
            DeviceKind::Cpu => Box::new(CpuReplay::open(opts.cpu, work, executor)?),
            DeviceKind::Cuda(n) if matches!(executor, Executor::Vpps(..)) => {
                Box::new(VppsBackend::open(n, work, executor)?)
            }
            DeviceKind::Cuda(n) => Box::new(CudaBackend::open(n, work, executor)?),
        };
        Ok(Session {
            backend,
            work,
            executor,
        })
    }

    /// Runs the trace once; the outputs are then in [`Session::outputs`].
    pub fn run(&mut self) -> Result<Replayed, ReplayError> {
        let before = usage::now();
        let run = self.backend.forward(self.work, self.executor)?;
        Ok(Replayed {
            counters: run.pass.counters,
            time: run.pass.time,
            misses: run.pass.misses,
            device_s: run.device_s,
            usage: usage::since(before, usage::now()),
        })
    }

    /// One training step's passes: forward, then backward in the order
    /// `backward` says (CPU, or vpps's one kernel on CUDA, which takes no
    /// options; the CUDA replay of the other executors has no backward
    /// pass: a typed error).
    pub fn train(
        &mut self,
        backward: BackwardSchedule<'_>,
        opts: &TrainOptions,
    ) -> Result<TrainRun, ReplayError> {
        self.backend.train(self.work, self.executor, backward, opts)
    }

    /// The trace the session runs.
    pub fn trace(&self) -> &'a Trace {
        self.work.trace
    }

    /// The model the session runs.
    pub fn model(&self) -> &'a Model {
        self.work.model
    }

    /// The cells of the model.
    pub fn cells(&self) -> &'a CellLibrary {
        self.work.cells
    }

    /// The executor (its policy's state, such as an FSM's misses).
    pub fn executor(&self) -> &Executor {
        self.executor
    }

    /// The gradients of the last training run (per role and value id, like
    /// the model's parameters).
    pub fn gradients(&self) -> Option<Vec<Vec<Vec<f32>>>> {
        self.backend.gradients(self.work.model)
    }

    /// Every node's outputs of the last run (all zero before the first).
    pub fn outputs(&self) -> &Store {
        self.backend.outputs()
    }

    /// The outputs, consuming the session.
    pub fn into_outputs(self) -> Store {
        self.backend.into_outputs()
    }

    /// The CPU side of the session, where it runs on the CPU.
    pub fn cpu(&self) -> Option<&CpuReplay> {
        self.backend.cpu()
    }

    /// The CPU side of the session, mutable.
    pub fn cpu_mut(&mut self) -> Option<&mut CpuReplay> {
        self.backend.cpu_mut()
    }

    /// For a VPPS session: its placement and the compiled kernel (registers,
    /// spills, NVRTC compile and load time).
    pub fn vpps_plan(&self) -> Option<(&Plan, &KernelInfo)> {
        self.backend.vpps_plan()
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
