//! What a replay run takes and gives, whatever the device: a pass's
//! measurement ([`PassRun`]), how to train ([`TrainOptions`],
//! [`BackwardSchedule`]) and a training step's measurement ([`TrainRun`]).
//! The CPU, CUDA and VPPS backends all fill these.

use super::{Counters, TimeSplit};

/// A run's counters, host time, policy misses and GPU time, as a backend
/// hands them to the session.
pub(crate) type PassRunParts = (Counters, TimeSplit, u64, Option<f64>);
use crate::sched::BatchPolicy;

/// What one pass (forward or backward) measured, on any device (the
/// session keeps the outputs).
pub struct PassRun {
    /// Work counters.
    pub counters: Counters,
    /// Time split.
    pub time: TimeSplit,
    /// Policy fallbacks (FSM misses).
    pub misses: u64,
}

/// How the backward pass picks its batches.
pub enum BackwardSchedule<'a> {
    /// The forward pass's batches in reverse order: what Cavs (its task
    /// stack, §3.3) and DyNet do. The reference runs node by node in reverse
    /// topological order either way.
    ReverseForward,
    /// A batching policy on the reversed graph (a heuristic, or an FSM from
    /// `search train --pass backward`).
    Policy(&'a mut dyn BatchPolicy),
}

/// How to train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainOptions {
    /// Defer every weight-gradient product to the end of the backward pass:
    /// one product per parameter over all its rows (Cavs §3.5).
    pub lazy: bool,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions { lazy: true }
    }
}

/// What one training run (forward + backward) measured.
pub struct TrainRun {
    /// The mini-batch loss: the sum of the loss-sum nodes' outputs.
    pub loss: f64,
    /// The forward pass.
    pub forward: PassRun,
    /// The backward pass (batches on the reversed graph; construction is
    /// the reversed graph's same-type DAG, execution includes the parameter
    /// gradients).
    pub backward: PassRun,
    /// Bytes kept for and by the backward pass (forward records, gradient
    /// records, output and parameter gradients).
    pub kept_bytes: u64,
    /// GPU seconds of the step, between CUDA events (`None` on the CPU).
    pub device_s: Option<f64>,
}

/// Median of `v` (the upper one of an even count); 0 for an empty slice.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
