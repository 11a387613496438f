//! What the CPU backend prepares: a [`CpuReplay`] is an executor compiled
//! for one trace — each role's plan, or DyNet's op-level one — with the
//! session's threads and every buffer a run needs, and what it shows of
//! itself besides its runs (threads, GEMM log, flops). Its runs, its side of
//! a [`Session`](crate::session::Session), are in `session.rs`.

use super::backward::Backward;
use super::dynet::DynetCpu;
use super::exec::BatchBuffers;
use super::plan::{CpuPlan, PlanOptions};
use super::roofline;
use super::threads::Threads;
use crate::backend::vpps::VppsError;
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::incell::CellProgram;
use crate::model::Model;
use crate::sched::Schedule;
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
pub(super) enum Compiled {
    /// Every role op by op (reference, cavs, policy).
    OpByOp,
    /// The executor's layout programs (edbatch, edbatch-nolayout).
    Layouts,
    /// The op-level DyNet executor.
    Dynet,
}

pub(super) fn compiled_for(executor: &Executor) -> Compiled {
    match executor {
        Executor::Dynet(_) => Compiled::Dynet,
        Executor::EdBatch(..) => Compiled::Layouts,
        _ => Compiled::OpByOp,
    }
}

/// An executor prepared on the CPU for one trace.
///
/// Its fields are the runs' (`session.rs`) as much as this file's.
pub struct CpuReplay {
    pub(super) compiled: Compiled,
    pub(super) threads: Threads,
    /// Per role, the compiled cell (cell-level executors).
    pub(super) plans: Vec<CpuPlan>,
    pub(super) dynet: Option<DynetCpu>,
    pub(super) store: Store,
    pub(super) bufs: BatchBuffers,
    /// Training: the backward pass's state (made by the first `train`).
    pub(super) backward: Option<Box<Backward>>,
    /// The last run's batches (a backward pass may replay them reversed).
    pub(super) last_schedule: Option<Schedule>,
}

impl CpuReplay {
    /// Compiles `executor`'s programs for `trace` and allocates its store.
    /// VPPS is a GPU kernel: on the CPU it is [`VppsError::CudaOnly`] (its
    /// CPU emulator is [`Vpps::emulate`](crate::backend::vpps::Vpps::emulate)).
    pub fn new(
        trace: &Trace,
        model: &Model,
        executor: &Executor,
        opts: &CpuOptions,
    ) -> Result<CpuReplay, ReplayError> {
        if let Executor::Vpps(..) = executor {
            return Err(VppsError::CudaOnly.into());
        }
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
}
