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

    /// Decisions the policy handed to its fallback by design (FSM states
    /// stored with [`DEFER_ACTION`](super::DEFER_ACTION)); not misses.
    fn deferred(&self) -> u64 {
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
    /// Decisions the FSM's table handed to its fallback (not misses).
    pub deferred: u64,
}

/// Runs Algorithm 1 with `policy` on `g` and returns the schedule (the
/// replay's executors walk theirs with `engine_replay`'s walker, which runs
/// each batch as it is chosen).
pub fn run_policy(
    g: &Graph,
    st: &SameTypeDag,
    policy: &mut dyn BatchPolicy,
) -> Result<(Schedule, RunStats), PolicyError> {
    let mut run = PolicyRun::new(g, st, policy)?;
    drain(&mut run, &mut |_| {})?;
    let (s, stats, _) = run.finish();
    Ok((s, stats))
}

/// [`run_policy`] for a policy whose |Frontier(G^t)| reads are
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
    let dags = RunDags::new(g, policy, exact);
    let mut run = PolicyRun::on_demand(g, &dags, policy, exact)?;
    drain(&mut run, on_batch)?;
    Ok(run.finish())
}

fn drain(run: &mut PolicyRun<'_>, on_batch: &mut dyn FnMut(&[NodeId])) -> Result<(), PolicyError> {
    while let Some(i) = run.advance()? {
        on_batch(run.schedule().batch(i).1);
    }
    Ok(())
}

/// The same-type DAGs of one [`PolicyRun::on_demand`]: the one the run starts
/// on (exact when the policy always reads |Frontier(G^t)|, else edgeless) and
/// room for the exact one a lazy run builds at its first read. The run
/// borrows them, so they are made first.
pub struct RunDags {
    start: SameTypeDag,
    lazy: bool,
    exact: std::cell::OnceCell<SameTypeDag>,
    built: Option<f64>,
}

impl RunDags {
    /// The DAGs for `policy` on `g`, building the exact one with `exact` now
    /// when the policy reads |Frontier(G^t)| on every decision.
    pub fn new(g: &Graph, policy: &dyn BatchPolicy, exact: &dyn Fn(&Graph) -> SameTypeDag) -> Self {
        let t0 = std::time::Instant::now();
        let (start, lazy) = if !policy.needs_sub_frontier() {
            (SameTypeDag::without_edges(g), false)
        } else if policy.sub_frontier_on_demand() {
            (SameTypeDag::without_edges(g), true)
        } else {
            (exact(g), false)
        };
        let built = (policy.needs_sub_frontier() && !lazy).then(|| t0.elapsed().as_secs_f64());
        RunDags {
            start,
            lazy,
            exact: std::cell::OnceCell::new(),
            built,
        }
    }
}

/// Where a lazy run builds its exact DAG, and the builder.
type LazyDag<'a> = (
    &'a std::cell::OnceCell<SameTypeDag>,
    &'a dyn Fn(&Graph) -> SameTypeDag,
);

/// Algorithm 1 one decision at a time: [`advance`](Self::advance) asks the
/// policy for the next batch, steps the frontier and appends the batch to the
/// schedule. The schedule depends on the graph alone (not on what the batches
/// compute), so an executor may let the run go ahead of the batches it has
/// executed, deciding while it would otherwise wait.
pub struct PolicyRun<'a> {
    g: &'a Graph,
    f: Frontier<'a>,
    policy: &'a mut dyn BatchPolicy,
    schedule: Schedule,
    misses_before: u64,
    deferred_before: u64,
    /// Topological depths, computed only if the policy batches by depth.
    depth: Option<Vec<u32>>,
    /// Where to build the exact DAG at the first read of a lazy run, and how.
    lazy: Option<LazyDag<'a>>,
    /// Seconds spent building the exact DAG (up front or lazily).
    built: Option<f64>,
    /// Put each batch's nodes in id order (see [`in_id_order`](Self::in_id_order)).
    id_order: bool,
}

impl<'a> PolicyRun<'a> {
    /// A run of `policy` on `g` with the same-type DAG `st`.
    pub fn new(
        g: &'a Graph,
        st: &'a SameTypeDag,
        policy: &'a mut dyn BatchPolicy,
    ) -> Result<Self, PolicyError> {
        policy.prepare(g)?;
        let misses_before = policy.misses();
        let deferred_before = policy.deferred();
        Ok(PolicyRun {
            g,
            f: Frontier::new(g, st),
            policy,
            schedule: Schedule::new(),
            misses_before,
            deferred_before,
            depth: None,
            lazy: None,
            built: None,
            id_order: false,
        })
    }

    /// Lists each batch's nodes in id order, not in the order they became
    /// ready. A batch is a set, so the frontier and the policy see the same
    /// steps; what changes is the order an executor runs the rows in. Node
    /// outputs live in id order on the CPU, so rows in id order read and
    /// write memory in order: lattice-lstm b128 h128, the FSM's four loss
    /// batches (5,553 rows reading char cells' `h`) ran 20 % slower than
    /// Cavs' 64 small ones in ready order, and level in id order.
    pub fn in_id_order(mut self) -> Self {
        self.id_order = true;
        self
    }

    /// A run on `dags` (made by [`RunDags::new`] for this policy and graph),
    /// building the exact DAG with `exact` at the policy's first
    /// |Frontier(G^t)| read when it is lazy (see [`run_policy_on_demand`]).
    pub fn on_demand(
        g: &'a Graph,
        dags: &'a RunDags,
        policy: &'a mut dyn BatchPolicy,
        exact: &'a dyn Fn(&Graph) -> SameTypeDag,
    ) -> Result<Self, PolicyError> {
        let mut run = Self::new(g, &dags.start, policy)?;
        run.lazy = dags.lazy.then_some((&dags.exact, exact));
        run.built = dags.built;
        Ok(run)
    }

    /// True once every node is in the schedule.
    pub fn is_done(&self) -> bool {
        self.f.is_done()
    }

    /// Whether the next decision builds the exact same-type DAG first (a lazy
    /// run whose policy now wants |Frontier(G^t)|). An executor deciding
    /// ahead in a worker's wait leaves that decision to its own loop, where
    /// the build may use every thread.
    pub fn next_builds_dag(&mut self) -> bool {
        match self.lazy {
            Some((cell, _)) => cell.get().is_none() && self.policy.wants_sub_frontier(&self.f),
            None => false,
        }
    }

    /// The batches chosen so far.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// Makes every decision left, so that the batches can run after. The
    /// frontier, the policy's state and the same-type DAG are touched by
    /// nothing else meanwhile, so they stay in cache: on one thread,
    /// lattice-gru b128 h128 (188 FSM decisions over 22k nodes) decided in
    /// 0.87 ms this way against 1.22 ms one decision before each batch
    /// (`cavs`: 0.65 against 0.88 ms; docs/benchmarks.md).
    pub fn decide_all(&mut self) -> Result<(), PolicyError> {
        while self.advance()?.is_some() {}
        Ok(())
    }

    /// Makes the next decision: returns the new batch's index in
    /// [`schedule`](Self::schedule), `None` once the graph is done. A
    /// decision that fails (the policy chose a type with no ready node)
    /// steps nothing, so making it again fails again.
    pub fn advance(&mut self) -> Result<Option<usize>, PolicyError> {
        if self.f.is_done() {
            return Ok(None);
        }
        if let Some((cell, exact)) = self.lazy
            && self.next_builds_dag()
        {
            let t = std::time::Instant::now();
            self.f.attach(cell.get_or_init(|| exact(self.g)));
            self.built = Some(t.elapsed().as_secs_f64());
        }
        let g = self.g;
        let choice = self.policy.choose(&self.f);
        let s = &mut self.schedule;
        let (ty, n) = match choice {
            Choice::All(t) => (t, self.f.step(t, s.buffer())),
            Choice::AtDepth(t, d) => {
                let depth = self.depth.get_or_insert_with(|| depths(g));
                (
                    t,
                    self.f
                        .step_filtered(t, |v| depth[v.index()] == d, s.buffer()),
                )
            }
        };
        if n == 0 {
            return Err(PolicyError::Stuck {
                policy: self.policy.name(),
                ty: g.types().name(ty).to_string(),
            });
        }
        s.close_batch(ty);
        if self.id_order {
            s.last_batch_mut().sort_unstable();
        }
        let i = s.len() - 1;
        self.policy.executed(g, s.batch(i).1);
        Ok(Some(i))
    }

    /// The schedule, its counters, and the seconds spent building the exact
    /// DAG (`None`: not built).
    pub fn finish(self) -> (Schedule, RunStats, Option<f64>) {
        let stats = RunStats {
            batches: self.schedule.len() as u64,
            misses: self.policy.misses() - self.misses_before,
            deferred: self.policy.deferred() - self.deferred_before,
        };
        (self.schedule, stats, self.built)
    }
}
