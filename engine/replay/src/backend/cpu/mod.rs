//! The CPU backend of the replay engine.
//!
//! - [`gemm`]: products against weights packed once per session (AVX-512
//!   micro-kernel, portable fallback), A read through strided segments, C
//!   written in place from the bias.
//! - [`simd`]: vectorised elementwise math (exp, sigmoid, tanh with stated
//!   error bounds), compiled per instruction set and chosen at run time.
//! - [`plan`]: a role's cell program compiled into steps — shared-weight
//!   GEMMs, and fused per-instance passes over everything else.
//! - [`exec`], [`dynet`]: running batches (cell level, and DyNet's op level).
//! - [`threads`], [`team`]: the session's threads (the caller and spinning
//!   workers); every step splits over them.
//!
//! A [`CpuReplay`] owns every buffer a run needs — the node store, the batch
//! records and temporaries, the GEMM's packing buffer, DyNet's arena — sized
//! on the first run and reused, so repeated runs allocate nothing and touch no
//! new pages (`page_faults` in the run record shows it).

mod backward;
pub mod dynet;
pub mod exec;
pub mod gemm;
pub mod grad;
pub mod ops;
pub mod plan;
pub mod roofline;
pub mod simd;
pub mod team;
pub mod threads;

// The device-neutral run types (`crate::run`), for this backend's modules.
use crate::run::{BackwardSchedule, PassRun, TrainOptions, TrainRun};

/// Rows of a batch run at a time, per thread, at least. A batch's rows are
/// independent, and a large one (a tree batch's leaves: 4,800 rows at batch
/// 256) run whole had records far larger than the caches (96 MB at h512);
/// in chunks of 64 rows the records stay cached between a chunk's GEMMs and
/// row passes. Measured on tree-lstm, one thread: inference at batch 256
/// 10–11 % faster at h64 and h512 (64–256 rows alike, 32 slower), the
/// training backward at batch 64 4–6 % faster at h256/h512. Several threads
/// run chunks of `2 × rows × threads` (see [`chunk_rows`]). Batches and
/// kernels are still counted once per batch (what a device would launch).
/// Inference chunks of wide cells are longer: [`CpuPlan::chunk_rows`].
const CHUNK_ROWS: usize = 64;

/// The longest inference chunk, per thread ([`CpuPlan::chunk_rows`]).
const MAX_CHUNK_ROWS: usize = 4 * CHUNK_ROWS;

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

#[cfg(test)]
thread_local! {
    /// Tests shrink the chunks to split small batches (`None`: the plans'
    /// own sizes).
    pub(crate) static TEST_CHUNK_ROWS: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// Rows of a chunk on `threads`, for a role whose one-thread chunk is
/// `rows` (a plan's [`CpuPlan::chunk_rows`], or [`CHUNK_ROWS`]; tests may
/// change it).
pub(crate) fn chunk_rows(threads: &Threads, rows: usize) -> usize {
    // Several threads split each step of a chunk, so a chunk holds twice
    // the rows per thread: tree-lstm b256 h512 `cavs`, two threads, 5
    // interleaved rounds: whole batches 166 ms, 64 rows a thread 150, 128
    // rows 147, 256 rows 155 (h64 and bilstm-tagger b256: 128 rows level or
    // better). With the rayon pool chunks were slower (a wake-up per step).
    // A wide cell's longer chunk is kept whole (never split finer than on
    // one thread).
    let scaled = |r: usize| {
        if threads.count() > 1 {
            2 * r * threads.count()
        } else {
            r
        }
    };
    #[cfg(test)]
    if let Some(r) = TEST_CHUNK_ROWS.with(std::cell::Cell::get) {
        return scaled(r);
    }
    scaled(CHUNK_ROWS).max(rows)
}

use std::time::Instant;

use self::dynet::DynetCpu;
use self::exec::{BatchBuffers, run_batch};
use self::plan::{CpuPlan, PlanOptions};
use self::threads::Threads;
use crate::cells::CellLibrary;
use crate::error::ReplayError;
use crate::executor::{Executor, instance_policy};
use crate::graph::NodeId;
use crate::incell::CellProgram;
use crate::model::Model;
use crate::run::{Counters, Decide, Order, TimeSplit, Walk, walk};
use crate::sched::{CavsPolicy, SameTypeDag};
use crate::store::Store;
use crate::trace::Trace;

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

/// The same-type DAG a run's policy reads, built per run as the per-input
/// construction it is (forward, backward and op-level runs alike): exact when
/// `exact`, its searches split over the session's threads (one part per
/// thread; on one thread, inline), else edgeless
/// ([`SameTypeDag::without_edges`]).
pub(crate) fn per_run_dag(g: &crate::graph::Graph, exact: bool, threads: &Threads) -> SameTypeDag {
    if !exact {
        return SameTypeDag::without_edges(g);
    }
    let t = threads.count();
    if t <= 1 {
        return SameTypeDag::sequential(g);
    }
    SameTypeDag::with_parts(g, t, &|part| {
        threads.split(t, t, |parts| parts.for_each(part));
    })
}
