//! The CUDA backends' side of a [`Session`](crate::session::Session): the
//! forward executors' replay ([`CudaBackend`]) and VPPS's persistent kernel
//! ([`VppsBackend`]), each with the outputs (and, for VPPS, the gradients)
//! of its last run, each implementing [`Backend`]. Built with the `cuda`
//! feature; without it the stub in `off.rs` takes their place, so the
//! session never names a `cfg`.

use super::CudaReplay;
use crate::backend::vpps::cuda::VppsCuda;
use crate::backend::vpps::{self, KernelInfo, Plan};
use crate::backend::{Backend, Work};
use crate::device::CudaDevice;
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::model::Model;
use crate::run::{
    BackwardSchedule, Counters, ForwardRun, PassRun, TimeSplit, TrainOptions, TrainRun,
};
use crate::store::Store;

/// The forward executors (reference, dynet, cavs, policy, edbatch) prepared
/// on a CUDA device.
pub(crate) struct CudaBackend {
    replay: CudaReplay,
    /// The last run's outputs, copied back.
    outputs: Store,
}

impl Backend for CudaBackend {
    /// The device's ordinal.
    type Config = usize;

    fn open(n: usize, work: Work<'_>, executor: &Executor) -> Result<Self, ReplayError> {
        let dev = CudaDevice::shared(n)?;
        let replay = CudaReplay::new(dev, work.trace, work.model, work.cells, executor)?;
        Ok(CudaBackend {
            replay,
            outputs: Store::new(&work.trace.graph, work.model),
        })
    }

    fn forward(
        &mut self,
        work: Work<'_>,
        executor: &mut Executor,
    ) -> Result<ForwardRun, ReplayError> {
        let run = self.replay.run(work.trace, work.model, executor)?;
        self.outputs = run.store;
        Ok(ForwardRun {
            pass: PassRun {
                counters: run.counters,
                time: run.time,
                misses: run.misses,
            },
            device_s: run.device_s,
        })
    }

    /// The CUDA replay has no backward pass yet.
    fn train(
        &mut self,
        _work: Work<'_>,
        _executor: &mut Executor,
        _backward: BackwardSchedule<'_>,
        _opts: &TrainOptions,
    ) -> Result<TrainRun, ReplayError> {
        Err(ReplayError::NotForTraining("CUDA"))
    }

    fn outputs(&self) -> &Store {
        &self.outputs
    }

    fn into_outputs(self: Box<Self>) -> Store {
        self.outputs
    }

    fn gradients(&self, _model: &Model) -> Option<Vec<Vec<Vec<f32>>>> {
        None
    }
}

/// The VPPS executor prepared on a CUDA device: its kernel, the last run's
/// outputs and gradients.
pub(crate) struct VppsBackend {
    kernel: VppsCuda,
    outputs: Store,
    gradients: Option<Vec<Vec<Vec<f32>>>>,
}

impl Backend for VppsBackend {
    /// The device's ordinal.
    type Config = usize;

    fn open(n: usize, work: Work<'_>, executor: &Executor) -> Result<Self, ReplayError> {
        let Executor::Vpps(_, vopts) = executor else {
            return Err(ReplayError::Internal(
                "the VPPS backend opened for another executor",
            ));
        };
        let dev = CudaDevice::shared(n)?;
        Ok(VppsBackend {
            kernel: VppsCuda::new(dev, work.model, vopts)?,
            outputs: Store::new(&work.trace.graph, work.model),
            gradients: None,
        })
    }

    fn forward(
        &mut self,
        work: Work<'_>,
        executor: &mut Executor,
    ) -> Result<ForwardRun, ReplayError> {
        let Executor::Vpps(policy, _) = executor else {
            return Err(ReplayError::Internal(
                "a VPPS backend run with another executor",
            ));
        };
        let t = std::time::Instant::now();
        let batches = vpps::schedule(work.trace, policy.as_mut(), None)?;
        let sched = t.elapsed().as_secs_f64();
        let g = self.kernel.run(work.trace, work.model, &batches)?;
        self.outputs = g.run.outputs;
        self.gradients = None;
        Ok(ForwardRun {
            pass: PassRun {
                counters: Counters {
                    batches: batches.forward.len() as u64,
                    kernels: 1,
                    ..Default::default()
                },
                time: TimeSplit {
                    construction: 0.0,
                    scheduling: sched + g.script_s,
                    execution: g.exec_s,
                    overlapped: 0.0,
                },
                misses: 0,
            },
            device_s: Some(g.device_s),
        })
    }

    /// One kernel runs both passes; it has no options to take.
    fn train(
        &mut self,
        work: Work<'_>,
        executor: &mut Executor,
        backward: BackwardSchedule<'_>,
        _opts: &TrainOptions,
    ) -> Result<TrainRun, ReplayError> {
        let Executor::Vpps(policy, _) = executor else {
            return Err(ReplayError::Internal(
                "a VPPS backend run with another executor",
            ));
        };
        let t = std::time::Instant::now();
        let batches = vpps::schedule(work.trace, policy.as_mut(), Some(backward))?;
        let sched = t.elapsed().as_secs_f64();
        let g = self.kernel.run(work.trace, work.model, &batches)?;
        let (nf, nb) = (
            batches.forward.len() as u64,
            batches.backward.as_ref().map_or(0, |b| b.len() as u64),
        );
        self.outputs = g.run.outputs;
        self.gradients = g.run.gradients;
        // One kernel runs both passes: its time is the forward's.
        let pass = |batches, kernels, scheduling, execution| PassRun {
            counters: Counters {
                batches,
                kernels,
                ..Default::default()
            },
            time: TimeSplit {
                construction: 0.0,
                scheduling,
                execution,
                overlapped: 0.0,
            },
            misses: 0,
        };
        Ok(TrainRun {
            loss: g.run.loss,
            forward: pass(nf, 1, sched + g.script_s, g.exec_s),
            backward: pass(nb, 0, 0.0, 0.0),
            kept_bytes: 0,
            device_s: Some(g.device_s),
        })
    }

    fn outputs(&self) -> &Store {
        &self.outputs
    }

    fn into_outputs(self: Box<Self>) -> Store {
        self.outputs
    }

    fn gradients(&self, _model: &Model) -> Option<Vec<Vec<Vec<f32>>>> {
        self.gradients.clone()
    }

    fn vpps_plan(&self) -> Option<(&Plan, &KernelInfo)> {
        Some((self.kernel.vpps().plan(), &self.kernel.kernel))
    }
}
