//! How far two runs differ: normwise relative errors between two runs' node
//! outputs ([`max_rel_error`]) and parameter gradients
//! ([`max_rel_error_gradients`]), and a training step checked against the
//! reference executor's ([`check_train`]), the oracle every executor is
//! judged by.

use crate::device::DeviceKind;
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::run::BackwardSchedule;
use crate::session::Session;
use crate::store::Store;
use crate::trace::Trace;

/// Normwise relative difference of two tensors: ‖a − b‖∞ / max(‖b‖∞, 1e-6)
/// (`b` is the reference). A NaN or an infinity on either side is an
/// infinite difference: a check never passes over one (a maximum folded
/// with `f32::max` alone would drop a NaN and read 0).
pub fn rel_error(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.iter().chain(b).any(|x| !x.is_finite()) {
        return f64::INFINITY;
    }
    let diff = a
        .iter()
        .zip(b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0f32, f32::max);
    let norm = b.iter().map(|q| q.abs()).fold(0.0f32, f32::max).max(1e-6);
    f64::from(diff / norm)
}

/// Largest normwise relative difference between two runs' node outputs:
/// max over nodes of [`rel_error`].
pub fn max_rel_error(trace: &Trace, a: &Store, b: &Store) -> f64 {
    trace
        .graph
        .nodes()
        .map(|v| rel_error(a.node(v), b.node(v)))
        .fold(0.0, f64::max)
}

/// Largest normwise relative difference between two sets of parameter
/// gradients (per role, per cell value, as [`Session::gradients`] returns
/// them): max over tensors of [`rel_error`].
pub fn max_rel_error_gradients(got: &[Vec<Vec<f32>>], want: &[Vec<Vec<f32>>]) -> f64 {
    worst_gradient(got, want).0
}

/// The tensor where two sets of parameter gradients differ most:
/// `(rel_error, role, value)` (`(0, 0, 0)` when they have no tensors).
pub fn worst_gradient(got: &[Vec<Vec<f32>>], want: &[Vec<Vec<f32>>]) -> (f64, usize, usize) {
    let mut worst = (0.0, 0, 0);
    for (role, (g, w)) in got.iter().zip(want).enumerate() {
        for (value, (g, w)) in g.iter().zip(w).enumerate() {
            let e = rel_error(g, w);
            if e > worst.0 {
                worst = (e, role, value);
            }
        }
    }
    worst
}

/// A training step checked against the reference executor's (CPU, one node
/// at a time, the backward in reverse forward order): the oracle every
/// executor's `--train` run is judged by.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TrainCheck {
    /// |loss − reference loss| / |reference loss|.
    pub loss_rel_error: f64,
    /// [`max_rel_error`] of every node's outputs.
    pub max_rel_error_outputs: f64,
    /// [`max_rel_error_gradients`] of every parameter gradient.
    pub max_rel_error_gradients: f64,
}

impl TrainCheck {
    /// The worst of the three.
    pub fn worst(&self) -> f64 {
        self.loss_rel_error
            .max(self.max_rel_error_outputs)
            .max(self.max_rel_error_gradients)
    }
}

/// Checks the last training step of `session` (loss `loss`) against a
/// reference step on the CPU of the same trace, model and cells. A session that keeps no gradients is
/// [`ReplayError::NotForTraining`].
pub fn check_train(session: &Session<'_>, loss: f64) -> Result<TrainCheck, ReplayError> {
    let got = session.gradients().ok_or(ReplayError::NotForTraining(
        "this session (no gradients kept)",
    ))?;
    let (trace, model, cells) = (session.trace(), session.model(), session.cells());
    let mut ex = Executor::Reference;
    let mut r = Session::open(DeviceKind::Cpu, trace, model, cells, &mut ex)?;
    let run = r.train(BackwardSchedule::ReverseForward, &Default::default())?;
    let want = r
        .gradients()
        .ok_or(ReplayError::NotForTraining("the reference"))?;
    Ok(TrainCheck {
        loss_rel_error: ((loss - run.loss) / run.loss.abs().max(1e-30)).abs(),
        max_rel_error_outputs: max_rel_error(trace, session.outputs(), r.outputs()),
        max_rel_error_gradients: max_rel_error_gradients(&got, &want),
    })
}
