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
    /// VPPS: the kernel, the last run's outputs and gradients.
    #[cfg(feature = "cuda")]
    Vpps(
        Box<super::vpps::cuda::VppsCuda>,
        Store,
        Option<Vec<Vec<Vec<f32>>>>,
    ),
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
            DeviceKind::Cuda(n) if matches!(executor, Executor::Vpps(..)) => {
                let Executor::Vpps(_, vopts) = executor else {
                    unreachable!("matched above")
                };
                let dev = crate::device::CudaDevice::shared(n)?;
                let r = super::vpps::cuda::VppsCuda::new(dev, model, vopts)?;
                Backend::Vpps(Box::new(r), Store::new(&trace.graph, model), None)
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
        self.check_executor(executor)?;
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
            #[cfg(feature = "cuda")]
            Backend::Vpps(r, out, grads) => {
                let Executor::Vpps(policy, _) = executor else {
                    return Err(ReplayError::WrongSession("vpps"));
                };
                let t = std::time::Instant::now();
                let batches = super::vpps::schedule(trace, policy.as_mut(), None)?;
                let sched = t.elapsed().as_secs_f64();
                let g = r.run(trace, model, &batches)?;
                *out = g.run.outputs;
                *grads = None;
                let counters = super::Counters {
                    batches: batches.forward.len() as u64,
                    kernels: 1,
                    ..Default::default()
                };
                let time = super::TimeSplit {
                    construction: 0.0,
                    scheduling: sched + g.script_s,
                    execution: g.exec_s,
                    overlapped: 0.0,
                };
                (counters, time, 0, Some(g.device_s))
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

    /// One training step's passes: forward, then backward in the order
    /// `backward` says (CPU, or vpps's one kernel on CUDA; the CUDA replay
    /// of the other executors has no backward pass: a typed
    /// error).
    pub fn train(
        &mut self,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &mut Executor,
        backward: super::BackwardSchedule<'_>,
        opts: &super::TrainOptions,
    ) -> Result<super::TrainRun, ReplayError> {
        self.check_executor(executor)?;
        match &mut self.backend {
            Backend::Cpu(r) => r.train(trace, model, cells, executor, backward, opts),
            #[cfg(feature = "cuda")]
            Backend::Cuda(..) => Err(ReplayError::NotForTraining("CUDA")),
            #[cfg(feature = "cuda")]
            Backend::Vpps(r, out, grads) => {
                let _ = opts;
                let Executor::Vpps(policy, _) = executor else {
                    return Err(ReplayError::WrongSession("vpps"));
                };
                let t = std::time::Instant::now();
                let batches = super::vpps::schedule(trace, policy.as_mut(), Some(backward))?;
                let sched = t.elapsed().as_secs_f64();
                let g = r.run(trace, model, &batches)?;
                let (nf, nb) = (
                    batches.forward.len() as u64,
                    batches.backward.as_ref().map_or(0, |b| b.len() as u64),
                );
                *out = g.run.outputs;
                *grads = g.run.gradients;
                // One kernel runs both passes: its time is the forward's.
                let pass = |batches, kernels, scheduling, execution| super::PassRun {
                    counters: super::Counters {
                        batches,
                        kernels,
                        ..Default::default()
                    },
                    time: super::TimeSplit {
                        construction: 0.0,
                        scheduling,
                        execution,
                        overlapped: 0.0,
                    },
                    misses: 0,
                };
                Ok(super::TrainRun {
                    loss: g.run.loss,
                    forward: pass(nf, 1, sched + g.script_s, g.exec_s),
                    backward: pass(nb, 0, 0.0, 0.0),
                    kept_bytes: 0,
                    device_s: Some(g.device_s),
                })
            }
        }
    }

    /// The gradients of the last training run (per role and value id, like
    /// the model's parameters).
    pub fn gradients(&self, model: &Model) -> Option<Vec<Vec<Vec<f32>>>> {
        match &self.backend {
            Backend::Cpu(r) => r.gradients(model),
            #[cfg(feature = "cuda")]
            Backend::Cuda(..) => None,
            #[cfg(feature = "cuda")]
            Backend::Vpps(_, _, g) => g.clone(),
        }
    }

    /// Every node's outputs of the last run (all zero before the first).
    pub fn outputs(&self) -> &Store {
        match &self.backend {
            Backend::Cpu(r) => r.outputs(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(_, s) | Backend::Vpps(_, s, _) => s,
        }
    }

    /// The outputs, consuming the session.
    pub fn into_outputs(self) -> Store {
        match self.backend {
            Backend::Cpu(r) => r.into_outputs(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(_, s) | Backend::Vpps(_, s, _) => s,
        }
    }

    /// The CPU side of the session, where it runs on the CPU.
    pub fn cpu(&self) -> Option<&CpuReplay> {
        match &self.backend {
            Backend::Cpu(r) => Some(r),
            #[cfg(feature = "cuda")]
            Backend::Cuda(..) | Backend::Vpps(..) => None,
        }
    }

    /// The CPU side of the session, mutable.
    pub fn cpu_mut(&mut self) -> Option<&mut CpuReplay> {
        match &mut self.backend {
            Backend::Cpu(r) => Some(r),
            #[cfg(feature = "cuda")]
            Backend::Cuda(..) | Backend::Vpps(..) => None,
        }
    }

    /// For a VPPS session: its placement and the compiled kernel (registers,
    /// spills, NVRTC compile and load time).
    pub fn vpps_plan(&self) -> Option<(&super::vpps::Plan, &super::vpps::KernelInfo)> {
        match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Vpps(r, ..) => Some((r.vpps().plan(), &r.kernel)),
            _ => None,
        }
    }

    /// A VPPS session runs only the vpps executor, and the vpps executor
    /// only a VPPS session.
    fn check_executor(&self, executor: &Executor) -> Result<(), ReplayError> {
        let vpps_session = match &self.backend {
            #[cfg(feature = "cuda")]
            Backend::Vpps(..) => true,
            _ => false,
        };
        match (vpps_session, matches!(executor, Executor::Vpps(..))) {
            (true, false) => Err(ReplayError::WrongSession("vpps")),
            (false, true) => Err(ReplayError::WrongSession("another executor than vpps")),
            _ => Ok(()),
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
