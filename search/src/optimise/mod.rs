//! Anytime offline optimiser: the best-known schedule of a large graph within a
//! time budget (the reference FSMs are measured against, and the teacher they
//! are distilled from).
//!
//! Beam search over Algorithm-1 moves (`beam`), ranked by the remaining
//! lower bound (`state`), run with widths 1, 2, 4, … until the budget or the
//! width cap runs out or a schedule meets the lower bound it is given. Every
//! pass only keeps schedules that beat the incumbent, which starts as the best
//! heuristic. Deterministic for a graph and config whatever the thread count
//! (see `beam` for the order), except where the deadline cuts a pass: the
//! report says which passes finished.

mod beam;
mod state;

use std::time::{Duration, Instant};

use engine::graph::{Graph, NodeId, TypeId};
use engine::sched::{
    HEURISTICS, PolicyError, SameTypeDag, Schedule, heuristic, run_policy, validate_schedule,
};
use serde::Serialize;
use thiserror::Error;

use beam::PassEnd;
use state::{Ctx, State};

/// Search limits.
#[derive(Clone, Debug, PartialEq)]
pub struct OptimiseConfig {
    /// Wall-time budget.
    pub budget: Duration,
    /// Widest beam tried (see also `memory_bytes`).
    pub max_width: usize,
    /// Stop as soon as a schedule has this many batches (a certified lower
    /// bound: nothing can beat it). 0: never.
    pub target: u64,
    /// Memory the beam's states may take (two levels of `width` states);
    /// wider passes than fit are not run.
    pub memory_bytes: usize,
}

impl Default for OptimiseConfig {
    fn default() -> Self {
        OptimiseConfig {
            budget: Duration::from_secs(30),
            max_width: 1 << 12,
            target: 0,
            memory_bytes: 2 << 30,
        }
    }
}

/// Why the optimiser stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptimiseStop {
    /// A schedule reached `target` (the certified bound): optimal.
    Target,
    /// The widest pass allowed (by `max_width` or `memory_bytes`) finished.
    MaxWidth,
    /// The time budget ran out.
    Budget,
}

/// One beam pass.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pass {
    /// Beam width.
    pub width: usize,
    /// Batches of the schedule it found (`None`: none beat the incumbent, or
    /// it was cut by the deadline).
    pub batches: Option<u64>,
    /// Whether it ran to the end (false: cut by the deadline).
    pub finished: bool,
    /// Seconds since the optimiser started, at the pass's end.
    pub at_s: f64,
}

/// The optimiser's result.
#[derive(Clone, Debug, Serialize)]
pub struct OptimiseReport {
    /// Batches of the best schedule.
    pub batches: u64,
    /// The best heuristic (first of the best in `HEURISTICS` order).
    pub heuristic: String,
    /// Its batches.
    pub heuristic_batches: u64,
    /// Every pass, in order: the anytime curve.
    pub passes: Vec<Pass>,
    /// The widest pass allowed: `max_width`, or less where the states of a
    /// wider one would not fit `memory_bytes`.
    pub width_limit: usize,
    /// Why it stopped.
    pub stop: OptimiseStop,
    /// Wall seconds.
    pub seconds: f64,
    /// The best schedule.
    #[serde(skip)]
    pub schedule: Schedule,
}

/// Failures of the optimiser.
#[derive(Debug, Error)]
pub enum OptimiseError {
    /// A heuristic could not run (the first incumbent).
    #[error("initial incumbent: {0}")]
    Heuristic(#[from] PolicyError),
    /// Internal: the schedule built is invalid (a bug; reported, not hidden).
    #[error("internal error: the optimised schedule is invalid: {0}")]
    Invalid(#[from] engine::sched::ScheduleError),
}

/// The best heuristic schedule: (name, schedule), first of the best in
/// [`HEURISTICS`] order.
pub fn best_heuristic(g: &Graph, st: &SameTypeDag) -> Result<(String, Schedule), PolicyError> {
    let mut best: Option<(String, Schedule)> = None;
    for name in HEURISTICS {
        let Some(mut p) = heuristic(name) else {
            continue;
        };
        let (s, _) = run_policy(g, st, p.as_mut())?;
        if best.as_ref().is_none_or(|b| s.len() < b.1.len()) {
            best = Some((name.to_string(), s));
        }
    }
    Ok(best.unwrap_or_else(|| ("none".into(), Schedule::new())))
}

/// Replays a type sequence the Algorithm-1 way (every ready node of the type;
/// the oldest one for a non-batchable type) into a schedule.
pub fn replay_types(g: &Graph, st: &SameTypeDag, types: &[TypeId]) -> Schedule {
    let mut f = engine::sched::Frontier::new(g, st);
    let mut s = Schedule::new();
    let mut buf: Vec<NodeId> = Vec::new();
    for &t in types {
        buf.clear();
        if f.step(t, &mut buf) > 0 {
            s.push(t, &buf);
        }
    }
    s
}

/// Batches of the best heuristic on `g` (0 if none runs): a cheap upper bound
/// to hand [`crate::bound::certify`] before optimising.
pub fn heuristic_batches(g: &Graph, st: &SameTypeDag) -> u64 {
    best_heuristic(g, st).map_or(0, |(_, s)| s.len() as u64)
}

/// Finds the best schedule it can within `cfg` (see the module docs).
pub fn optimise(
    g: &Graph,
    st: &SameTypeDag,
    cfg: &OptimiseConfig,
    progress: &mut dyn FnMut(&Pass, u64),
) -> Result<OptimiseReport, OptimiseError> {
    let started = Instant::now();
    let deadline = started + cfg.budget;
    let (hname, hsched) = best_heuristic(g, st)?;
    let heuristic_batches = hsched.len() as u64;
    let mut best = hsched;
    let ctx = Ctx::new(g, st);
    let root = State::root(&ctx);
    let mut passes = Vec::new();
    let mut width = 1usize;
    // A state: the frontier's per-node counters and ready lists (about 12
    // bytes a node) plus per-type histograms; two levels live at once.
    let state_bytes = 12 * g.len() + 64 * g.types().len() + 256;
    let width_limit = cfg
        .max_width
        .min((cfg.memory_bytes / (2 * state_bytes)).max(1));
    let reached = |b: u64| b <= cfg.target;
    let stop = loop {
        if reached(best.len() as u64) {
            break OptimiseStop::Target;
        }
        if width > width_limit {
            break OptimiseStop::MaxWidth;
        }
        if Instant::now() >= deadline {
            break OptimiseStop::Budget;
        }
        let end = beam::pass(&ctx, &root, width, best.len() as u32, deadline);
        let (batches, finished) = match end {
            PassEnd::Done(types) => {
                let s = replay_types(g, st, &types);
                let b = s.len() as u64;
                if b < best.len() as u64 {
                    best = s;
                }
                (Some(b), true)
            }
            PassEnd::Pruned => (None, true),
            PassEnd::Timeout => (None, false),
        };
        let pass = Pass {
            width,
            batches,
            finished,
            at_s: started.elapsed().as_secs_f64(),
        };
        progress(&pass, best.len() as u64);
        passes.push(pass);
        if !finished {
            break OptimiseStop::Budget;
        }
        width *= 2;
    };
    validate_schedule(g, &best)?;
    Ok(OptimiseReport {
        batches: best.len() as u64,
        heuristic: hname,
        heuristic_batches,
        passes,
        width_limit,
        stop,
        seconds: started.elapsed().as_secs_f64(),
        schedule: best,
    })
}
