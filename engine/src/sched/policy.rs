//! The runtime policy seam: Algorithm 1's loop asks a [`BatchPolicy`] for the next
//! batch until the graph is done. Every policy — the classic heuristics and the
//! learned FSM — sits behind this one trait, so the replay engine times them alike.

use thiserror::Error;

use super::frontier::Frontier;
use super::same_type::SameTypeDag;
use super::schedule::Schedule;
use crate::graph::{Graph, NodeId, TypeId, depths};

/// The next batch a policy wants.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Every ready node of the type (Algorithm 1).
    All(TypeId),
    /// Ready nodes of the type at this topological depth only (TF Fold).
    AtDepth(TypeId, u32),
}

/// Policy failures.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// The policy chose a type with no ready node: the loop would not progress.
    #[error("policy {policy} chose type {ty}, which has no ready node")]
    Stuck {
        /// Policy name.
        policy: String,
        /// The type chosen.
        ty: String,
    },
    /// The policy cannot run on this graph.
    #[error("policy {policy}: {reason}")]
    Unusable {
        /// Policy name.
        policy: String,
        /// Why.
        reason: String,
    },
}

/// A batching policy: maps the frontier state to the next batch.
pub trait BatchPolicy {
    /// Name for reports (e.g. `agenda`, `fsm(sort)`).
    fn name(&self) -> String;

    /// Per-graph precomputation, called once before scheduling `g`.
    fn prepare(&mut self, _g: &Graph) -> Result<(), PolicyError> {
        Ok(())
    }

    /// The next batch. Called only while some node is ready.
    fn choose(&mut self, f: &Frontier) -> Choice;

    /// Told which nodes just ran (for policies that track remaining work).
    fn executed(&mut self, _g: &Graph, _batch: &[NodeId]) {}

    /// Decisions that fell back to another policy (FSM states never seen).
    fn misses(&self) -> u64 {
        0
    }

    /// Whether the policy reads |Frontier(G^t)| (`Frontier::sub_frontier`,
    /// `ratio`); if not, callers may skip building the exact same-type DAG.
    fn needs_sub_frontier(&self) -> bool {
        true
    }

    /// Whether |Frontier(G^t)| is read on some decisions only (an FSM whose
    /// encoding does not read it, falling back on a miss to a heuristic that
    /// does): [`run_policy_on_demand`] then starts without the exact
    /// same-type DAG and builds it when [`wants_sub_frontier`](Self::wants_sub_frontier)
    /// first says so — never, when the table covers the run.
    fn sub_frontier_on_demand(&self) -> bool {
        false
    }

    /// Whether the next `choose(f)` reads |Frontier(G^t)| (asked only of
    /// policies with [`sub_frontier_on_demand`](Self::sub_frontier_on_demand),
    /// until the exact DAG is there).
    fn wants_sub_frontier(&mut self, _f: &Frontier) -> bool {
        self.needs_sub_frontier()
    }
}

/// Counters of one scheduling run.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunStats {
    /// Batches executed.
    pub batches: u64,
    /// Decisions that fell back (FSM misses).
    pub misses: u64,
}

/// Runs Algorithm 1 with `policy` on `g` and returns the schedule.
pub fn run_policy(
    g: &Graph,
    st: &SameTypeDag,
    policy: &mut dyn BatchPolicy,
) -> Result<(Schedule, RunStats), PolicyError> {
    run_policy_with(g, st, policy, &mut |_| {})
}

/// [`run_policy`], calling `on_batch` with each batch as soon as it is chosen,
/// so an executor can run it before the policy picks the next (the policy's
/// time stays separable from the executor's).
pub fn run_policy_with(
    g: &Graph,
    st: &SameTypeDag,
    policy: &mut dyn BatchPolicy,
    on_batch: &mut dyn FnMut(&[NodeId]),
) -> Result<(Schedule, RunStats), PolicyError> {
    policy.prepare(g)?;
    let f = Frontier::new(g, st);
    run_loop(g, f, policy, on_batch, &mut |_, _| {})
}

/// [`run_policy_with`] for a policy whose |Frontier(G^t)| reads are
/// [on demand](BatchPolicy::sub_frontier_on_demand): the run starts on an
/// edgeless DAG and, the first time the policy wants |Frontier(G^t)|, builds
/// the exact one with `exact` and brings the frontier up to date
/// ([`Frontier::attach`]). Also returns the seconds spent building the exact
/// DAG, `None` when none was built. Other policies that read |Frontier(G^t)|
/// get the exact DAG up front.
pub fn run_policy_on_demand(
    g: &Graph,
    policy: &mut dyn BatchPolicy,
    exact: &dyn Fn(&Graph) -> SameTypeDag,
    on_batch: &mut dyn FnMut(&[NodeId]),
) -> Result<(Schedule, RunStats, Option<f64>), PolicyError> {
    let t0 = std::time::Instant::now();
    let (start, lazy) = if !policy.needs_sub_frontier() {
        (SameTypeDag::without_edges(g), false)
    } else if policy.sub_frontier_on_demand() {
        (SameTypeDag::without_edges(g), true)
    } else {
        (exact(g), false)
    };
    let mut built = (policy.needs_sub_frontier() && !lazy).then(|| t0.elapsed().as_secs_f64());
    // Declared before the frontier, which borrows what is built into it.
    let cell: std::cell::OnceCell<SameTypeDag> = std::cell::OnceCell::new();
    policy.prepare(g)?;
    let f = Frontier::new(g, &start);
    let (s, stats) = run_loop(g, f, policy, on_batch, &mut |f, policy| {
        if lazy && cell.get().is_none() && policy.wants_sub_frontier(f) {
            let t = std::time::Instant::now();
            f.attach(cell.get_or_init(|| exact(g)));
            built = Some(t.elapsed().as_secs_f64());
        }
    })?;
    Ok((s, stats, built))
}

/// Algorithm 1's loop; `before` runs before every decision.
fn run_loop<'g>(
    g: &'g Graph,
    mut f: Frontier<'g>,
    policy: &mut dyn BatchPolicy,
    on_batch: &mut dyn FnMut(&[NodeId]),
    before: &mut dyn FnMut(&mut Frontier<'g>, &mut dyn BatchPolicy),
) -> Result<(Schedule, RunStats), PolicyError> {
    let mut s = Schedule::new();
    let misses_before = policy.misses();
    // Topological depths, computed only if a policy batches by depth.
    let mut depth: Option<Vec<u32>> = None;
    while !f.is_done() {
        before(&mut f, policy);
        let choice = policy.choose(&f);
        let (ty, n) = match choice {
            Choice::All(t) => (t, f.step(t, s.buffer())),
            Choice::AtDepth(t, d) => {
                let depth = depth.get_or_insert_with(|| depths(g));
                (t, f.step_filtered(t, |v| depth[v.index()] == d, s.buffer()))
            }
        };
        if n == 0 {
            return Err(PolicyError::Stuck {
                policy: policy.name(),
                ty: g.types().name(ty).to_string(),
            });
        }
        s.close_batch(ty);
        let batch = s.batch(s.len() - 1).1;
        on_batch(batch);
        policy.executed(g, batch);
    }
    let stats = RunStats {
        batches: s.len() as u64,
        misses: policy.misses() - misses_before,
    };
    Ok((s, stats))
}
