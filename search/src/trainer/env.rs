//! The training environment: Algorithm 1 on one graph, its state keys, rewards,
//! and N-step Q updates — shared by both exploration schemes.

use engine::graph::{Graph, NodeId, TypeId};
use engine::sched::{
    Frontier, Hyperparameters, Reward, SameTypeDag, StateEncoder, typewise_choice,
};

use crate::qtable::QTable;

/// One transition of the current episode.
pub(crate) struct Step {
    pub state: u32,
    pub action: u16,
    pub reward: f64,
}

/// The environment's working state, reused across episodes.
pub(crate) struct Env<'g> {
    pub f: Frontier<'g>,
    pub enc: StateEncoder,
    /// Policy token of every trace type.
    pub rank: Vec<u16>,
    /// Trace type of every policy token.
    pub token_type: Vec<TypeId>,
    pub key: Vec<u16>,
    pub steps: Vec<Step>,
    pub batch: Vec<NodeId>,
    /// Node executions so far (all episodes).
    pub node_steps: u64,
    reward: Reward,
    alpha: f64,
}

impl<'g> Env<'g> {
    pub fn new(
        g: &'g Graph,
        st: &'g SameTypeDag,
        encoder: StateEncoder,
        rank: Vec<u16>,
        token_type: Vec<TypeId>,
        h: &Hyperparameters,
    ) -> Self {
        Env {
            f: Frontier::new(g, st),
            enc: encoder,
            rank,
            token_type,
            key: Vec::new(),
            steps: Vec::new(),
            batch: Vec::new(),
            node_steps: 0,
            reward: h.reward,
            alpha: h.alpha,
        }
    }

    /// Back to the initial state; the first state's key is in `self.key`.
    pub fn reset(&mut self) {
        self.f.reset();
        self.enc.start(&self.f);
        self.steps.clear();
        self.encode();
    }

    /// Encodes the current state into `self.key`.
    pub fn encode(&mut self) {
        self.enc.encode(&self.f, &self.rank, &mut self.key);
    }

    /// The token of trace type `t`.
    #[inline]
    pub fn token(&self, t: TypeId) -> u16 {
        self.rank[t.index()]
    }

    /// The prior's choice (typewise), which is also the runtime fallback.
    #[inline]
    pub fn prior(&self) -> TypeId {
        typewise_choice(&self.f)
    }

    /// The trace type of token `a`, if it has a ready node now.
    #[inline]
    pub fn ready_action(&self, a: u16) -> Option<TypeId> {
        let t = *self.token_type.get(usize::from(a))?;
        (self.f.ready_count(t) > 0).then_some(t)
    }

    /// The runtime FSM's decision in state `s` with `table`: its stored
    /// action if ready, else the fallback (typewise).
    pub fn fsm_decision(&self, table: &QTable, s: u32) -> TypeId {
        table
            .state(s)
            .chosen
            .and_then(|a| self.ready_action(a))
            .unwrap_or_else(|| self.prior())
    }

    /// Batches type `t`; returns the reward (see [`Reward`]). Leaves the next
    /// state's key in `self.key` unless the graph is done.
    pub fn act(&mut self, t: TypeId) -> f64 {
        let before = self.enc.bound().map_or(0, |b| b.bound());
        let ratio = self.f.ratio(t);
        self.batch.clear();
        self.node_steps += self.f.step(t, &mut self.batch) as u64;
        self.enc.observe(&self.f, t, &self.batch);
        if !self.f.is_done() {
            self.encode();
        }
        match self.reward {
            Reward::Eq1 => -1.0 + self.alpha * ratio,
            Reward::Bound => {
                let after = self.enc.bound().map_or(0, |b| b.bound());
                -1.0 + f64::from(before.saturating_sub(after))
            }
        }
    }

    /// Runs the FSM of `table` (stored actions, typewise elsewhere) from the
    /// start; returns its batches. With `record`, every visited state that has
    /// no stored action gets the one taken (distilling the run into the table).
    pub fn fsm_run(&mut self, table: &mut QTable, record: bool) -> u64 {
        self.reset();
        while !self.f.is_done() {
            let s = table.state_id(&self.key);
            let t = self.fsm_decision(table, s);
            if record {
                table.set_chosen(s, self.token(t));
            }
            self.act(t);
        }
        self.f.batches() as u64
    }
}

/// N-step Q updates, shared by both schemes: after each step, the transition
/// N steps back moves toward Σ_{k<N} γ^k r + γ^N max_a' Q(S_{t+1}, a') (the
/// real maximum over the next state's updated actions; 0 past the end, and 0
/// for a state none of whose actions was updated yet); at the end of the
/// episode the last N−1 transitions move toward their plain discounted sums.
pub(crate) struct NStep {
    n: usize,
    gamma: f64,
    gamma_n: f64,
    lr: f64,
}

impl NStep {
    pub fn new(h: &Hyperparameters) -> Self {
        let n = h.n_step.max(1) as usize;
        NStep {
            n,
            gamma: h.gamma,
            gamma_n: h.gamma.powi(n as i32),
            lr: h.learning_rate,
        }
    }

    /// After a step: `next` is the state reached (`None` at the end).
    pub fn after_step(&self, table: &mut QTable, steps: &[Step], next: Option<u32>) {
        let len = steps.len();
        if len < self.n {
            return;
        }
        let boot = next.and_then(|s| table.max_q(s)).unwrap_or(0.0);
        let i = len - self.n;
        let target = discounted(&steps[i..], self.gamma) + self.gamma_n * boot;
        table.update(steps[i].state, steps[i].action, target, self.lr);
    }

    /// At the end of an episode.
    pub fn finish(&self, table: &mut QTable, steps: &[Step]) {
        let len = steps.len();
        for i in (len + 1).saturating_sub(self.n)..len {
            let target = discounted(&steps[i..], self.gamma);
            table.update(steps[i].state, steps[i].action, target, self.lr);
        }
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
