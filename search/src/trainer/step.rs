//! `exploration: step` — the reference implementation's scheme: ε-greedy per
//! decision, a greedy rollout every `rollout_every` episodes, the table of the
//! best rollout kept.
//!
//! The greedy action of a state is the highest Q among its ready actions,
//! where the prior's (typewise's) action, if never tried there, counts as good
//! as the best tried one and wins the tie; ties among tried actions go to the
//! action earlier in the state key.

use engine::graph::TypeId;
use engine::sched::Hyperparameters;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::env::{Env, NStep, Step};
use super::{Curve, Rollout};
use crate::qtable::QTable;

/// Greedy action in state `s` (see the module docs).
fn greedy(env: &Env, table: &QTable, s: u32) -> TypeId {
    let tw = env.prior();
    let st = table.state(s);
    let Some((a, q)) = st.best() else {
        return tw;
    };
    let tw_q = st.get(env.token(tw)).unwrap_or(q);
    match env.ready_action(a) {
        Some(t) if q > tw_q => t,
        _ => tw,
    }
}

/// A greedy episode without updates; returns its batch count. With `record`,
/// stores each visited state's action (distilling the rollout into the FSM).
fn rollout(env: &mut Env, table: &mut QTable, record: bool) -> u64 {
    env.reset();
    while !env.f.is_done() {
        let s = table.state_id(&env.key);
        let t = greedy(env, table, s);
        if record {
            table.set_chosen(s, env.token(t));
        }
        env.act(t);
    }
    env.f.batches() as u64
}

/// Trains; returns the kept table (distilled: its greedy rollout's actions
/// stored) and the curve.
pub(crate) fn run(
    env: &mut Env,
    h: &Hyperparameters,
    seed: u64,
    stop: &dyn Fn(u64) -> bool,
    progress: &mut dyn FnMut(u32, u64),
) -> (QTable, Curve) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut table = QTable::new();
    let first = rollout(env, &mut table, false);
    let mut best = (first, 0u32, table.clone());
    let mut curve = Curve::start(first, table.len());
    let mut eps = h.epsilon_start;
    let mut episodes = 0;
    let nstep = NStep::new(h);
    let mut ready: Vec<TypeId> = Vec::new();
    // Train at least until the first rollout, so that even where the untrained
    // greedy policy (typewise) already meets the bound, a trained table gets
    // the chance to tie it (ties keep the newer table).
    let min_episodes = h.rollout_every.max(1);
    while episodes < h.max_episodes && !(episodes >= min_episodes && stop(best.0)) {
        env.reset();
        let mut s = table.state_id(&env.key);
        while !env.f.is_done() {
            let t = if rng.random_bool(eps.clamp(0.0, 1.0)) {
                ready.clear();
                ready.extend(env.f.ready_types());
                ready[rng.random_range(0..ready.len())]
            } else {
                greedy(env, &table, s)
            };
            let action = env.token(t);
            let reward = env.act(t);
            env.steps.push(Step {
                state: s,
                action,
                reward,
            });
            let next = (!env.f.is_done()).then(|| table.state_id(&env.key));
            nstep.after_step(&mut table, &env.steps, next);
            if let Some(n) = next {
                s = n;
            }
        }
        nstep.finish(&mut table, &env.steps);
        episodes += 1;
        eps = (eps * h.epsilon_decay).max(h.epsilon_floor);
        if h.rollout_every > 0 && episodes.is_multiple_of(h.rollout_every) {
            let b = rollout(env, &mut table, false);
            // Ties go to the newer table: trained beats untrained at equal batches.
            if b <= best.0 {
                best = (b, episodes, table.clone());
            }
            curve.push(Rollout {
                episode: episodes,
                batches: b,
                best: best.0,
                states: table.len(),
            });
            progress(episodes, best.0);
        }
    }
    curve.episodes = episodes;
    curve.best_episode = best.1;
    // Distil the kept table's greedy rollout into the FSM.
    let mut kept = best.2;
    rollout(env, &mut kept, true);
    (kept, curve)
}
