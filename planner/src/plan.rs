//! The planner proper: in-cell schedule search, alignment, accounting, and
//! the choice among minimum-batch schedules.

use std::collections::BTreeSet;

use engine::cells::Cell;

use crate::align::{AlignBatch, Alignment, align};
use crate::cost::{Evaluation, OrderPolicy, evaluate};
use crate::error::PlanError;
use crate::layout::Layout;
use crate::problem::Problem;
use crate::schedule::{DEFAULT_SCHEDULE_CAP, OpDag, ScheduleSearch, search};

/// A layout together with its cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// Where every variable lives.
    pub layout: Layout,
    /// What the batches cost under it.
    pub eval: Evaluation,
}

/// Where the planned layout came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutSource {
    /// The PQ-tree alignment (the normal case).
    PqTree,
    /// The DyNet order, because it happened to copy strictly less than the
    /// alignment's; this keeps "planned never copies more than the DyNet
    /// baseline" true by construction.
    DynetFallback,
}

/// The plan of one [`Problem`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemPlan {
    /// The chosen layout and its cost (op orders chosen per batch).
    pub planned: Allocation,
    /// Which layout won.
    pub source: LayoutSource,
    /// The alignment run (its order is the planned one unless the fallback won).
    pub alignment: Alignment,
}

fn key(e: &Evaluation) -> (u64, u64) {
    (e.totals.copy_bytes, e.totals.memory_kernels)
}

/// Aligns and costs `problem`; `prefix` pins variables to the start of the
/// arena in that order (see [`align`]); `record` keeps the PQ-tree of every
/// phase.
///
/// Every batch of two or more ops contributes its result and every argument
/// whose variables share one size and kind (mixed ones can never be one
/// strided operand) to the alignment.
pub fn plan_problem(
    problem: &Problem,
    prefix: &[usize],
    record: bool,
) -> Result<ProblemPlan, PlanError> {
    problem.validate()?;
    let batches: Vec<AlignBatch> = problem
        .batches
        .iter()
        .map(|spec| {
            if spec.len() < 2 {
                return AlignBatch {
                    operands: Vec::new(),
                };
            }
            let uniform = |list: &&Vec<usize>| {
                let f = &problem.vars[list[0]];
                list.iter().all(|&v| {
                    problem.vars[v].bytes == f.bytes && problem.vars[v].shared == f.shared
                })
            };
            AlignBatch {
                operands: std::iter::once(&spec.result)
                    .chain(spec.args.iter().filter(uniform))
                    .cloned()
                    .collect(),
            }
        })
        .collect();
    let alignment = align(problem.vars.len(), &batches, prefix, record)?;
    let pq = Layout::from_order(problem, alignment.order.clone())?;
    let pq_eval = evaluate(problem, &pq, OrderPolicy::Best);
    // The DyNet order, with any pinned prefix moved to the front.
    let mut pinned = vec![false; problem.vars.len()];
    for &p in prefix {
        pinned[p] = true;
    }
    let dy_order = prefix
        .iter()
        .copied()
        .chain((0..problem.vars.len()).filter(|&v| !pinned[v]))
        .collect();
    let dy = Layout::from_order(problem, dy_order)?;
    let dy_eval = evaluate(problem, &dy, OrderPolicy::Best);
    let (planned, source) = if key(&dy_eval) < key(&pq_eval) {
        let a = Allocation {
            layout: dy,
            eval: dy_eval,
        };
        (a, LayoutSource::DynetFallback)
    } else {
        let a = Allocation {
            layout: pq,
            eval: pq_eval,
        };
        (a, LayoutSource::PqTree)
    };
    Ok(ProblemPlan {
        planned,
        source,
        alignment,
    })
}

/// Options of [`plan_cell`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// Most minimum-batch schedules to enumerate.
    pub schedule_cap: usize,
    /// Keep the PQ-tree of every alignment phase (for `explain`).
    pub record: bool,
    /// Keep the cell's inputs at the start of the arena in port order, as
    /// if they stayed where their producers wrote them (only params,
    /// intermediates and outputs are placed by the planner).
    pub fixed_inputs: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            schedule_cap: DEFAULT_SCHEDULE_CAP,
            record: false,
            fixed_inputs: false,
        }
    }
}

/// Everything decided for one cell at one hidden size and batch size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellPlan {
    /// Cell name.
    pub cell: String,
    /// Hidden size it was instantiated at.
    pub hidden: usize,
    /// Instances per batch.
    pub batch: usize,
    /// The typed op DAG.
    pub dag: OpDag,
    /// The schedule search (all enumerated minimum-batch schedules).
    pub search: ScheduleSearch,
    /// Distinct batch compositions among them (each was planned).
    pub compositions: usize,
    /// Index of the chosen schedule in `search.schedules`.
    pub chosen: usize,
    /// The problem of the chosen schedule.
    pub problem: Problem,
    /// Its planned layout.
    pub planned: ProblemPlan,
    /// The DyNet baseline on the same schedule: identity order, reference op
    /// order in every batch.
    pub baseline: Allocation,
}

impl CellPlan {
    /// The chosen schedule: batches of op indices, in execution order.
    pub fn schedule(&self) -> &[Vec<usize>] {
        &self.search.schedules[self.chosen]
    }
}

/// Plans `cell` for `batch` instances: finds the minimum-batch in-cell
/// schedules, plans a layout for each distinct batch composition, and keeps
/// the one that copies fewest bytes (then fewest kernels; ties to the first
/// schedule enumerated).
pub fn plan_cell(cell: &Cell, batch: usize, opts: &PlanOptions) -> Result<CellPlan, PlanError> {
    if batch == 0 {
        return Err(PlanError::ZeroBatch);
    }
    let dag = OpDag::from_cell(cell);
    let prefix: Vec<usize> = if opts.fixed_inputs {
        cell.ports
            .iter()
            .flat_map(|p| p.inputs.iter().map(|v| v.index()))
            .collect()
    } else {
        Vec::new()
    };
    let found = search(&dag, opts.schedule_cap);
    // The layout depends on which ops share a batch, not on the batch order.
    let mut seen = BTreeSet::new();
    let mut best: Option<(usize, Problem, ProblemPlan)> = None;
    for (i, sched) in found.schedules.iter().enumerate() {
        let mut comp: Vec<Vec<usize>> = sched.clone();
        comp.sort();
        if !seen.insert(comp) {
            continue;
        }
        let problem = Problem::from_cell(cell, batch, sched)?;
        let plan = plan_problem(&problem, &prefix, false)?;
        let better = best
            .as_ref()
            .is_none_or(|(_, _, b)| key(&plan.planned.eval) < key(&b.planned.eval));
        if better {
            best = Some((i, problem, plan));
        }
    }
    let Some((chosen, problem, mut planned)) = best else {
        // `search` returns at least one schedule, so this is unreachable;
        // reported as an invalid problem rather than a panic.
        return Err(PlanError::InvalidProblem {
            batch: 0,
            reason: format!("no schedule found for cell `{}`", cell.name),
        });
    };
    if opts.record {
        planned = plan_problem(&problem, &prefix, true)?;
    }
    let identity = Layout::identity(&problem)?;
    let baseline = Allocation {
        eval: evaluate(&problem, &identity, OrderPolicy::Reference),
        layout: identity,
    };
    Ok(CellPlan {
        cell: cell.name.clone(),
        hidden: cell.hidden,
        batch,
        dag,
        compositions: seen.len(),
        search: found,
        chosen,
        problem,
        planned,
        baseline,
    })
}
