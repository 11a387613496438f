//! The tabular Q function: per state (an encoded key), the Q value of every action
//! tried there. States are numbered in first-visit order; the key → number map is
//! only used for look-ups, so nothing depends on hash order.

use std::collections::HashMap;

/// Q values of one state: `(action token, value)` in first-update order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateQ {
    /// The state's key (tokens of [`engine::sched::StateEncoder`]).
    pub key: Box<[u16]>,
    /// Actions updated at least once, with their values.
    pub q: Vec<(u16, f64)>,
    /// The action the final greedy rollout took here (see [`QTable::set_chosen`]).
    pub chosen: Option<u16>,
}

impl StateQ {
    /// The value of `action`, if it was ever updated.
    pub fn get(&self, action: u16) -> Option<f64> {
        self.q.iter().find(|(a, _)| *a == action).map(|x| x.1)
    }

    fn slot(&mut self, action: u16) -> &mut f64 {
        let i = match self.q.iter().position(|(a, _)| *a == action) {
            Some(i) => i,
            None => {
                self.q.push((action, 0.0));
                self.q.len() - 1
            }
        };
        &mut self.q[i].1
    }

    /// The greedy action: highest Q; ties go to the action standing earlier in
    /// the state key (for sorted encodings: the type with more ready nodes).
    pub fn best(&self) -> Option<(u16, f64)> {
        let pos = |a: u16| {
            self.key
                .iter()
                .position(|&t| t & engine::sched::TYPE_MASK == a)
                .unwrap_or(usize::MAX)
        };
        self.q
            .iter()
            .copied()
            .max_by(|x, y| x.1.total_cmp(&y.1).then_with(|| pos(y.0).cmp(&pos(x.0))))
    }
}

/// The Q-table.
#[derive(Clone, Debug, Default)]
pub struct QTable {
    index: HashMap<Box<[u16]>, u32>,
    states: Vec<StateQ>,
}

impl QTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of `key`, adding the state if new.
    pub fn state_id(&mut self, key: &[u16]) -> u32 {
        if let Some(&i) = self.index.get(key) {
            return i;
        }
        let i = self.states.len() as u32;
        let key: Box<[u16]> = key.into();
        self.index.insert(key.clone(), i);
        self.states.push(StateQ {
            key,
            q: Vec::new(),
            chosen: None,
        });
        i
    }

    /// The state numbered `id`.
    pub fn state(&self, id: u32) -> &StateQ {
        &self.states[id as usize]
    }

    /// Moves Q(s, a) toward `target` by `lr`.
    pub fn update(&mut self, s: u32, a: u16, target: f64, lr: f64) {
        let q = self.states[s as usize].slot(a);
        *q += lr * (target - *q);
    }

    /// Records the action a greedy rollout took in state `s` (the first one, if
    /// the rollout met the state several times).
    pub fn set_chosen(&mut self, s: u32, a: u16) {
        let st = &mut self.states[s as usize];
        st.chosen.get_or_insert(a);
    }

    /// Stores `a` as state `s`'s action, replacing any (the `key` scheme's
    /// accepted perturbations).
    pub fn force_chosen(&mut self, s: u32, a: u16) {
        self.states[s as usize].chosen = Some(a);
    }

    /// Forgets every stored action (the table then decides nothing: the
    /// runtime falls back everywhere).
    pub fn clear_chosen(&mut self) {
        self.states.iter_mut().for_each(|s| s.chosen = None);
    }

    /// Highest Q among the updated actions of state `s`; `None` if none was.
    pub fn max_q(&self, s: u32) -> Option<f64> {
        self.states[s as usize].best().map(|b| b.1)
    }

    /// Every state, in first-visit order.
    pub fn states(&self) -> &[StateQ] {
        &self.states
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// True before the first state.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
}
