//! The CUDA side of a [`Session`](crate::session::Session): the forward
//! executors' replay and VPPS' persistent kernel, each with the outputs (and,
//! for VPPS, the gradients) of its last run. Built with the `cuda` feature;
//! the session holds it as one variant and never names a `cfg` (the stub in
//! `off.rs` takes its place without the feature).

use super::CudaReplay;
use crate::backend::vpps::cuda::VppsCuda;
use crate::backend::vpps::{self, KernelInfo, Plan};
use crate::cells::CellLibrary;
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::model::Model;
use crate::run::{BackwardSchedule, Counters, PassRun, PassRunParts, TimeSplit, TrainRun};
use crate::store::Store;
use crate::trace::Trace;

/// An executor prepared on a CUDA device.
pub(crate) enum CudaBackend {
    /// The forward executors (reference, dynet, cavs, policy, edbatch).
    Replay(Box<CudaReplay>, Store),
    /// VPPS: the kernel, the last run's outputs and gradients.
    Vpps(Box<VppsCuda>, Store, Option<Vec<Vec<Vec<f32>>>>),
}

impl CudaBackend {
    /// Prepares `executor` on CUDA device `n`.
    pub(crate) fn open(
        n: usize,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &Executor,
    ) -> Result<CudaBackend, ReplayError> {
        let dev = crate::device::CudaDevice::shared(n)?;
        Ok(match executor {
            Executor::Vpps(_, vopts) => {
                let r = VppsCuda::new(dev, model, vopts)?;
                CudaBackend::Vpps(Box::new(r), Store::new(&trace.graph, model), None)
            }
            _ => {
                let r = CudaReplay::new(dev, trace, model, cells, executor)?;
                CudaBackend::Replay(Box::new(r), Store::new(&trace.graph, model))
            }
        })
    }

    /// Runs the trace once: counters, host time, misses, GPU time.
    pub(crate) fn run(
        &mut self,
        trace: &Trace,
        model: &Model,
        executor: &mut Executor,
    ) -> Result<PassRunParts, ReplayError> {
        match self {
            CudaBackend::Replay(r, out) => {
                let run = r.run(trace, model, executor)?;
                *out = run.store;
                Ok((run.counters, run.time, run.misses, run.device_s))
            }
            CudaBackend::Vpps(r, out, grads) => {
                let Executor::Vpps(policy, _) = executor else {
                    return Err(ReplayError::Internal(
                        "a VPPS backend run with another executor",
                    ));
                };
                let t = std::time::Instant::now();
                let batches = vpps::schedule(trace, policy.as_mut(), None)?;
                let sched = t.elapsed().as_secs_f64();
                let g = r.run(trace, model, &batches)?;
                *out = g.run.outputs;
                *grads = None;
                let counters = Counters {
                    batches: batches.forward.len() as u64,
                    kernels: 1,
                    ..Default::default()
                };
                let time = TimeSplit {
                    construction: 0.0,
                    scheduling: sched + g.script_s,
                    execution: g.exec_s,
                    overlapped: 0.0,
                };
                Ok((counters, time, 0, Some(g.device_s)))
            }
        }
    }

    /// One training step (VPPS' one kernel; the forward executors have no
    /// CUDA backward yet: a typed error).
    pub(crate) fn train(
        &mut self,
        trace: &Trace,
        model: &Model,
        executor: &mut Executor,
        backward: BackwardSchedule<'_>,
    ) -> Result<TrainRun, ReplayError> {
        match self {
            CudaBackend::Replay(..) => Err(ReplayError::NotForTraining("CUDA")),
            CudaBackend::Vpps(r, out, grads) => {
                let Executor::Vpps(policy, _) = executor else {
                    return Err(ReplayError::Internal(
                        "a VPPS backend run with another executor",
                    ));
                };
                let t = std::time::Instant::now();
                let batches = vpps::schedule(trace, policy.as_mut(), Some(backward))?;
                let sched = t.elapsed().as_secs_f64();
                let g = r.run(trace, model, &batches)?;
                let (nf, nb) = (
                    batches.forward.len() as u64,
                    batches.backward.as_ref().map_or(0, |b| b.len() as u64),
                );
                *out = g.run.outputs;
                *grads = g.run.gradients;
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
        }
    }

    /// The last training run's gradients (VPPS only).
    pub(crate) fn gradients(&self) -> Option<Vec<Vec<Vec<f32>>>> {
        match self {
            CudaBackend::Replay(..) => None,
            CudaBackend::Vpps(_, _, g) => g.clone(),
        }
    }

    /// The last run's outputs.
    pub(crate) fn outputs(&self) -> &Store {
        match self {
            CudaBackend::Replay(_, s) | CudaBackend::Vpps(_, s, _) => s,
        }
    }

    /// The outputs, consuming the backend.
    pub(crate) fn into_outputs(self) -> Store {
        match self {
            CudaBackend::Replay(_, s) | CudaBackend::Vpps(_, s, _) => s,
        }
    }

    /// A VPPS backend's placement and compiled kernel.
    pub(crate) fn vpps_plan(&self) -> Option<(&Plan, &KernelInfo)> {
        match self {
            CudaBackend::Vpps(r, ..) => Some((r.vpps().plan(), &r.kernel)),
            CudaBackend::Replay(..) => None,
        }
    }
}
