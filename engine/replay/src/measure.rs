//! The timing protocol of a replay measurement, shared by `engine replay` and
//! the `experiments` sweep runner: optional warm-up run, then `repeats` timed
//! runs; each part of the time split and the total are medians over the timed
//! runs, and the raw per-run samples are kept.
//!
//! ```
//! use engine_core::cells::CellLibrary;
//! use engine_replay::executor::Executor;
//! use engine_replay::measure::{MeasureOptions, measure};
//! use engine_replay::model;
//! use engine_core::trace::Level;
//! use engine_core::workloads::{self, DataChoice, RecordOptions};
//!
//! let cells = CellLibrary::builtin().unwrap();
//! let trace = workloads::record(
//!     &RecordOptions {
//!         workload: workloads::workload("tree-lstm").unwrap(),
//!         data: DataChoice::Default,
//!         batch: 2,
//!         hidden: 8,
//!         level: Level::Cell,
//!         seed: 1,
//!     },
//!     &cells,
//! )
//! .unwrap();
//! let model = model::model(&trace, &cells, 7).unwrap();
//! let opts = MeasureOptions { warmup: true, repeats: 3 };
//! let m = measure(&trace, &model, &cells, &mut Executor::Cavs, &opts).unwrap();
//! assert_eq!(m.samples.len(), 3);
//! assert!(m.counters.batches > 0);
//! ```

use crate::backend::cpu::roofline::{GemmOnly, Roofline, Timed};
use crate::cells::CellLibrary;
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::model::Model;
use crate::run::{BackwardSchedule, Counters, TimeSplit, TrainOptions, TrainRun};
use crate::session::Session;
use crate::store::Store;
use crate::trace::Trace;
use crate::usage::{self, Usage};

/// How to measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeasureOptions {
    /// Run once untimed before the timed runs.
    pub warmup: bool,
    /// Timed runs (at least 1; 0 is treated as 1).
    pub repeats: usize,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            warmup: true,
            repeats: 3,
        }
    }
}

/// What [`measure`] found.
pub struct Measured {
    /// Work counters of the first timed run (every run does the same work).
    pub counters: Counters,
    /// Median of each part of the split over the timed runs.
    pub time: TimeSplit,
    /// Median of the per-run totals (construction + scheduling + execution).
    pub total_s: f64,
    /// Every timed run's split, in run order.
    pub samples: Vec<TimeSplit>,
    /// Policy fallback decisions (FSM misses) of the first timed run.
    pub misses: u64,
    /// Node outputs of the last timed run (for the check against the reference).
    pub store: Store,
    /// Median GPU time per run (CUDA events); `None` on the CPU.
    pub device_s: Option<f64>,
    /// Every timed run's process CPU time and page faults, in run order.
    pub usage: Vec<Option<Usage>>,
}

impl Measured {
    /// Median process CPU seconds per timed run (all threads), where known.
    pub fn cpu_s(&self) -> Option<f64> {
        let v: Vec<f64> = self
            .usage
            .iter()
            .map(|u| u.map(|u| u.cpu_s))
            .collect::<Option<_>>()?;
        Some(median(&v))
    }

    /// Most minor page faults of any timed run, where known.
    pub fn max_page_faults(&self) -> Option<u64> {
        self.usage
            .iter()
            .map(|u| u.map(|u| u.minor_faults))
            .collect::<Option<Vec<u64>>>()?
            .into_iter()
            .max()
    }
}

impl TimeSplit {
    /// construction + scheduling + execution.
    pub fn total(&self) -> f64 {
        self.construction + self.scheduling + self.execution
    }
}

pub use crate::run::median;

/// Replays `trace` with `executor` on the CPU (a session with default
/// options): an optional warm-up run, then `opts.repeats` timed runs.
pub fn measure(
    trace: &Trace,
    model: &Model,
    cells: &CellLibrary,
    executor: &mut Executor,
    opts: &MeasureOptions,
) -> Result<Measured, ReplayError> {
    let mut s = Session::open(
        crate::device::DeviceKind::Cpu,
        trace,
        model,
        cells,
        executor,
    )?;
    measure_on(&mut s, opts)
}

/// [`measure`] on any device, in an open session.
pub fn measure_on(
    session: &mut Session<'_>,
    opts: &MeasureOptions,
) -> Result<Measured, ReplayError> {
    if opts.warmup {
        session.run()?;
    }
    let first = session.run()?;
    let mut samples = Vec::with_capacity(opts.repeats.max(1));
    let mut usage = Vec::with_capacity(opts.repeats.max(1));
    let mut device = Vec::new();
    samples.push(first.time.clone());
    usage.push(first.usage);
    device.extend(first.device_s);
    for _ in 1..opts.repeats {
        let r = session.run()?;
        samples.push(r.time);
        usage.push(r.usage);
        device.extend(r.device_s);
    }
    let part = |f: fn(&TimeSplit) -> f64| median(&samples.iter().map(f).collect::<Vec<_>>());
    let time = TimeSplit {
        construction: part(|t| t.construction),
        scheduling: part(|t| t.scheduling),
        execution: part(|t| t.execution),
        overlapped: part(|t| t.overlapped),
    };
    let total_s = part(TimeSplit::total);
    Ok(Measured {
        counters: first.counters,
        time,
        total_s,
        samples,
        misses: first.misses,
        store: session.outputs().clone(),
        device_s: (!device.is_empty()).then(|| median(&device)),
        usage,
    })
}

/// The roofline of a run ([`crate::backend::cpu::roofline`]) on a CPU session whose
/// GEMM log is on (`None` otherwise): `rounds` pairs of one run of the trace
/// and one execution of its logged GEMMs alone, back to back, the run first
/// in even rounds and second in odd ones, so that both halves of each ratio
/// see the same load on the machine. The GEMM-only side is warmed once first.
pub fn roofline(session: &mut Session<'_>, rounds: usize) -> Result<Option<Roofline>, ReplayError> {
    let Some(log) = session.cpu().and_then(|c| c.gemm_log()).cloned() else {
        return Ok(None);
    };
    let mut alone_gemms = GemmOnly::new(&log);
    // The log exists only on a CPU session, so `cpu()` is there throughout.
    let gemms =
        |session: &Session<'_>, g: &mut GemmOnly| session.cpu().map(|c| g.run(c.thread_pool()));
    gemms(session, &mut alone_gemms);
    let (mut runs, mut alone) = (Vec::new(), Vec::new());
    for round in 0..rounds.max(1) {
        for run_now in [round % 2 == 0, round % 2 == 1] {
            if run_now {
                let r = session.run()?;
                runs.push(Timed {
                    wall_s: r.time.total(),
                    cpu_s: r.usage.map(|u| u.cpu_s),
                });
            } else {
                let Some(t) = gemms(session, &mut alone_gemms) else {
                    return Ok(None);
                };
                alone.push(t);
            }
        }
    }
    Ok(Some(alone_gemms.roofline(&runs, &alone)))
}

/// What [`measure_train`] found.
pub struct MeasuredTrain {
    /// The mini-batch loss (every run computes the same).
    pub loss: f64,
    /// Forward counters of the first timed run.
    pub forward: Counters,
    /// Backward counters of the first timed run.
    pub backward: Counters,
    /// Median forward split.
    pub forward_time: TimeSplit,
    /// Median backward split.
    pub backward_time: TimeSplit,
    /// Median of the per-run totals (forward + backward).
    pub total_s: f64,
    /// Every timed run's total.
    pub samples: Vec<f64>,
    /// Every timed run's process CPU time (all threads), where known.
    pub cpu_samples: Vec<f64>,
    /// Bytes kept for and by the backward pass.
    pub kept_bytes: u64,
    /// Median GPU seconds per step between CUDA events (`None` on the CPU).
    pub device_s: Option<f64>,
}

/// Training steps (forward + backward, no optimiser update: the weights of
/// a step do not change its cost) on `session`: an optional warm-up step,
/// then `opts.repeats` timed ones. `backward`: a policy on the reversed
/// graph, or `None` for the forward batches reversed.
pub fn measure_train(
    session: &mut Session<'_>,
    mut backward: Option<&mut dyn crate::sched::BatchPolicy>,
    train: &TrainOptions,
    opts: &MeasureOptions,
) -> Result<MeasuredTrain, ReplayError> {
    macro_rules! order {
        () => {
            match backward.as_deref_mut() {
                Some(p) => BackwardSchedule::Policy(p),
                None => BackwardSchedule::ReverseForward,
            }
        };
    }
    if opts.warmup {
        session.train(order!(), train)?;
    }
    let mut runs = Vec::with_capacity(opts.repeats.max(1));
    let mut cpu = Vec::new();
    for _ in 0..opts.repeats.max(1) {
        let u0 = usage::now();
        let r = session.train(order!(), train)?;
        if let Some(u) = usage::since(u0, usage::now()) {
            cpu.push(u.cpu_s);
        }
        runs.push(r);
    }
    let split = |f: fn(&TrainRun) -> &TimeSplit| {
        let part =
            |g: fn(&TimeSplit) -> f64| median(&runs.iter().map(|r| g(f(r))).collect::<Vec<_>>());
        TimeSplit {
            construction: part(|t| t.construction),
            scheduling: part(|t| t.scheduling),
            execution: part(|t| t.execution),
            overlapped: part(|t| t.overlapped),
        }
    };
    let samples: Vec<f64> = runs
        .iter()
        .map(|r| r.forward.time.total() + r.backward.time.total())
        .collect();
    let first = &runs[0];
    let device: Vec<f64> = runs.iter().filter_map(|r| r.device_s).collect();
    Ok(MeasuredTrain {
        device_s: (!device.is_empty()).then(|| median(&device)),
        loss: first.loss,
        forward: first.forward.counters.clone(),
        backward: first.backward.counters.clone(),
        forward_time: split(|r| &r.forward.time),
        backward_time: split(|r| &r.backward.time),
        total_s: median(&samples),
        samples,
        cpu_samples: cpu,
        kept_bytes: first.kept_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(&[]), 0.0);
    }
}
