//! Tabular Q-learning with N-step bootstrapping over one trace (ED-Batch §2.3).
//!
//! An episode runs Algorithm 1 from the empty schedule to the end, choosing the
//! next type ε-greedily; the reward of batching type a in state S_t is Eq. 1,
//! r = −1 + α·|Frontier_a(G_t)| / |Frontier(G^a_t)|. After each step, the
//! transition N steps back is updated toward
//! Σ_{k<N} γ^k r_{t−N+1+k} + γ^N · max_a' Q(S_{t+1}, a'),
//! with the *real* maximum over the next state's updated actions (0 at the end
//! of the graph, and 0 for a state none of whose actions was updated yet). The
//! reference implementation floors that maximum at 0; since every return is
//! negative, that discards the bootstrap term and N-step learning degenerates
//! into truncated Monte Carlo — we keep the maximum.
//!
//! Every `rollout_every` episodes (and before the first) a greedy rollout counts
//! batches; the Q-table of the best rollout is kept, and training stops once it
//! is within `stop_ratio` of the lower bound.

use std::time::Instant;

use engine::graph::{Graph, TypeId, lower_bound};
use engine::sched::{
    Encoding, Frontier, Hyperparameters, SameTypeDag, StateEncoder, typewise_choice,
};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::qtable::QTable;

/// Default hyper-parameters: those of the reference implementation, plus α.
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

/// Why training stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// A greedy rollout reached `stop_ratio` × lower bound.
    LowerBound,
    /// The episode budget ran out.
    Budget,
}

impl StopReason {
    /// Name as written in policy files.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::LowerBound => "lower-bound",
            StopReason::Budget => "budget",
        }
    }
}

/// One greedy rollout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rollout {
    /// Episodes trained before it.
    pub episode: u32,
    /// Batches of the greedy schedule.
    pub batches: u64,
    /// States in the table at that point.
    pub states: usize,
}

/// The outcome of [`train`].
#[derive(Clone, Debug, Serialize)]
pub struct TrainReport {
    /// Encoding trained.
    pub encoding: Encoding,
    /// Episodes run.
    pub episodes: u32,
    /// Batches of the exported FSM on the training trace.
    pub best_batches: u64,
    /// Batches of the best greedy rollout (the kept table's).
    pub rollout_batches: u64,
    /// Episode count at that rollout.
    pub best_episode: u32,
    /// Lower bound of the trace.
    pub lower_bound: u64,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Every rollout, in order.
    pub rollouts: Vec<Rollout>,
    /// Node executions performed (all episodes and rollouts).
    pub node_steps: u64,
    /// Wall time (not written to policy files, which must be reproducible).
    pub seconds: f64,
}

/// A trained policy: the kept Q-table and the type names its tokens index.
#[derive(Clone, Debug)]
pub struct Trained {
    /// Best Q-table.
    pub table: QTable,
    /// Policy type names (trace type names, sorted).
    pub types: Vec<String>,
    /// Report.
    pub report: TrainReport,
}

/// Policy tokens of the trace's types: their ranks in name order.
pub fn type_ranks(g: &Graph) -> (Vec<String>, Vec<u16>) {
    let mut names: Vec<String> = g.types().iter().map(|(_, t)| t.name.clone()).collect();
    names.sort();
    let rank = g
        .types()
        .iter()
        .map(|(_, t)| {
            names
                .binary_search(&t.name)
                .map_or(engine::sched::UNKNOWN, |i| i as u16)
        })
        .collect();
    (names, rank)
}

/// One transition of the current episode.
struct Step {
    state: u32,
    action: u16,
    reward: f64,
}

/// The training loop's working state, reused across episodes.
struct Episode<'g> {
    f: Frontier<'g>,
    enc: StateEncoder,
    rank: Vec<u16>,
    token_type: Vec<engine::graph::TypeId>,
    key: Vec<u16>,
    steps: Vec<Step>,
    batch: Vec<engine::graph::NodeId>,
    node_steps: u64,
}

impl<'g> Episode<'g> {
    /// Greedy action of the current state: the highest Q among the ready
    /// actions, where the typewise choice, if never tried here, counts as good as
    /// the best tried action and wins the tie. A state with no tried action thus
    /// follows typewise, and learning departs from typewise only where a tried
    /// action proved better — the heuristic is the prior, not a competitor the
    /// first random update can displace. Ties among tried actions go to the one
    /// earlier in the state key.
    fn greedy(&self, table: &QTable, s: u32) -> TypeId {
        let tw = typewise_choice(&self.f);
        let st = table.state(s);
        let Some((a, q)) = st.best() else {
            return tw;
        };
        // Typewise's value: learned if tried, else as good as the best (and it wins ties).
        let tw_q = st.get(self.rank[tw.index()]).unwrap_or(q);
        let t = self.token_type[usize::from(a)];
        if q > tw_q && self.f.ready_count(t) > 0 {
            t
        } else {
            tw
        }
    }

    /// The FSM's decision in state `s`, as the runtime takes it: the stored
    /// action if ready, else typewise.
    fn fsm_decision(&self, table: &QTable, s: u32) -> TypeId {
        if let Some(a) = table.decision(s) {
            let t = self.token_type[usize::from(a)];
            if self.f.ready_count(t) > 0 {
                return t;
            }
        }
        typewise_choice(&self.f)
    }

    fn step(&mut self, t: engine::graph::TypeId, alpha: f64) -> f64 {
        let reward = -1.0 + alpha * self.f.ratio(t);
        self.batch.clear();
        self.node_steps += self.f.step(t, &mut self.batch) as u64;
        reward
    }

    /// A greedy episode without updates; returns its batch count. With
    /// `record`, stores each visited state's action in the table (distilling
    /// the rollout into the FSM).
    fn rollout(&mut self, table: &mut QTable, record: bool) -> u64 {
        self.f.reset();
        while !self.f.is_done() {
            self.enc.encode(&self.f, &self.rank, &mut self.key);
            let s = table.state_id(&self.key);
            let t = self.greedy(table, s);
            if record {
                table.set_chosen(s, self.rank[t.index()]);
            }
            self.step(t, 0.0);
        }
        self.f.batches() as u64
    }

    /// An episode deciding exactly as the runtime FSM would with this table;
    /// returns its batch count.
    fn fsm_rollout(&mut self, table: &mut QTable) -> u64 {
        self.f.reset();
        while !self.f.is_done() {
            self.enc.encode(&self.f, &self.rank, &mut self.key);
            let s = table.state_id(&self.key);
            let t = self.fsm_decision(table, s);
            self.step(t, 0.0);
        }
        self.f.batches() as u64
    }
}

/// Trains a policy on `g`. Deterministic for a given graph and config.
pub fn train(
    g: &Graph,
    st: &SameTypeDag,
    cfg: &TrainConfig,
    progress: &mut dyn FnMut(u32, u64),
) -> Trained {
    let started = Instant::now();
    let h = &cfg.hyper;
    let (types, rank) = type_ranks(g);
    let mut token_type = vec![engine::graph::TypeId(0); types.len()];
    for (t, _) in g.types().iter() {
        token_type[usize::from(rank[t.index()])] = t;
    }
    let lb = lower_bound(g).total;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let mut ep = Episode {
        f: Frontier::new(g, st),
        enc: StateEncoder::new(cfg.encoding),
        rank,
        token_type,
        key: Vec::new(),
        steps: Vec::new(),
        batch: Vec::new(),
        node_steps: 0,
    };
    let mut table = QTable::new();
    let first = ep.rollout(&mut table, false);
    let mut best = (first, 0u32, table.clone());
    let mut rollouts = vec![Rollout {
        episode: 0,
        batches: first,
        states: table.len(),
    }];
    let mut eps = h.epsilon_start;
    let mut episodes = 0;
    let n = h.n_step.max(1) as usize;
    let gamma_n = h.gamma.powi(n as i32);
    let stop = |b: u64| (b as f64) <= h.stop_ratio * lb as f64;
    let mut ready: Vec<engine::graph::TypeId> = Vec::new();
    // Train at least until the first rollout, so that even where the untrained
    // greedy policy (typewise) already meets the bound, a trained table gets
    // the chance to tie it (ties keep the newer table).
    let min_episodes = h.rollout_every.max(1);
    while episodes < h.max_episodes && !(episodes >= min_episodes && stop(best.0)) {
        ep.f.reset();
        ep.steps.clear();
        ep.enc.encode(&ep.f, &ep.rank, &mut ep.key);
        let mut s = table.state_id(&ep.key);
        while !ep.f.is_done() {
            let t = if rng.random_bool(eps.clamp(0.0, 1.0)) {
                ready.clear();
                ready.extend(ep.f.ready_types());
                ready[rng.random_range(0..ready.len())]
            } else {
                ep.greedy(&table, s)
            };
            let a = ep.rank[t.index()];
            let reward = ep.step(t, h.alpha);
            ep.steps.push(Step {
                state: s,
                action: a,
                reward,
            });
            let done = ep.f.is_done();
            if !done {
                ep.enc.encode(&ep.f, &ep.rank, &mut ep.key);
                s = table.state_id(&ep.key);
            }
            let len = ep.steps.len();
            if len >= n {
                // Bootstrap from the state reached now (0 past the end).
                let next = if done {
                    0.0
                } else {
                    table.max_q(s).unwrap_or(0.0)
                };
                let i = len - n;
                let target = discounted(&ep.steps[i..], h.gamma) + gamma_n * next;
                table.update(
                    ep.steps[i].state,
                    ep.steps[i].action,
                    target,
                    h.learning_rate,
                );
            }
        }
        // Transitions with fewer than N steps left end at the terminal state:
        // no bootstrap term.
        let len = ep.steps.len();
        for i in (len + 1).saturating_sub(n)..len {
            let target = discounted(&ep.steps[i..], h.gamma);
            table.update(
                ep.steps[i].state,
                ep.steps[i].action,
                target,
                h.learning_rate,
            );
        }
        episodes += 1;
        eps = (eps * h.epsilon_decay).max(h.epsilon_floor);
        if h.rollout_every > 0 && episodes % h.rollout_every == 0 {
            let b = ep.rollout(&mut table, false);
            rollouts.push(Rollout {
                episode: episodes,
                batches: b,
                states: table.len(),
            });
            // Ties go to the newer table: trained beats untrained at equal batches.
            if b <= best.0 {
                best = (b, episodes, table.clone());
            }
            progress(episodes, best.0);
        }
    }
    let stop_reason = if stop(best.0) {
        StopReason::LowerBound
    } else {
        StopReason::Budget
    };
    // Distil the kept table's greedy rollout into the FSM, then count what the
    // FSM itself does (a state met twice keeps its first action, so this can
    // differ from the rollout; the FSM's own count is the one reported).
    let mut kept = best.2;
    ep.rollout(&mut kept, true);
    let fsm_batches = ep.fsm_rollout(&mut kept);
    Trained {
        table: kept,
        types,
        report: TrainReport {
            encoding: cfg.encoding,
            episodes,
            best_batches: fsm_batches,
            rollout_batches: best.0,
            best_episode: best.1,
            lower_bound: lb,
            stop_reason,
            rollouts,
            node_steps: ep.node_steps,
            seconds: started.elapsed().as_secs_f64(),
        },
    }
}

/// Σ_k γ^k r_k over `steps` (the caller passes at most N of them).
fn discounted(steps: &[Step], gamma: f64) -> f64 {
    let mut g = 1.0;
    let mut sum = 0.0;
    for s in steps {
        sum += g * s.reward;
        g *= gamma;
    }
    sum
}
