//! Exact minimum number of batches of a small graph, by branch and bound, to
//! measure how far a learned FSM or a heuristic is from the true optimum (the
//! lower bound of ED-Batch A.3 is not always reachable: batching is NP-hard,
//! appendix A.1).
//!
//! # Search space
//!
//! A state is the set of executed nodes; a move picks a type with a ready node
//! and executes, for a batchable type, *all* its ready nodes (Algorithm 1), for
//! a non-batchable type one ready node — every ready one is tried. This loses
//! nothing against arbitrary valid schedules, whose batches may take any subset
//! of the ready nodes of one type. Take such a schedule B_1..B_k and replay its
//! type sequence the greedy way; by induction the greedy executed set E_g after
//! i moves contains the schedule's E_s after i batches. Every node of B_{i+1}
//! has its arguments in E_s ⊆ E_g, so it is either done already or ready in the
//! greedy state; a batchable move takes all ready nodes of the type, hence all
//! of B_{i+1} not yet done, and for a non-batchable type the move that picks
//! B_{i+1}'s node (or, if that node is done, nothing: the move is skipped) keeps
//! the invariant. So the greedy replay finishes within k moves, and the search
//! over greedy moves finds the optimum over all schedules. (The runtime
//! [`Frontier`](engine::sched::Frontier) runs the *oldest* ready node of a
//! non-batchable type; the zoo's workloads have one such node, the loss sum, so
//! there the two agree.)
//!
//! # Pruning
//!
//! - Bound: batches so far + the lower bound of the unexecuted nodes (per
//!   batchable type its longest same-type chain among them, plus the count of
//!   unexecuted non-batchable nodes) ≥ incumbent → cut.
//! - Memo: an executed set already reached with no more batches is cut.
//! - Lemma 2.1 (ED-Batch A.2): if a batchable type has every node of
//!   Frontier(G^t) ready, some optimal continuation starts with it — the first
//!   type-t batch of any schedule only holds nodes of Frontier(G^t), which are all
//!   ready now, and moving them to the front keeps the greedy replay's executed
//!   sets supersets as above. Only that child is explored.
//! - Children come in the typewise order (highest |Frontier_t(G)| /
//!   |Frontier(G^t)|, then more ready nodes, then smaller type id), and the
//!   incumbent starts as the best heuristic, so good schedules come first.
//!
//! A node-expansion budget bounds the work: when it runs out the report says
//! `proved: false` and carries the best schedule found.

mod masks;

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use engine::graph::{Graph, NodeId, TypeId, lower_bound};
use engine::sched::{HEURISTICS, PolicyError, SameTypeDag, Schedule, heuristic, run_policy};
use serde::Serialize;
use thiserror::Error;

use masks::{Bits, EMPTY, Masks, WORDS, insert, members, union};

/// Largest `max_nodes` accepted: the width of the search's bit sets.
pub const NODE_LIMIT: usize = 64 * WORDS;

/// Search limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptimalConfig {
    /// Refuse graphs with more nodes than this (at most [`NODE_LIMIT`]).
    pub max_nodes: usize,
    /// Node expansions before giving up the proof.
    pub budget: u64,
    /// Apply Lemma 2.1's pruning (off only to cross-check it in tests).
    pub lemma: bool,
}

impl Default for OptimalConfig {
    fn default() -> Self {
        OptimalConfig {
            max_nodes: 64,
            budget: 2_000_000,
            lemma: true,
        }
    }
}

/// Why no search was run.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum OptimalError {
    /// The graph is larger than `max_nodes`.
    #[error(
        "graph has {nodes} nodes, more than the limit of {max_nodes} for the exact search (raise --max-nodes, at most {NODE_LIMIT})"
    )]
    TooManyNodes {
        /// Nodes of the graph.
        nodes: usize,
        /// The limit in force.
        max_nodes: usize,
    },
    /// `max_nodes` itself is beyond what the search can represent.
    #[error("max nodes {max_nodes} is above the exact search's limit of {NODE_LIMIT}")]
    LimitTooHigh {
        /// The requested limit.
        max_nodes: usize,
    },
    /// A heuristic used for the first incumbent failed.
    #[error("initial incumbent: {0}")]
    Heuristic(#[from] PolicyError),
}

/// Outcome of [`optimal`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OptimalReport {
    /// Batches of the best schedule found (the optimum when `proved`).
    pub batches: u64,
    /// ED-Batch A.3 lower bound of the graph.
    pub lower_bound: u64,
    /// True when the search finished: no schedule has fewer batches.
    pub proved: bool,
    /// Node expansions performed.
    pub expanded: u64,
    /// The heuristic that gave the first incumbent (first of the best, in
    /// [`HEURISTICS`] order).
    pub incumbent: String,
    /// Its batch count.
    pub incumbent_batches: u64,
    /// Type name of every batch of the best schedule.
    pub schedule: Vec<String>,
    /// Node ids of every batch of the best schedule.
    pub batch_nodes: Vec<Vec<u32>>,
}

impl OptimalReport {
    /// The best schedule as an engine [`Schedule`] on `g` (for validation).
    pub fn to_schedule(&self, g: &Graph) -> Schedule {
        let mut s = Schedule::new();
        for nodes in &self.batch_nodes {
            let ids: Vec<NodeId> = nodes.iter().map(|&v| NodeId(v)).collect();
            // An empty or foreign batch still becomes a batch, so that
            // validate_schedule reports it rather than this hiding it.
            let ty = ids
                .first()
                .filter(|v| v.index() < g.len())
                .map_or(TypeId(0), |&v| g.node_type(v));
            s.push(ty, &ids);
        }
        s
    }
}

/// Finds the minimum number of batches of `g` (see the module docs).
pub fn optimal(g: &Graph, cfg: &OptimalConfig) -> Result<OptimalReport, OptimalError> {
    if cfg.max_nodes > NODE_LIMIT {
        return Err(OptimalError::LimitTooHigh {
            max_nodes: cfg.max_nodes,
        });
    }
    if g.len() > cfg.max_nodes {
        return Err(OptimalError::TooManyNodes {
            nodes: g.len(),
            max_nodes: cfg.max_nodes,
        });
    }
    let (incumbent, incumbent_path) = best_heuristic(g)?;
    let masks = Masks::new(g);
    let mut s = Search {
        m: &masks,
        lemma: cfg.lemma,
        budget: cfg.budget,
        memo: HashMap::new(),
        best: incumbent.1,
        best_path: incumbent_path,
        path: Vec::new(),
        expanded: 0,
        exhausted: false,
    };
    s.dfs(EMPTY, 0);
    let names = |t: TypeId| g.types().name(t).to_string();
    Ok(OptimalReport {
        batches: u64::from(s.best),
        lower_bound: lower_bound(g).total,
        proved: !s.exhausted,
        expanded: s.expanded,
        incumbent: incumbent.0,
        incumbent_batches: u64::from(incumbent.1),
        schedule: s.best_path.iter().map(|(t, _)| names(*t)).collect(),
        batch_nodes: s
            .best_path
            .iter()
            .map(|(_, b)| members(b).map(|v| v as u32).collect())
            .collect(),
    })
}

/// A certified lower bound from exhaustive search ([`deepening_bound`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExactBound {
    /// No schedule has fewer batches.
    pub bound: u64,
    /// True when a schedule with `bound` batches was found: the optimum.
    pub optimum: bool,
    /// Node expansions performed.
    pub expanded: u64,
}

/// A lower bound by iterative deepening: for k = the A.3 bound, k+1, …,
/// search exhaustively for a schedule of at most k batches (same moves and
/// pruning as [`optimal`], with k+1 as the incumbent). Each k that is refuted
/// proves the optimum exceeds it; the first k with a schedule is the optimum.
/// When the expansion budget runs out, the last k not refuted is still a
/// proved bound (`optimum: false`).
pub fn deepening_bound(g: &Graph, cfg: &OptimalConfig) -> Result<ExactBound, OptimalError> {
    if cfg.max_nodes > NODE_LIMIT {
        return Err(OptimalError::LimitTooHigh {
            max_nodes: cfg.max_nodes,
        });
    }
    if g.len() > cfg.max_nodes {
        return Err(OptimalError::TooManyNodes {
            nodes: g.len(),
            max_nodes: cfg.max_nodes,
        });
    }
    let masks = Masks::new(g);
    let mut k = masks.remaining_bound(&EMPTY);
    let mut expanded = 0u64;
    loop {
        let mut s = Search {
            m: &masks,
            lemma: cfg.lemma,
            budget: cfg.budget.saturating_sub(expanded),
            memo: HashMap::new(),
            best: k + 1,
            best_path: Vec::new(),
            path: Vec::new(),
            expanded: 0,
            exhausted: false,
        };
        s.dfs(EMPTY, 0);
        expanded += s.expanded;
        if s.best <= k {
            // k − 1 was refuted (or is below the A.3 bound): k is optimal.
            return Ok(ExactBound {
                bound: u64::from(s.best),
                optimum: true,
                expanded,
            });
        }
        if s.exhausted {
            return Ok(ExactBound {
                bound: u64::from(k),
                optimum: false,
                expanded,
            });
        }
        k += 1;
    }
}

/// The best heuristic's name and batch count, and its schedule as moves.
type Incumbent = ((String, u32), Vec<(TypeId, Bits)>);

fn best_heuristic(g: &Graph) -> Result<Incumbent, OptimalError> {
    let st = SameTypeDag::new(g);
    let mut best: Option<Incumbent> = None;
    for name in HEURISTICS {
        // HEURISTICS lists exactly the names `heuristic` knows.
        let Some(mut p) = heuristic(name) else {
            continue;
        };
        let (sched, _) = run_policy(g, &st, p.as_mut())?;
        let n = sched.len() as u32;
        if best.as_ref().is_none_or(|b| n < b.0.1) {
            let path = sched
                .batches()
                .map(|(t, nodes)| {
                    let mut b = EMPTY;
                    nodes.iter().for_each(|v| insert(&mut b, v.index()));
                    (t, b)
                })
                .collect();
            best = Some(((name.to_string(), n), path));
        }
    }
    Ok(best.unwrap_or_else(|| (("none".into(), 0), Vec::new())))
}

struct Search<'m> {
    m: &'m Masks,
    lemma: bool,
    budget: u64,
    /// Fewest batches with which each executed set was reached.
    memo: HashMap<Bits, u32>,
    best: u32,
    best_path: Vec<(TypeId, Bits)>,
    path: Vec<(TypeId, Bits)>,
    expanded: u64,
    exhausted: bool,
}

impl Search<'_> {
    fn dfs(&mut self, exec: Bits, depth: u32) {
        if exec == self.m.all {
            if depth < self.best {
                self.best = depth;
                self.best_path.clone_from(&self.path);
            }
            return;
        }
        if depth + self.m.remaining_bound(&exec) >= self.best {
            return;
        }
        match self.memo.entry(exec) {
            Entry::Occupied(e) if *e.get() <= depth => return,
            Entry::Occupied(mut e) => {
                e.insert(depth);
            }
            Entry::Vacant(e) => {
                e.insert(depth);
            }
        }
        if self.expanded >= self.budget {
            self.exhausted = true;
            return;
        }
        self.expanded += 1;
        for (t, batch) in self.children(&exec) {
            self.path.push((t, batch));
            self.dfs(union(&exec, &batch), depth + 1);
            self.path.pop();
            if self.exhausted {
                return;
            }
        }
    }

    /// Moves from `exec`, best first (see the module docs).
    fn children(&self, exec: &Bits) -> Vec<(TypeId, Bits)> {
        let m = self.m;
        let ready = m.ready(exec);
        // (ready, sub-frontier, type) of every type with a ready node.
        let mut types: Vec<(u32, u32, usize)> = m
            .of_type
            .iter()
            .enumerate()
            .filter_map(|(t, of)| {
                let r: Bits = std::array::from_fn(|i| ready[i] & of[i]);
                let n = masks::count(&r);
                (n > 0).then(|| (n, m.sub_frontier(t, exec).max(1), t))
            })
            .collect();
        types.sort_by(|a, b| {
            // a.0/a.1 > b.0/b.1 first, exactly; then more ready; then type id.
            (u64::from(b.0) * u64::from(a.1))
                .cmp(&(u64::from(a.0) * u64::from(b.1)))
                .then(b.0.cmp(&a.0))
                .then(a.2.cmp(&b.2))
        });
        if self.lemma
            && let Some(&(_, _, t)) = types.iter().find(|(r, sub, t)| m.batchable[*t] && r == sub)
        {
            types.retain(|x| x.2 == t);
        }
        let mut out = Vec::new();
        for (_, _, t) in types {
            let r: Bits = std::array::from_fn(|i| ready[i] & m.of_type[t][i]);
            if m.batchable[t] {
                out.push((TypeId(t as u32), r));
            } else {
                for v in members(&r) {
                    let mut one = EMPTY;
                    insert(&mut one, v);
                    out.push((TypeId(t as u32), one));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
