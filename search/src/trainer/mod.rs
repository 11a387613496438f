//! Tabular N-step Q-learning of FSM policies over one trace (ED-Batch §2.3),
//! with the fixes that make it improve on its prior on hard graphs.
//!
//! An episode runs Algorithm 1 from the empty schedule to the end. The reward
//! of a batch is ED-Batch Eq. 1 or, by default, −1 shaped by the remaining
//! lower bound ([`Reward`]); Q values follow N-step targets (see
//! `env::NStep`). Two exploration schemes ([`Exploration`]):
//!
//! - `step` (`step`): ε-greedy per decision and a greedy rollout every
//!   `rollout_every` episodes, the best kept — the reference implementation.
//! - `key` (`key`, the default): every episode runs a whole perturbed FSM and
//!   the perturbation is kept when it is no worse. Optionally seeded by a
//!   teacher schedule (the optimiser's best-known), replayed as a demonstration.
//!
//! Why `key`: on lattices, two-type trees and random DAGs the state keys alias
//! many frontiers (a sort-cond key recurs ~10 times per lattice episode), so a
//! per-step ε-greedy episode is not a run of any FSM, its returns mix the
//! effects of several random decisions, and the greedy policy of the learned
//! Q picks whichever action drew the luckiest return in each key: its rollouts
//! are 20–60 % *worse* than the prior, and the `step` scheme keeps the episode-0
//! table (docs/results/policies.md, "Why the Q-learning stalled").
//!
//! Whatever the scheme, the result is checked against every heuristic on the
//! training trace: if the FSM needs more batches than the best of them, the
//! table is emptied and that heuristic becomes the policy's fallback, so the
//! policy returned is never worse than the best heuristic.

mod env;
mod key;
mod step;

use std::time::Instant;

use engine::graph::{Graph, TypeId, lower_bound};
use engine::sched::{
    Encoding, Exploration, HEURISTICS, Hyperparameters, MAX_POLICY_TYPES, Reward, SameTypeDag,
    StateEncoder, TeacherSummary, UNKNOWN, heuristic, run_policy,
};
use serde::Serialize;

use crate::qtable::QTable;
use env::Env;

/// Default hyper-parameters: the reference implementation's, plus α, with
/// the bound-shaped reward and key exploration.
pub fn default_hyperparameters() -> Hyperparameters {
    Hyperparameters {
        learning_rate: 0.4,
        gamma: 1.0,
        epsilon_start: 0.5,
        epsilon_decay: 0.9,
        epsilon_floor: 0.05,
        n_step: 10,
        max_episodes: 1000,
        rollout_every: 50,
        alpha: 0.5,
        stop_ratio: 1.01,
        reward: Reward::Bound,
        exploration: Exploration::Key,
    }
}

/// The reference implementation's settings (Eq. 1 reward, ε-greedy per
/// decision): what the paper's Table 4 timed.
pub fn reference_hyperparameters() -> Hyperparameters {
    Hyperparameters {
        reward: Reward::Eq1,
        exploration: Exploration::Step,
        ..default_hyperparameters()
    }
}

/// What to train.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    /// State encoding.
    pub encoding: Encoding,
    /// Hyper-parameters.
    pub hyper: Hyperparameters,
    /// Seed of the exploration stream.
    pub seed: u64,
}

/// A schedule to learn from (the `key` scheme replays it first).
#[derive(Clone, Debug)]
pub struct Teacher {
    /// Its batch types, in order (Algorithm-1 moves on the training graph).
    pub types: Vec<TypeId>,
    /// Where it came from (for the policy file).
    pub source: String,
    /// A certified lower bound of the graph, if known: training stops when the
    /// FSM reaches it.
    pub bound: Option<u64>,
}

/// Why training stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The FSM reached `stop_ratio` × lower bound.
    LowerBound,
    /// The FSM reached the teacher's certified bound: it is optimal.
    Target,
    /// The episode budget ran out.
    Budget,
}

impl StopReason {
    /// Name as written in policy files.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::LowerBound => "lower-bound",
            StopReason::Target => "target",
            StopReason::Budget => "budget",
        }
    }
}

/// One point of the learning curve.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rollout {
    /// Episodes trained before it.
    pub episode: u32,
    /// Batches of the greedy policy then (`key`: the incumbent FSM's).
    pub batches: u64,
    /// Fewest batches so far.
    pub best: u64,
    /// States in the table at that point.
    pub states: usize,
}

/// The learning curve of a scheme, and its episode counts.
#[derive(Clone, Debug, Default)]
pub(crate) struct Curve {
    points: Vec<Rollout>,
    episodes: u32,
    best_episode: u32,
}

impl Curve {
    fn start(batches: u64, states: usize) -> Self {
        Curve {
            points: vec![Rollout {
                episode: 0,
                batches,
                best: batches,
                states,
            }],
            episodes: 0,
            best_episode: 0,
        }
    }

    fn push(&mut self, r: Rollout) {
        self.points.push(r);
    }
}

/// The outcome of [`train`].
#[derive(Clone, Debug, Serialize)]
pub struct TrainReport {
    /// Encoding trained.
    pub encoding: Encoding,
    /// Episodes run.
    pub episodes: u32,
    /// Batches of the returned policy (the FSM as the runtime runs it) on the
    /// training trace.
    pub best_batches: u64,
    /// Batches of the best greedy policy met in training.
    pub rollout_batches: u64,
    /// Batches of the learned FSM before the check against the heuristics
    /// (equal to `best_batches` unless `fallback` is set).
    pub learned_batches: u64,
    /// Episode count when it was found (0: the prior).
    pub best_episode: u32,
    /// Batches of the prior (typewise) on the trace: the curve's episode 0.
    pub prior_batches: u64,
    /// The teacher's source and batches, if one was given.
    pub teacher: Option<TeacherSummary>,
    /// The best heuristic on the trace and its batches.
    pub best_heuristic: (String, u64),
    /// The policy's fallback when not typewise: the best heuristic, when the
    /// learned FSM was worse than it (the table is then empty).
    pub fallback: Option<String>,
    /// Lower bound of the trace (ED-Batch A.3).
    pub lower_bound: u64,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// The learning curve: every `rollout_every` episodes (and at the end).
    pub rollouts: Vec<Rollout>,
    /// Node executions performed (all episodes and rollouts).
    pub node_steps: u64,
    /// Wall time (not written to policy files, which must be reproducible).
    pub seconds: f64,
}

/// A trained policy: the kept Q-table and the type names its tokens index.
#[derive(Clone, Debug)]
pub struct Trained {
    /// Best Q-table; its stored actions (`chosen`) are the FSM.
    pub table: QTable,
    /// Policy type names (trace type names, sorted).
    pub types: Vec<String>,
    /// Report.
    pub report: TrainReport,
}

/// Policy tokens of the trace's types: their ranks in name order. Types past
/// [`MAX_POLICY_TYPES`] get [`UNKNOWN`] (see [`check_trainable`]).
pub fn type_ranks(g: &Graph) -> (Vec<String>, Vec<u16>) {
    let mut names: Vec<String> = g.types().iter().map(|(_, t)| t.name.clone()).collect();
    names.sort();
    let rank = g
        .types()
        .iter()
        .map(|(_, t)| {
            names
                .binary_search(&t.name)
                .ok()
                .filter(|&i| i < MAX_POLICY_TYPES)
                .map_or(UNKNOWN, |i| i as u16)
        })
        .collect();
    (names, rank)
}

/// Refuses graphs whose types a policy cannot name (more than
/// [`MAX_POLICY_TYPES`]).
pub fn check_trainable(g: &Graph) -> Result<(), String> {
    let n = g.types().len();
    if n > MAX_POLICY_TYPES {
        return Err(format!(
            "the trace has {n} types; a policy can name at most {MAX_POLICY_TYPES}"
        ));
    }
    Ok(())
}

/// Trains a policy on `g`. Deterministic for a given graph and config.
pub fn train(
    g: &Graph,
    st: &SameTypeDag,
    cfg: &TrainConfig,
    progress: &mut dyn FnMut(u32, u64),
) -> Trained {
    train_with(g, st, cfg, None, progress)
}

/// [`train`] with a teacher schedule (used by the `key` scheme; the `step`
/// scheme ignores it, but its batches are still reported).
pub fn train_with(
    g: &Graph,
    st: &SameTypeDag,
    cfg: &TrainConfig,
    teacher: Option<&Teacher>,
    progress: &mut dyn FnMut(u32, u64),
) -> Trained {
    let started = Instant::now();
    let h = &cfg.hyper;
    let (types, rank) = type_ranks(g);
    let mut token_type = vec![TypeId(0); types.len()];
    for (t, _) in g.types().iter() {
        if let Some(slot) = token_type.get_mut(usize::from(rank[t.index()])) {
            *slot = t;
        }
    }
    let lb = lower_bound(g).total;
    let encoder = StateEncoder::tracking(cfg.encoding);
    let mut env = Env::new(g, st, encoder, rank, token_type, h);
    let target = teacher.and_then(|t| t.bound).unwrap_or(0);
    let stop = |b: u64| (b as f64) <= h.stop_ratio * lb as f64 || b <= target;
    let teacher_types = teacher.map(|t| t.types.as_slice());
    let teacher_summary = teacher.map(|t| TeacherSummary {
        source: t.source.clone(),
        batches: crate::optimise::replay_types(g, st, &t.types).len() as u64,
    });
    let mut table = QTable::new();
    let prior = env.fsm_run(&mut table, false);
    let (mut table, curve) = match h.exploration {
        Exploration::Step => step::run(&mut env, h, cfg.seed, &stop, progress),
        Exploration::Key => key::run(&mut env, h, cfg.seed, teacher_types, &stop, progress),
    };
    let rollout_batches = curve.points.iter().map(|p| p.best).min().unwrap_or(prior);
    let mut fsm = complete(&mut env, &mut table);
    let learned_batches = fsm;
    let best_heuristic = best_heuristic(g, st);
    let mut fallback = None;
    if fsm > best_heuristic.1 {
        table.clear_chosen();
        fsm = best_heuristic.1;
        fallback = Some(best_heuristic.0.clone());
    }
    let stop_reason = if fsm <= target {
        StopReason::Target
    } else if stop(fsm) {
        StopReason::LowerBound
    } else {
        StopReason::Budget
    };
    Trained {
        table,
        types,
        report: TrainReport {
            encoding: cfg.encoding,
            episodes: curve.episodes,
            best_batches: fsm,
            rollout_batches,
            learned_batches,
            best_episode: curve.best_episode,
            prior_batches: prior,
            teacher: teacher_summary,
            best_heuristic,
            fallback,
            lower_bound: lb,
            stop_reason,
            rollouts: curve.points,
            node_steps: env.node_steps,
            seconds: started.elapsed().as_secs_f64(),
        },
    }
}

/// Stores the prior's action in every state the final FSM run decides by the
/// prior, when all its visits there took the same action, and
/// [`DEFER`](engine::sched::DEFER) where they took different ones (the
/// encoding cannot tell those visits apart: the fallback decides there, as it
/// did) — so the table covers the training trace, no decision is a miss, and
/// not a single decision changes. Returns the FSM's batches.
fn complete(env: &mut Env, table: &mut QTable) -> u64 {
    // Visits that took different actions defer to the fallback.
    const MIXED: u16 = engine::sched::DEFER;
    let mut taken: Vec<(u32, u16)> = Vec::new();
    env.reset();
    while !env.f.is_done() {
        let s = table.state_id(&env.key);
        let t = env.fsm_decision(table, s);
        if table.state(s).chosen.is_none() {
            let a = env.token(t);
            match taken.iter_mut().find(|x| x.0 == s) {
                Some(x) if x.1 != a => x.1 = MIXED,
                Some(_) => {}
                None => taken.push((s, a)),
            }
        }
        env.act(t);
    }
    let batches = env.f.batches() as u64;
    for (s, a) in taken {
        table.force_chosen(s, a);
    }
    batches
}

/// The heuristic with fewest batches (first of equals in [`HEURISTICS`]
/// order). Heuristics cannot fail on a valid graph; one that does is skipped.
fn best_heuristic(g: &Graph, st: &SameTypeDag) -> (String, u64) {
    let mut best = ("typewise".to_string(), u64::MAX);
    for name in HEURISTICS {
        if let Some(mut p) = heuristic(name)
            && let Ok((s, _)) = run_policy(g, st, p.as_mut())
            && (s.len() as u64) < best.1
        {
            best = (name.to_string(), s.len() as u64);
        }
    }
    best
}
