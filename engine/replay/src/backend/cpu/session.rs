//! The CPU side of a [`Session`](crate::session::Session): a [`CpuReplay`]
//! prepares an executor for one trace — each role's compiled plan, or
//! DyNet's op-level one — and owns every buffer a run needs; it runs the
//! forward pass on the schedule walker, and trains (the forward pass with its
//! records kept, then the backward pass of `backward`).

use std::time::Instant;

use super::backward::{Backward, run_backward, unpack_gradients};
use super::dynet::DynetCpu;
use super::exec::{BatchBuffers, KeptRecords, run_batch};
use super::plan::{CpuPlan, PlanOptions};
use super::split::{chunk_rows, per_run_dag};
use super::threads::Threads;
use super::{backward, roofline, team};
use crate::cells::CellLibrary;
use crate::error::ReplayError;
use crate::executor::{Executor, instance_policy};
use crate::graph::NodeId;
use crate::incell::CellProgram;
use crate::model::Model;
use crate::run::{
    BackwardSchedule, Counters, Decide, Order, PassRun, TimeSplit, TrainOptions, TrainRun, Walk,
    walk,
};
use crate::sched::CavsPolicy;
use crate::store::Store;
use crate::trace::Trace;

/// The cell program each role runs on the cell-level executors (`cavs`,
/// `policy`, `edbatch*`): the executor's layout program where it has one,
/// else op by op, with slices read in place
/// ([`CellProgram::with_slices_in_place`]). The forward plans and the
/// backward are compiled from the same programs, so they agree on every
/// value's place.
pub(crate) fn cell_programs(model: &Model, executor: &Executor) -> Vec<CellProgram> {
    model
        .roles
        .iter()
        .enumerate()
        .map(|(i, rm)| {
            let layout = match executor {
                Executor::EdBatch(_, progs) => progs.get(i).and_then(Option::as_ref),
                _ => None,
            };
            layout
                .map_or_else(|| CellProgram::op_by_op(rm), Clone::clone)
                .with_slices_in_place(&rm.cell)
        })
        .collect()
}

/// CPU options of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuOptions {
    /// Worker threads (`None`: the machine's available parallelism).
    pub threads: Option<usize>,
    /// Fuse each cell's row work into one pass per instance (Cavs §3.5).
    pub fuse: bool,
}

impl Default for CpuOptions {
    fn default() -> Self {
        CpuOptions {
            threads: None,
            fuse: true,
        }
    }
}

impl CpuOptions {
    /// The thread count these options resolve to on this machine.
    pub fn thread_count(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }
}

/// Which programs a session compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compiled {
    /// Every role op by op (reference, cavs, policy).
    OpByOp,
    /// The executor's layout programs (edbatch, edbatch-nolayout).
    Layouts,
    /// The op-level DyNet executor.
    Dynet,
}

fn compiled_for(executor: &Executor) -> Compiled {
    match executor {
        Executor::Dynet(_) => Compiled::Dynet,
        Executor::EdBatch(..) => Compiled::Layouts,
        _ => Compiled::OpByOp,
    }
}

/// An executor prepared on the CPU for one trace.
pub struct CpuReplay {
    compiled: Compiled,
    threads: Threads,
    /// Per role, the compiled cell (cell-level executors).
    plans: Vec<CpuPlan>,
    dynet: Option<DynetCpu>,
    store: Store,
    bufs: BatchBuffers,
    /// Training: the backward pass's state (made by the first `train`).
    backward: Option<Box<backward::Backward>>,
    /// The last run's batches (a backward pass may replay them reversed).
    last_schedule: Option<crate::sched::Schedule>,
}

impl CpuReplay {
    /// Compiles `executor`'s programs for `trace` and allocates its store.
    pub fn new(
        trace: &Trace,
        model: &Model,
        executor: &Executor,
        opts: &CpuOptions,
    ) -> Result<CpuReplay, ReplayError> {
        crate::usage::keep_heap();
        let threads = Threads::try_new(opts.thread_count())
            .map_err(|e| ReplayError::Threads(e.to_string()))?;
        let popts = PlanOptions {
            fuse: opts.fuse,
            direct_io: true,
        };
        let (plans, dynet) = match executor {
            Executor::Dynet(_) => (Vec::new(), Some(DynetCpu::new(model))),
            _ => (
                model
                    .roles
                    .iter()
                    .zip(cell_programs(model, executor))
                    .map(|(rm, p)| CpuPlan::new(rm, &p, popts))
                    .collect(),
                None,
            ),
        };
        Ok(CpuReplay {
            compiled: compiled_for(executor),
            threads,
            plans,
            dynet,
            store: Store::new(&trace.graph, model),
            bufs: BatchBuffers::default(),
            backward: None,
            last_schedule: None,
        })
    }

    /// Threads the session runs on.
    pub fn threads(&self) -> usize {
        self.threads.count()
    }

    /// Logs every GEMM's shape from the next run on (for [`roofline`]);
    /// off by default, since the log allocates.
    pub fn log_gemms(&mut self, on: bool) {
        let log = on.then(roofline::GemmLog::default);
        match &mut self.dynet {
            Some(d) => d.log = log,
            None => self.bufs.log = log,
        }
    }

    /// The GEMM shapes of the last run, if logging is on.
    pub fn gemm_log(&self) -> Option<&roofline::GemmLog> {
        match &self.dynet {
            Some(d) => d.log.as_ref(),
            None => self.bufs.log.as_ref(),
        }
    }

    /// The session's threads.
    pub fn thread_pool(&self) -> &Threads {
        &self.threads
    }

    /// Every node's outputs of the last run.
    pub fn outputs(&self) -> &Store {
        &self.store
    }

    /// The outputs, consuming the session.
    pub fn into_outputs(self) -> Store {
        self.store
    }

    /// GEMM flops one run of `trace` performs (shared-weight and per-instance
    /// products; the op-level DyNet executor does the same products).
    pub fn gemm_flops(&self, trace: &Trace, model: &Model) -> u64 {
        let g = &trace.graph;
        let plans: Vec<CpuPlan>;
        let plans = if self.plans.is_empty() {
            plans = model
                .roles
                .iter()
                .map(|rm| CpuPlan::new(rm, &CellProgram::op_by_op(rm), PlanOptions::default()))
                .collect();
            &plans
        } else {
            &self.plans
        };
        g.nodes()
            .map(|v| plans[model.type_role[g.node_type(v).index()]].flops_per_row)
            .sum()
    }

    /// Per role, the compiled cell (empty for the DyNet executor).
    pub fn plans(&self) -> &[CpuPlan] {
        &self.plans
    }

    /// Runs the trace once.
    pub(crate) fn run(
        &mut self,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        executor: &mut Executor,
    ) -> Result<PassRun, ReplayError> {
        if compiled_for(executor) != self.compiled {
            return Err(ReplayError::Internal(
                "a CPU replay run with another executor than it was compiled for",
            ));
        }
        if let Some(log) = &mut self.bufs.log {
            log.clear();
        }
        if let Some(log) = self.dynet.as_mut().and_then(|d| d.log.as_mut()) {
            log.clear();
        }
        if let (Executor::Dynet(policy), Some(d)) = (&mut *executor, self.dynet.as_mut()) {
            let (counters, time, misses) = d.run(
                trace,
                model,
                cells,
                policy.as_mut(),
                &self.threads,
                &mut self.store,
            )?;
            return Ok(PassRun {
                counters,
                time,
                misses,
            });
        }
        let g = &trace.graph;
        let mut counters = Counters::default();
        let mut time = TimeSplit::default();
        let (plans, store, bufs, threads) =
            (&self.plans, &mut self.store, &mut self.bufs, &self.threads);
        let mut run_one = |batch: &[NodeId], c: &mut Counters| {
            let role = model.type_role[g.node_type(batch[0]).index()];
            let rows = chunk_rows(threads, plans[role].chunk_rows());
            for (i, part) in batch.chunks(rows).enumerate() {
                let mut pc = Counters::default();
                run_batch(g, model, &plans[role], store, bufs, threads, part, &mut pc);
                c.add_chunk(&pc, i == 0);
            }
        };
        let t0 = Instant::now();
        let mut cavs = CavsPolicy::default();
        let order = match executor {
            Executor::Reference => Order::Nodes,
            _ => match instance_policy(executor, &mut cavs) {
                (Some(policy), _) => Order::Policy(policy),
                _ => {
                    return Err(ReplayError::Internal(
                        "the dynet executor without its op-level plan",
                    ));
                }
            },
        };
        // With no worker to wait for there is no wait to decide in: every
        // decision first, with the frontier in cache.
        let how = Walk {
            decide: if threads.count() <= 1 {
                Decide::AllFirst
            } else {
                Decide::WhileWaiting
            },
            id_order: true,
        };
        // The same-type DAG the policy reads is per-run construction, built
        // up front or, for an FSM that needs it only on a miss, at the first
        // miss (never when its table covers the run).
        let exact = |g: &crate::graph::Graph| per_run_dag(g, true, threads);
        let walked = walk(g, order, how, &exact, |batch, idle| {
            team::with_idle_work(idle, || run_one(batch, &mut counters));
            Ok(())
        })?;
        time.construction = walked.dag_s.unwrap_or(0.0);
        time.execution = walked.execution;
        time.overlapped = walked.overlapped;
        // What is left of the run's wall time is the decisions (and the
        // timers); with `execution` net of the overlapped ones, the three
        // parts add up to the run's wall time.
        time.scheduling =
            (t0.elapsed().as_secs_f64() - time.construction - time.execution).max(0.0);
        self.last_schedule = walked.schedule;
        let misses = walked.misses;
        Ok(PassRun {
            counters,
            time,
            misses,
        })
    }
}

impl CpuReplay {
    /// Forward then backward over `trace`: the loss, and every parameter's
    /// gradient in [`CpuReplay::gradients`]. `backward` batches the reversed
    /// graph (the reference runs it node by node in reverse topological
    /// order and ignores it).
    pub(crate) fn train(
        &mut self,
        trace: &Trace,
        model: &Model,
        cells: &crate::cells::CellLibrary,
        executor: &mut Executor,
        backward: BackwardSchedule<'_>,
        opts: &TrainOptions,
    ) -> Result<TrainRun, ReplayError> {
        let g = &trace.graph;
        if matches!(executor, Executor::Dynet(_)) {
            let forward = self.run(trace, model, cells, executor)?;
            let seeds: Vec<bool> = model.roles.iter().map(|r| r.role.loss).collect();
            if !g
                .nodes()
                .any(|v| seeds[model.type_role[g.node_type(v).index()]])
            {
                return Err(ReplayError::NoLoss(trace.workload.clone()));
            }
            let loss = g
                .nodes()
                .filter(|&v| seeds[model.type_role[g.node_type(v).index()]])
                .map(|v| {
                    self.store
                        .node(v)
                        .iter()
                        .map(|&x| f64::from(x))
                        .sum::<f64>()
                })
                .sum();
            let d = self.dynet.as_mut().expect("a dynet session");
            let backward = d.backward(model, &self.threads, opts)?;
            return Ok(TrainRun {
                loss,
                forward,
                backward,
                kept_bytes: d.kept_bytes(),
                device_s: None,
            });
        }
        if self.backward.is_none() {
            let programs = cell_programs(model, executor);
            self.backward = Some(Box::new(Backward::new(trace, model, &programs)?));
            let total: usize = g
                .nodes()
                .map(|v| self.plans[model.type_role[g.node_type(v).index()]].units)
                .sum();
            self.bufs.keep = Some(KeptRecords {
                arena: vec![0.0; total],
                bump: 0,
                node_rec: vec![0; g.len()],
            });
        }
        if let Some(kept) = &mut self.bufs.keep {
            kept.bump = 0;
        }
        let forward = self.run(trace, model, cells, executor)?;
        let kept_fwd = self
            .bufs
            .keep
            .as_ref()
            .map_or(0, |k| 4 * k.arena.len() as u64);
        let bw = self.backward.as_mut().expect("made above");
        let loss: f64 = g
            .nodes()
            .filter(|&v| bw.seeds[model.type_role[g.node_type(v).index()]])
            .map(|v| {
                self.store
                    .node(v)
                    .iter()
                    .map(|&x| f64::from(x))
                    .sum::<f64>()
            })
            .sum();
        // The reference (no forward schedule) runs node by node.
        let order = match (backward, &self.last_schedule) {
            (_, None) => Order::Nodes,
            (BackwardSchedule::ReverseForward, Some(s)) => Order::Reversed(s),
            (BackwardSchedule::Policy(p), Some(_)) => Order::Policy(p),
        };
        let backward = run_backward(
            g,
            model,
            &self.plans,
            bw,
            self.bufs.keep.as_ref().expect("kept for training"),
            &self.store,
            &self.threads,
            order,
            opts,
        )?;
        let kept_bytes = kept_fwd + bw.bytes();
        Ok(TrainRun {
            loss,
            forward,
            backward,
            kept_bytes,
            device_s: None,
        })
    }

    /// The gradients of the last training run: per role, per cell value (the
    /// shapes of [`crate::model::RoleModel::params`]; empty for
    /// non-parameters).
    pub fn gradients(&self, model: &Model) -> Option<Vec<Vec<Vec<f32>>>> {
        if let Some(d) = &self.dynet {
            return d.gradients(model);
        }
        let bw = self.backward.as_ref()?;
        Some(unpack_gradients(model, &bw.plans, &bw.pgrads))
    }
}
