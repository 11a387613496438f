//! `exploration: key` — exploration that keeps every episode a run of one
//! whole FSM, so that each episode *measures* a candidate policy.
//!
//! The incumbent is an FSM table (a stored action per state; the prior,
//! typewise, elsewhere). An episode perturbs it: at the first visit of a state
//! the episode may give it another ready action, and then takes that action at
//! every later visit of the state in the episode (if ready; else the prior) —
//! exactly what the runtime FSM of the perturbed table does. One decision per
//! episode, drawn uniformly among the incumbent's decisions, is always
//! perturbed; every other first visit is, with probability ε (decaying as in
//! the `step` scheme). The other action is, with even odds, the best by Q
//! (an action never tried there first, in key order) or uniform among the
//! others. The environment is deterministic, so the episode's batch count *is*
//! the candidate FSM's: the candidate replaces the incumbent when it needs no
//! more batches (ties move along plateaus). Q values learn from every episode
//! by the same N-step updates as the `step` scheme and steer the choice of
//! actions to try.
//!
//! A teacher schedule (the optimiser's best-known), when given, is replayed
//! first as a demonstration: Q learns from its returns, and two candidate
//! tables are tried — each state on its path storing the teacher's first
//! action there, or its most frequent one (ties: first) — each kept if it
//! beats the incumbent.

use engine::graph::TypeId;
use engine::sched::Hyperparameters;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::env::{Env, NStep, Step};
use super::{Curve, Rollout};
use crate::qtable::QTable;

const NONE: u16 = u16::MAX;

/// (state, action) pairs: a set of stored actions to apply to a table.
type Changes = Vec<(u32, u16)>;

/// Per-state scratch of one episode.
struct Marks {
    /// Episode number of the state's first visit in the current episode.
    seen: Vec<u32>,
    /// The episode's action for the state ([`NONE`]: the incumbent's rule).
    action: Vec<u16>,
}

impl Marks {
    fn grow(&mut self, states: usize) {
        self.seen.resize(states, u32::MAX);
        self.action.resize(states, NONE);
    }
}

struct Trainer<'a, 'g> {
    env: &'a mut Env<'g>,
    table: QTable,
    marks: Marks,
    nstep: NStep,
    rng: Xoshiro256PlusPlus,
    /// The incumbent's batches.
    best: u64,
    best_episode: u32,
    /// Perturbations of the current episode.
    changes: Changes,
    ready: Vec<TypeId>,
}

impl Trainer<'_, '_> {
    /// An alternative to the incumbent's decision `current` in state `s`.
    fn alternative(&mut self, s: u32, current: TypeId) -> Option<u16> {
        self.ready.clear();
        let f = &self.env.f;
        self.ready.extend(f.ready_types().filter(|&t| t != current));
        if self.ready.is_empty() {
            return None;
        }
        if self.rng.random_bool(0.5) {
            let i = self.rng.random_range(0..self.ready.len());
            return Some(self.env.token(self.ready[i]));
        }
        // Best by Q; untried first, in key order (the key lists ready types).
        let st = self.table.state(s);
        let mut best: Option<(u16, f64)> = None;
        for &tok in st.key.iter() {
            let a = tok & engine::sched::TYPE_MASK;
            if tok & engine::sched::PHASE != 0 || self.env.ready_action(a).is_none() {
                continue;
            }
            if self.env.token(current) == a {
                continue;
            }
            let q = st.get(a).unwrap_or(f64::INFINITY);
            if best.is_none_or(|b| q > b.1) {
                best = Some((a, q));
            }
        }
        best.map(|b| b.0)
    }

    /// One episode of the perturbed incumbent (see the module docs); returns
    /// its batches. `eps`: probability of perturbing a state's first visit.
    fn episode(&mut self, ep: u32, eps: f64) -> u64 {
        let focus = self.rng.random_range(0..self.best.max(1));
        self.changes.clear();
        self.env.reset();
        let mut s = self.table.state_id(&self.env.key);
        let mut decision = 0u64;
        while !self.env.f.is_done() {
            self.marks.grow(self.table.len());
            let si = s as usize;
            if self.marks.seen[si] != ep {
                self.marks.seen[si] = ep;
                self.marks.action[si] = NONE;
                if decision == focus || self.rng.random_bool(eps) {
                    let current = self.env.fsm_decision(&self.table, s);
                    if let Some(a) = self.alternative(s, current) {
                        self.marks.action[si] = a;
                        self.changes.push((s, a));
                    }
                }
            }
            let t = match self.marks.action[si] {
                NONE => self.env.fsm_decision(&self.table, s),
                a => self.env.ready_action(a).unwrap_or_else(|| self.env.prior()),
            };
            self.step(&mut s, t);
            decision += 1;
        }
        self.nstep.finish(&mut self.table, &self.env.steps);
        self.env.f.batches() as u64
    }

    /// Takes `t` in state `*s`, updates Q, moves `*s` to the next state.
    fn step(&mut self, s: &mut u32, t: TypeId) {
        let action = self.env.token(t);
        let reward = self.env.act(t);
        self.env.steps.push(Step {
            state: *s,
            action,
            reward,
        });
        let next = (!self.env.f.is_done()).then(|| self.table.state_id(&self.env.key));
        self.nstep
            .after_step(&mut self.table, &self.env.steps, next);
        if let Some(n) = next {
            *s = n;
        }
    }

    /// Replays `teacher` (Q learns from it); returns the first and the most
    /// frequent teacher action of every state on its path.
    fn demonstrate(&mut self, teacher: &[TypeId]) -> (Changes, Changes) {
        self.env.reset();
        let mut s = self.table.state_id(&self.env.key);
        // (state, action, count), in first-visit order of (state, action).
        let mut seen: Vec<(u32, u16, u32)> = Vec::new();
        for &t in teacher {
            if self.env.f.is_done() || self.env.f.ready_count(t) == 0 {
                break;
            }
            let a = self.env.token(t);
            match seen.iter_mut().find(|x| x.0 == s && x.1 == a) {
                Some(x) => x.2 += 1,
                None => seen.push((s, a, 1)),
            }
            self.step(&mut s, t);
        }
        self.nstep.finish(&mut self.table, &self.env.steps);
        let mut first: Changes = Vec::new();
        let mut major: Vec<(u32, u16, u32)> = Vec::new();
        for &(s, a, c) in &seen {
            if !first.iter().any(|x| x.0 == s) {
                first.push((s, a));
            }
            match major.iter_mut().find(|x| x.0 == s) {
                Some(m) if c > m.2 => *m = (s, a, c),
                Some(_) => {}
                None => major.push((s, a, c)),
            }
        }
        (first, major.into_iter().map(|m| (m.0, m.1)).collect())
    }

    /// Tries the incumbent with `changes` applied; keeps it if no worse.
    fn try_table(&mut self, changes: &[(u32, u16)], ep: u32) -> u64 {
        let mut cand = self.table.clone();
        for &(s, a) in changes {
            cand.force_chosen(s, a);
        }
        let b = self.env.fsm_run(&mut cand, false);
        if b <= self.best {
            // Keep the candidate's choices; Q stays the trainer's.
            for &(s, a) in changes {
                self.table.force_chosen(s, a);
            }
            if b < self.best {
                self.best_episode = ep;
            }
            self.best = b;
        }
        b
    }
}

/// Trains (see the module docs); returns the incumbent table and the curve.
pub(crate) fn run(
    env: &mut Env,
    h: &Hyperparameters,
    seed: u64,
    teacher: Option<&[TypeId]>,
    stop: &dyn Fn(u64) -> bool,
    progress: &mut dyn FnMut(u32, u64),
) -> (QTable, Curve) {
    let mut table = QTable::new();
    let first = env.fsm_run(&mut table, false);
    let mut tr = Trainer {
        env,
        table,
        marks: Marks {
            seen: Vec::new(),
            action: Vec::new(),
        },
        nstep: NStep::new(h),
        rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        best: first,
        best_episode: 0,
        changes: Vec::new(),
        ready: Vec::new(),
    };
    let mut curve = Curve::start(first, tr.table.len());
    let mut episodes = 0u32;
    let record = |tr: &Trainer, episodes: u32, curve: &mut Curve| {
        curve.push(Rollout {
            episode: episodes,
            batches: tr.best,
            best: tr.best,
            states: tr.table.len(),
        });
    };
    if let Some(teacher) = teacher {
        let (first_actions, majority) = tr.demonstrate(teacher);
        episodes += 1;
        for cand in [first_actions, majority] {
            if episodes >= h.max_episodes {
                break;
            }
            episodes += 1;
            tr.try_table(&cand, episodes);
        }
        record(&tr, episodes, &mut curve);
        progress(episodes, tr.best);
    }
    let mut eps = h.epsilon_start;
    while episodes < h.max_episodes && !stop(tr.best) {
        episodes += 1;
        let b = tr.episode(episodes, eps.clamp(0.0, 1.0));
        if b <= tr.best && !tr.changes.is_empty() {
            let changes = std::mem::take(&mut tr.changes);
            for &(s, a) in &changes {
                tr.table.force_chosen(s, a);
            }
            tr.changes = changes;
            if b < tr.best {
                tr.best_episode = episodes;
            }
            tr.best = b;
        }
        eps = (eps * h.epsilon_decay).max(h.epsilon_floor);
        if h.rollout_every > 0 && episodes.is_multiple_of(h.rollout_every) {
            record(&tr, episodes, &mut curve);
            progress(episodes, tr.best);
        }
    }
    if curve.points.last().is_none_or(|p| p.episode != episodes) {
        record(&tr, episodes, &mut curve);
    }
    curve.episodes = episodes;
    curve.best_episode = tr.best_episode;
    (tr.table, curve)
}
