//! Exact minimum-batch search over Algorithm 1 sequences on a small op DAG.
//!
//! A state is the set of executed ops (a `u128` bitmask). From a state, each
//! type with ready ops gives one move: run all its ready ops as one batch
//! (running fewer can never save a batch). `solve` computes the exact
//! minimum number of remaining batches by depth-first search, memoised per
//! state, skipping a move when one plus the lower bound of the state it leads
//! to cannot beat the best move found so far, and stopping early when the
//! state's own lower bound is reached. Every memo entry is exact (a skipped
//! move is provably no better), so a second walk can enumerate *all* optimal
//! sequences by following moves with `1 + solve(next) == solve(state)`.
//! Moves are tried in type-id order, so the enumeration order is
//! deterministic.

use std::collections::HashMap;

use super::{MAX_EXACT_OPS, MAX_SEARCH_STATES, OpDag};

/// Result of the in-cell schedule search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSearch {
    /// Fewest batches of any schedule (of the greedy one if not exhaustive).
    pub min_batches: usize,
    /// ED-Batch's lower bound for the whole DAG.
    pub lower_bound: usize,
    /// Minimum-batch schedules in enumeration order; each is a list of
    /// batches (op indices, ascending) in execution order.
    pub schedules: Vec<Vec<Vec<usize>>>,
    /// True when the minimum is proven (exhaustive search finished); false
    /// for the greedy fallback on large or pathological DAGs.
    pub exhaustive: bool,
    /// True when more optimal schedules may exist than were enumerated.
    pub truncated: bool,
    /// Distinct states memoised.
    pub states: usize,
}

/// Searches `dag` for its minimum-batch schedules, keeping at most `cap`
/// (at least one is always returned for a non-empty DAG).
pub fn search(dag: &OpDag, cap: usize) -> ScheduleSearch {
    let lower_bound = dag.lower_bound(&vec![false; dag.len()]);
    if dag.is_empty() {
        return ScheduleSearch {
            min_batches: 0,
            lower_bound,
            schedules: vec![Vec::new()],
            exhaustive: true,
            truncated: false,
            states: 0,
        };
    }
    if dag.len() <= MAX_EXACT_OPS {
        let mut s = Searcher::new(dag);
        if let Some(min) = s.solve(0) {
            let mut out = Vec::new();
            let mut truncated = false;
            s.enumerate(0, &mut Vec::new(), &mut out, cap.max(1), &mut truncated);
            if !out.is_empty() {
                return ScheduleSearch {
                    min_batches: min as usize,
                    lower_bound,
                    schedules: out,
                    exhaustive: true,
                    truncated,
                    states: s.memo.len(),
                };
            }
        }
    }
    let greedy = greedy(dag);
    ScheduleSearch {
        min_batches: greedy.len(),
        lower_bound,
        schedules: vec![greedy],
        exhaustive: false,
        truncated: true,
        states: 0,
    }
}

struct Searcher<'a> {
    dag: &'a OpDag,
    pred_mask: Vec<u128>,
    type_mask: Vec<u128>,
    full: u128,
    memo: HashMap<u128, u32>,
}

impl<'a> Searcher<'a> {
    fn new(dag: &'a OpDag) -> Self {
        let pred_mask = dag
            .preds
            .iter()
            .map(|p| p.iter().fold(0u128, |m, &u| m | (1u128 << u)))
            .collect();
        let mut type_mask = vec![0u128; dag.type_names.len()];
        for (v, &t) in dag.types.iter().enumerate() {
            type_mask[t] |= 1u128 << v;
        }
        // len() <= 128 here, so the shift is in range or the mask is all ones.
        let full = if dag.len() == 128 {
            u128::MAX
        } else {
            (1u128 << dag.len()) - 1
        };
        Searcher {
            dag,
            pred_mask,
            type_mask,
            full,
            memo: HashMap::new(),
        }
    }

    /// Ready ops of type `t` in `state`.
    fn ready(&self, state: u128, t: usize) -> u128 {
        let mut cand = self.type_mask[t] & !state;
        let mut out = 0;
        while cand != 0 {
            let v = cand.trailing_zeros() as usize;
            cand &= cand - 1;
            if self.pred_mask[v] & !state == 0 {
                out |= 1u128 << v;
            }
        }
        out
    }

    fn lower_bound(&self, state: u128) -> u32 {
        let done: Vec<bool> = (0..self.dag.len()).map(|v| state >> v & 1 == 1).collect();
        self.dag.lower_bound(&done) as u32
    }

    /// Exact minimum number of batches to finish from `state`; `None` when
    /// the memo budget ran out.
    fn solve(&mut self, state: u128) -> Option<u32> {
        if state == self.full {
            return Some(0);
        }
        if let Some(&v) = self.memo.get(&state) {
            return Some(v);
        }
        if self.memo.len() >= MAX_SEARCH_STATES {
            return None;
        }
        let floor = self.lower_bound(state);
        let mut best = u32::MAX;
        for t in 0..self.type_mask.len() {
            let r = self.ready(state, t);
            if r == 0 {
                continue;
            }
            let next = state | r;
            if best != u32::MAX && 1 + self.lower_bound(next) >= best {
                continue;
            }
            best = best.min(1 + self.solve(next)?);
            if best == floor {
                break;
            }
        }
        self.memo.insert(state, best);
        Some(best)
    }

    fn enumerate(
        &mut self,
        state: u128,
        prefix: &mut Vec<Vec<usize>>,
        out: &mut Vec<Vec<Vec<usize>>>,
        cap: usize,
        truncated: &mut bool,
    ) {
        if *truncated {
            return;
        }
        if state == self.full {
            if out.len() == cap {
                *truncated = true;
            } else {
                out.push(prefix.clone());
            }
            return;
        }
        let Some(target) = self.solve(state) else {
            *truncated = true;
            return;
        };
        for t in 0..self.type_mask.len() {
            let r = self.ready(state, t);
            if r == 0 {
                continue;
            }
            match self.solve(state | r) {
                Some(v) if v + 1 == target => {}
                Some(_) => continue,
                None => {
                    *truncated = true;
                    return;
                }
            }
            prefix.push((0..self.dag.len()).filter(|&v| r >> v & 1 == 1).collect());
            self.enumerate(state | r, prefix, out, cap, truncated);
            prefix.pop();
        }
    }
}

/// Algorithm 1 with a fixed rule, for DAGs too large to search: run a type
/// all of whose remaining ops are ready (nothing is lost by batching it now),
/// else the type with the most ready ops; ties go to the lower type id.
pub(crate) fn greedy(dag: &OpDag) -> Vec<Vec<usize>> {
    let n = dag.len();
    let t = dag.type_names.len();
    let mut done = vec![false; n];
    let mut left = n;
    let mut out = Vec::new();
    while left > 0 {
        let mut ready = vec![Vec::new(); t];
        let mut remaining = vec![0usize; t];
        for v in 0..n {
            if done[v] {
                continue;
            }
            remaining[dag.types[v]] += 1;
            if dag.preds[v].iter().all(|&u| done[u]) {
                ready[dag.types[v]].push(v);
            }
        }
        let pick = (0..t)
            .find(|&ty| !ready[ty].is_empty() && ready[ty].len() == remaining[ty])
            .or_else(|| {
                (0..t)
                    .filter(|&ty| !ready[ty].is_empty())
                    .max_by_key(|&ty| (ready[ty].len(), std::cmp::Reverse(ty)))
            });
        // The lowest undone op has all predecessors done (they have smaller
        // indices), so some type is always ready while ops remain.
        let Some(ty) = pick else { break };
        for &v in &ready[ty] {
            done[v] = true;
        }
        left -= ready[ty].len();
        out.push(std::mem::take(&mut ready[ty]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(labels: &[&str], preds: Vec<Vec<usize>>) -> OpDag {
        let labels: Vec<String> = labels.iter().map(|s| s.to_string()).collect();
        OpDag::from_parts(&labels, preds)
    }

    #[test]
    fn two_chains_of_ab_batch_pairwise() {
        // a0 -> b1, a2 -> b3: two batches, one schedule.
        let d = dag(
            &["a", "b", "a", "b"],
            vec![vec![], vec![0], vec![], vec![2]],
        );
        let s = search(&d, 16);
        assert_eq!(s.min_batches, 2);
        assert_eq!(s.schedules, vec![vec![vec![0, 2], vec![1, 3]]]);
        assert!(s.exhaustive && !s.truncated);
    }

    #[test]
    fn all_ready_ops_of_a_type_run_together() {
        // a0 -> b1 -> a2 and an independent a3: a3 rides with a0, so there is
        // exactly one Algorithm 1 sequence, and it meets the lower bound.
        let d = dag(
            &["a", "b", "a", "a"],
            vec![vec![], vec![0], vec![1], vec![]],
        );
        let s = search(&d, 16);
        assert_eq!(s.min_batches, 3);
        assert_eq!(s.lower_bound, 3);
        assert_eq!(s.schedules, vec![vec![vec![0, 3], vec![1], vec![2]]]);
    }

    #[test]
    fn search_finds_a_schedule_below_a_bad_first_move() {
        // b0 -> a1 -> b2; a3 -> a4 -> b5 ... the first move matters:
        // running `a` first ({a3}) then `b` ({b0}) then a {a1, a4} then b {b2, b5}
        // = 4, while the lower bound (a: 2, b: 2) is also 4.
        let d = dag(
            &["b", "a", "b", "a", "a", "b"],
            vec![vec![], vec![0], vec![1], vec![], vec![3], vec![4]],
        );
        let s = search(&d, 64);
        assert_eq!(s.lower_bound, 4);
        assert_eq!(s.min_batches, 4);
        for sched in &s.schedules {
            assert_eq!(sched.len(), 4);
        }
        assert!(greedy(&d).len() >= 4);
    }

    #[test]
    fn enumeration_respects_the_cap() {
        // Four independent types: 4! orders of the same four batches.
        let d = dag(&["a", "b", "c", "d"], vec![vec![]; 4]);
        let s = search(&d, 5);
        assert_eq!(s.min_batches, 4);
        assert_eq!(s.schedules.len(), 5);
        assert!(s.truncated);
        let all = search(&d, 100);
        assert_eq!(all.schedules.len(), 24);
        assert!(!all.truncated);
    }

    #[test]
    fn dags_beyond_the_exact_limit_get_the_greedy_schedule() {
        // 130 independent ops of two types: too many for a u128 state.
        let labels: Vec<&str> = (0..130)
            .map(|i| if i % 2 == 0 { "a" } else { "b" })
            .collect();
        let d = dag(&labels, vec![vec![]; 130]);
        let s = search(&d, 4);
        assert!(!s.exhaustive);
        assert_eq!(s.min_batches, 2);
        assert_eq!(s.schedules[0][0].len(), 65);
    }

    #[test]
    fn greedy_is_a_valid_schedule() {
        let d = dag(
            &["a", "b", "a", "b", "a"],
            vec![vec![], vec![0], vec![1], vec![], vec![3]],
        );
        let g = greedy(&d);
        let mut seen = [false; 5];
        for batch in &g {
            for &v in batch {
                assert!(d.preds[v].iter().all(|&u| seen[u]));
            }
            for &v in batch {
                seen[v] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
        assert!(g.len() >= search(&d, 1).min_batches);
    }
}
