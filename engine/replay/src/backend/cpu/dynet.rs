//! DyNet without static subgraphs on the CPU: the trace expanded to primitive
//! ops (graph construction, every run), batched op by op by a policy (agenda
//! or depth); each operand is gathered into a contiguous buffer unless it
//! already is contiguous and in batch order, and each batch's results are
//! allocated contiguously in one arena (DyNet's autobatching memory scheme).
//!
//! The kernels are the cell plans' own (`CpuPlan` of each role's op-by-op
//! program, unfused: one step per op), so DyNet and the cell-level executors
//! differ only in batching and memory movement, not in arithmetic.

use std::ops::Range;
use std::time::Instant;

use super::backward::{GradRows, grad_row_op, param_term};
use super::exec::{RowBuffers, run_gemm, run_row_op};
use super::gemm::{ASeg, COut, GemmScratch, Init, MAX_SEGS, OuterScratch, gemm};
use super::grad::{GStep, GradPlan};
use super::ops;
use super::plan::{Buf, CpuPlan, PlanOptions, RowKind, Step, View};
use super::roofline::GemmLog;
use super::split::per_run_dag;
use super::threads::{SharedMut, Threads};
use crate::cells::CellLibrary;
use crate::error::ReplayError;
use crate::graph::NodeId;
use crate::incell::CellProgram;
use crate::model::Model;
use crate::run::{Counters, Decide, Order, PassRun, TimeSplit, TrainOptions, Walk, walk};
use crate::sched::{BatchPolicy, SameTypeDag};
use crate::store::Store;
use crate::trace::Trace;
use crate::workloads::{ArgSrc, OpOrigin, expand};

/// The DyNet executor's session state.
pub struct DynetCpu {
    /// Per role, its op-by-op program compiled unfused.
    plans: Vec<CpuPlan>,
    /// Per role, the record offset of every cell value (to map plan views to
    /// operands).
    units: Vec<Vec<usize>>,
    arena: Vec<f32>,
    slot: Vec<usize>,
    numel: Vec<usize>,
    gather: Vec<Vec<f32>>,
    /// The current batch's operands: (pointer, floats per row, record offset).
    operands: Vec<(SharedMut<f32>, usize, usize)>,
    data: Vec<(u32, u32)>,
    gemm: GemmScratch,
    /// The GEMM shapes run, when asked for (the roofline).
    pub(crate) log: Option<GemmLog>,
    /// The last run's op program and schedule (the backward pass walks it
    /// in reverse, as DyNet does).
    last: Option<(crate::workloads::OpProgram, crate::sched::Schedule)>,
    /// Training state (made by the first `train`).
    back: Option<Box<OpBackward>>,
}

/// The op-level backward state.
struct OpBackward {
    /// Per role, its ops' backward (one op's steps at a time).
    plans: Vec<GradPlan>,
    /// Gradients of every op node's result (the arena's layout).
    garena: Vec<f32>,
    pgrads: Vec<Vec<f32>>,
    lazy: Vec<Vec<Vec<(usize, usize)>>>,
    rows: Vec<(usize, usize)>,
    temp: Vec<f32>,
    zeros: Vec<f32>,
    sink: Vec<f32>,
    gemm: GemmScratch,
    outer: OuterScratch,
}

impl DynetCpu {
    /// Compiles every role's ops.
    pub fn new(model: &Model) -> DynetCpu {
        let opts = PlanOptions {
            fuse: false,
            direct_io: false,
        };
        let mut plans = Vec::with_capacity(model.roles.len());
        let mut units = Vec::with_capacity(model.roles.len());
        for rm in &model.roles {
            let prog = CellProgram::op_by_op(rm);
            plans.push(CpuPlan::new(rm, &prog, opts));
            units.push(prog.unit.clone());
        }
        DynetCpu {
            plans,
            units,
            arena: Vec::new(),
            slot: Vec::new(),
            numel: Vec::new(),
            gather: Vec::new(),
            operands: Vec::new(),
            data: Vec::new(),
            gemm: GemmScratch::default(),
            log: None,
            last: None,
            back: None,
        }
    }

    /// The gradients of the last training run, per role and value id.
    pub(crate) fn gradients(&self, model: &Model) -> Option<Vec<Vec<Vec<f32>>>> {
        let b = self.back.as_ref()?;
        Some(super::backward::unpack_gradients(
            model, &b.plans, &b.pgrads,
        ))
    }

    /// Bytes a training step keeps for its backward pass: every op result
    /// of the forward (DyNet keeps the whole graph's values) and the
    /// gradient of each (0 before the first training run).
    pub(crate) fn kept_bytes(&self) -> u64 {
        self.back.as_ref().map_or(0, |b| {
            4 * (self.arena.len() + b.garena.len() + b.pgrads.iter().map(Vec::len).sum::<usize>())
                as u64
        })
    }

    /// Forward (as [`DynetCpu::run`]) then backward: the op batches in
    /// reverse, each op's vector–Jacobian products over its rows, gradients
    /// added into the operands' producers. Returns the backward's counters and
    /// time (the forward's are the caller's `run`).
    pub(crate) fn backward(
        &mut self,
        model: &Model,
        threads: &Threads,
        opts: &TrainOptions,
    ) -> Result<PassRun, ReplayError> {
        let t0 = Instant::now();
        let Some((prog, schedule)) = self.last.take() else {
            return Err(ReplayError::NotForTraining("dynet (no forward run)"));
        };
        let mut back = self.back.take().unwrap_or_else(|| {
            let plans: Vec<GradPlan> = model
                .roles
                .iter()
                .map(|rm| GradPlan::compile(rm, &CellProgram::op_by_op(rm), false, true))
                .collect();
            let widest = model
                .roles
                .iter()
                .flat_map(|r| r.cell.values.iter().map(|v| v.numel()))
                .max()
                .unwrap_or(0);
            Box::new(OpBackward {
                lazy: plans
                    .iter()
                    .map(|p| vec![Vec::new(); p.terms.len()])
                    .collect(),
                pgrads: plans.iter().map(|p| vec![0.0; p.pgrad_len]).collect(),
                plans,
                garena: Vec::new(),
                rows: Vec::new(),
                temp: Vec::new(),
                zeros: vec![0.0; widest],
                sink: vec![0.0; widest],
                gemm: GemmScratch::default(),
                outer: OuterScratch::default(),
            })
        });
        let og = &prog.graph;
        let total: usize = self.numel.iter().sum();
        if back.garena.len() < total {
            back.garena.resize(total, 0.0);
        }
        back.garena[..total].fill(0.0);
        for p in &mut back.pgrads {
            p.fill(0.0);
        }
        for l in back.lazy.iter_mut().flatten() {
            l.clear();
        }
        // Seeds: the loss sums' results.
        for (v, outs) in prog.cell_outputs.iter().enumerate() {
            let role = match &prog.origins[outs.iter().flatten().next().map_or(0, |o| o.index())] {
                OpOrigin::CellOp { role, .. } => *role as usize,
                OpOrigin::PortSum { .. } => continue,
            };
            let _ = v;
            if model.roles[role].role.loss {
                for o in outs.iter().flatten() {
                    let (s, n) = (self.slot[o.index()], self.numel[o.index()]);
                    back.garena[s..s + n].fill(1.0);
                }
            }
        }
        let construction = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let mut c = Counters::default();
        // The op batches of the forward pass in reverse, on the shared walker.
        let how = Walk {
            decide: Decide::EachBatch,
            id_order: false,
        };
        let no_dag = |g: &crate::graph::Graph| SameTypeDag::without_edges(g);
        let this = &*self;
        walk(og, Order::Reversed(&schedule), how, &no_dag, |batch, _| {
            let n = this.numel[batch[0].index()];
            match &prog.origins[batch[0].index()] {
                OpOrigin::PortSum { .. } => {
                    for &v in batch {
                        let s = this.slot[v.index()];
                        for a in og.args(v) {
                            let d = this.slot[a.index()];
                            let (lo, hi) = back.garena.split_at_mut(s.max(d));
                            let (src, dst) = if s > d {
                                (&hi[..n], &mut lo[d..d + n])
                            } else {
                                (&lo[s..s + n], &mut hi[..n])
                            };
                            super::simd::accumulate(dst, src);
                        }
                    }
                }
                OpOrigin::CellOp { role, op, .. } => {
                    let (role, op) = (*role as usize, *op as usize);
                    op_backward(
                        this, &mut back, &prog, batch, role, op, n, model, threads, opts, &mut c,
                    );
                }
            }
            c.batches += 1;
            Ok(())
        })?;
        if opts.lazy {
            for (role, plan) in back.plans.iter().enumerate() {
                for (ti, term) in plan.terms.iter().enumerate() {
                    let rows = &back.lazy[role][ti];
                    if !rows.is_empty() {
                        // SAFETY: addresses of this run's arenas, outside the
                        // parameter gradients.
                        unsafe {
                            param_term(threads, term, rows, &mut back.pgrads[role], &mut back.outer)
                        };
                        c.kernels += 1;
                    }
                }
            }
        }
        let execution = t1.elapsed().as_secs_f64();
        self.back = Some(back);
        self.last = Some((prog, schedule));
        Ok(PassRun {
            counters: c,
            time: TimeSplit {
                construction,
                scheduling: 0.0,
                execution,
                overlapped: 0.0,
            },
            misses: 0,
        })
    }

    /// Runs the op-level program; writes the cell-level outputs into `store`
    /// (for checking) and returns counters, time split and policy misses.
    pub fn run(
        &mut self,
        trace: &Trace,
        model: &Model,
        cells: &CellLibrary,
        policy: &mut dyn BatchPolicy,
        threads: &Threads,
        store: &mut Store,
    ) -> Result<(Counters, TimeSplit, u64), ReplayError> {
        let t0 = Instant::now();
        let prog = expand(&model.workload, &trace.graph, cells, model.hidden)?;
        let og = &prog.graph;
        self.numel.clear();
        self.numel.extend(prog.origins.iter().map(|o| match o {
            OpOrigin::PortSum { numel, .. } => *numel as usize,
            OpOrigin::CellOp { role, op, .. } => {
                let cell = &model.roles[*role as usize].cell;
                cell.values[cell.ops[*op as usize].out.0 as usize].numel()
            }
        }));
        let total: usize = self.numel.iter().sum();
        if self.arena.len() < total {
            self.arena.resize(total, 0.0);
        }
        if self.slot.len() < og.len() {
            self.slot.resize(og.len(), 0);
        }
        let construction = t0.elapsed().as_secs_f64();

        let t1 = Instant::now();
        let mut c = Counters::default();
        let mut bump = 0usize;
        let mut on_batch = |batch: &[NodeId]| {
            self.batch(model, &prog, batch, bump, threads, &mut c);
            let n = self.numel[batch[0].index()];
            for (r, &v) in batch.iter().enumerate() {
                self.slot[v.index()] = bump + r * n;
            }
            bump += batch.len() * n;
            c.batches += 1;
        };
        // DyNet decides as it goes, one batch at a time.
        let how = Walk {
            decide: Decide::EachBatch,
            id_order: false,
        };
        let exact = |g: &crate::graph::Graph| per_run_dag(g, true, threads);
        let walked = walk(og, Order::Policy(policy), how, &exact, |batch, _| {
            on_batch(batch);
            Ok(())
        })?;
        let schedule = walked.schedule.unwrap_or_default();
        let dag_s = walked.dag_s.unwrap_or(0.0);
        let time = TimeSplit {
            construction: construction + dag_s,
            execution: walked.execution,
            scheduling: (t1.elapsed().as_secs_f64() - walked.execution - dag_s).max(0.0),
            overlapped: 0.0,
        };
        // The cell-level view of the results, for comparison with the others.
        let g = &trace.graph;
        for v in g.nodes() {
            let role = model.type_role[g.node_type(v).index()];
            for (j, out) in prog.cell_outputs[v.index()].iter().enumerate() {
                if let Some(o) = out {
                    let (s, n) = (self.slot[o.index()], self.numel[o.index()]);
                    store
                        .output_mut(v, role, j)
                        .copy_from_slice(&self.arena[s..s + n]);
                }
            }
        }
        self.last = Some((prog, schedule));
        Ok((c, time, walked.misses))
    }

    /// Runs one op-level batch into `arena[bump ..]`.
    fn batch(
        &mut self,
        model: &Model,
        prog: &crate::workloads::OpProgram,
        batch: &[NodeId],
        bump: usize,
        threads: &Threads,
        c: &mut Counters,
    ) {
        let og = &prog.graph;
        let k = batch.len();
        let n = self.numel[batch[0].index()];
        let (done, rest) = self.arena.split_at_mut(bump);
        let y = &mut rest[..k * n];
        match &prog.origins[batch[0].index()] {
            OpOrigin::PortSum { .. } => {
                // One gather-and-sum kernel reading every producer in place.
                for (r, &v) in batch.iter().enumerate() {
                    let yr = &mut y[r * n..(r + 1) * n];
                    for (i, a) in og.args(v).iter().enumerate() {
                        let s = self.slot[a.index()];
                        if i == 0 {
                            yr.copy_from_slice(&done[s..s + n]);
                        } else {
                            super::simd::accumulate(yr, &done[s..s + n]);
                        }
                        c.bytes_gathered += n as u64 * 4;
                    }
                    if og.args(v).is_empty() {
                        yr.fill(0.0);
                    }
                }
                c.kernels += 1;
            }
            OpOrigin::CellOp { role, op, args, .. } => {
                let role = *role as usize;
                let op_i = *op as usize;
                let cell = &model.roles[role].cell;
                let cop = &cell.ops[op_i];
                if self.gather.len() < args.len() {
                    self.gather.resize_with(args.len(), Vec::new);
                }
                let operands = &mut self.operands;
                operands.clear();
                for (i, a) in args.iter().enumerate() {
                    let m = cell.values[cop.args[i].index()].numel();
                    let off = self.units[role][cop.args[i].index()];
                    if let ArgSrc::Param(_) = a {
                        continue;
                    }
                    let src_of = |v: NodeId| match &prog.origins[v.index()] {
                        OpOrigin::CellOp { args, .. } => args[i],
                        OpOrigin::PortSum { .. } => ArgSrc::Zero,
                    };
                    let first = match src_of(batch[0]) {
                        ArgSrc::Node(u) => Some(self.slot[u.index()]),
                        _ => None,
                    };
                    let contiguous = first.is_some_and(|s0| {
                        batch.iter().enumerate().all(|(r, &v)| {
                            matches!(src_of(v), ArgSrc::Node(u) if self.slot[u.index()] == s0 + r * m)
                        })
                    });
                    if let (true, Some(s0)) = (contiguous, first) {
                        operands.push((SharedMut(done[s0..].as_mut_ptr()), m, off));
                        continue;
                    }
                    let buf = &mut self.gather[i];
                    if buf.len() < k * m {
                        buf.resize(k * m, 0.0);
                    }
                    for (r, &v) in batch.iter().enumerate() {
                        let dst = &mut buf[r * m..(r + 1) * m];
                        match src_of(v) {
                            ArgSrc::Node(u) => {
                                let s = self.slot[u.index()];
                                dst.copy_from_slice(&done[s..s + m]);
                            }
                            _ => dst.fill(0.0),
                        }
                    }
                    c.kernels += 1;
                    c.bytes_gathered += (k * m) as u64 * 4;
                    operands.push((SharedMut(buf.as_mut_ptr()), m, off));
                }
                self.data.clear();
                self.data
                    .extend(batch.iter().map(|&v| match &prog.origins[v.index()] {
                        OpOrigin::CellOp { node, .. } | OpOrigin::PortSum { node, .. } => {
                            model.node_data(*node)
                        }
                    }));
                let plan = &self.plans[role];
                let bases = OpBases {
                    operands,
                    out_off: self.units[role][cop.out.index()],
                    y: SharedMut(y.as_mut_ptr()),
                    n,
                    par: plan.params.as_ptr(),
                };
                let steps: Range<usize> = plan.op_steps[op_i].clone();
                for step in &plan.steps[steps] {
                    match step {
                        // SAFETY: A reads operand buffers (earlier results or
                        // gather buffers) and C writes this batch's fresh
                        // results: disjoint, each sized for k rows.
                        Step::Gemm(s) => {
                            if let Some(log) = &mut self.log {
                                log.add(k, &s.b);
                            }
                            // SAFETY: see above.
                            unsafe { run_gemm(s, &bases, k, threads, &mut self.gemm, false) }
                        }
                        Step::Rows(row_ops) => {
                            for ro in row_ops {
                                run_rows(ro, &bases, k, n, threads, &self.data);
                            }
                        }
                    }
                }
                c.kernels += 1;
            }
        }
    }
}

/// One op-level batch's row op over its `k` rows: elementwise maps over the
/// whole contiguous batch at once, anything else row by row.
fn run_rows(
    ro: &super::plan::RowOp,
    b: &OpBases<'_>,
    k: usize,
    n: usize,
    threads: &Threads,
    data: &[(u32, u32)],
) {
    let contiguous = ro.args.iter().all(|a| a.buf != Buf::Par);
    if let (RowKind::Map(kind), true) = (&ro.kind, contiguous) {
        // SAFETY: every operand buffer holds k rows of its numel, which equals
        // the result's for an elementwise map; the result is fresh memory.
        unsafe {
            let y = std::slice::from_raw_parts_mut(b.ptr(ro.out, 0), k * n);
            let arg = |i: usize| std::slice::from_raw_parts(b.ptr(ro.args[i], 0), k * n);
            match ro.args.len() {
                1 => ops::unary(*kind, arg(0), y),
                2 if ops::is_binary(*kind) => ops::binary(*kind, arg(0), arg(1), y),
                _ => {
                    y.copy_from_slice(arg(0));
                    for i in 1..ro.args.len() {
                        super::simd::accumulate(y, arg(i));
                    }
                    if *kind == crate::cells::PrimOp::Mean {
                        super::simd::scale(y, 1.0 / ro.args.len() as f32);
                    }
                }
            }
        }
        return;
    }
    threads.rows(k, ro.m * ro.len, |rows| {
        for r in rows {
            // SAFETY: row r of the result belongs to this thread; operands
            // are read only.
            unsafe { run_row_op(ro, b, r, data[r]) };
        }
    });
}

/// The buffers of one op-level batch: operand `i` (by its record offset in
/// the op-by-op program) at `ptr + r·numel`, the result at `y + r·n`.
struct OpBases<'a> {
    operands: &'a [(SharedMut<f32>, usize, usize)],
    out_off: usize,
    y: SharedMut<f32>,
    n: usize,
    par: *const f32,
}

// SAFETY: parameters are read only; operand and result pointers are
// `SharedMut` (result rows written by one thread each).
unsafe impl Sync for OpBases<'_> {}

impl RowBuffers for OpBases<'_> {
    fn ptr(&self, v: View, r: usize) -> *mut f32 {
        // SAFETY: the views come from the op's plan step: a parameter, the
        // result, or one of the operands, each sized for the batch's rows.
        unsafe {
            match v.buf {
                Buf::Par => self.par.add(v.off).cast_mut(),
                _ if v.off == self.out_off => self.y.get().add(r * self.n),
                _ => {
                    let &(p, m, _) = self
                        .operands
                        .iter()
                        .find(|o| o.2 == v.off)
                        .expect("every per-row operand of an op has a buffer");
                    p.get().add(r * m)
                }
            }
        }
    }

    fn stride(&self, v: View) -> usize {
        match v.buf {
            Buf::Par => 0,
            _ if v.off == self.out_off => self.n,
            _ => self
                .operands
                .iter()
                .find(|o| o.2 == v.off)
                .map_or(0, |o| o.1),
        }
    }
}

/// One op-level batch's backward: op `op` of role `role` over `batch`.
#[allow(clippy::too_many_arguments)]
fn op_backward(
    d: &DynetCpu,
    back: &mut OpBackward,
    prog: &crate::workloads::OpProgram,
    batch: &[NodeId],
    role: usize,
    op: usize,
    n: usize,
    model: &Model,
    threads: &Threads,
    opts: &TrainOptions,
    c: &mut Counters,
) {
    let plan = &back.plans[role];
    let rows = OpRows {
        prog,
        batch,
        slot: &d.slot,
        units: &d.units[role],
        cell_op: &model.roles[role].cell.ops[op],
        arena: SharedMut(d.arena.as_ptr().cast_mut()),
        garena: SharedMut(back.garena.as_mut_ptr()),
        zeros: back.zeros.as_ptr(),
        sink: SharedMut(back.sink.as_mut_ptr()),
        par: d.plans[role].params.as_ptr(),
        pgrad: SharedMut(back.pgrads[role].as_mut_ptr()),
    };
    let k = batch.len();
    for step in &plan.steps[plan.op_steps[op].clone()] {
        match step {
            GStep::Gemm(s) => {
                // dY rows are this batch's results' gradients (contiguous);
                // dx goes to a temporary, then into each row's producer.
                let nx = s.b.n();
                if back.temp.len() < k * nx {
                    back.temp.resize(k * nx, 0.0);
                }
                back.temp[..k * nx].fill(0.0);
                let mut a = [ASeg::EMPTY; MAX_SEGS];
                for (seg, &(off, len)) in a.iter_mut().zip(&s.a) {
                    // SAFETY: the batch's result gradients are k contiguous
                    // rows of n floats in the gradient arena.
                    *seg = unsafe { ASeg::raw(rows.grad(0, off), n, len) };
                }
                let out = COut::new(&mut back.temp, 0, nx, k, nx);
                gemm(
                    threads,
                    k,
                    &a[..s.a.len()],
                    &s.b,
                    out,
                    Init::Accumulate,
                    &mut back.gemm,
                );
                for r in 0..k {
                    // SAFETY: one thread; the producer's gradient slot.
                    let dst = unsafe { std::slice::from_raw_parts_mut(rows.grad(r, s.c), nx) };
                    super::simd::accumulate(dst, &back.temp[r * nx..(r + 1) * nx]);
                }
                c.kernels += 1;
            }
            GStep::Rows(ops) | GStep::Serial(ops) => {
                // Serial: two rows may add into one producer's gradient.
                for (r, v) in batch.iter().enumerate() {
                    let data = match &prog.origins[v.index()] {
                        OpOrigin::CellOp { node, .. } | OpOrigin::PortSum { node, .. } => {
                            model.node_data(*node)
                        }
                    };
                    for o in ops {
                        // SAFETY: one thread; destinations are gradient slots
                        // and parameter gradients, never the values read.
                        unsafe { grad_row_op(o, &rows, r, data) };
                    }
                }
                c.kernels += 1;
            }
            GStep::Params(terms) => {
                for &ti in terms {
                    let term = &plan.terms[ti];
                    let list = if opts.lazy {
                        &mut back.lazy[role][ti]
                    } else {
                        &mut back.rows
                    };
                    if !opts.lazy {
                        list.clear();
                    }
                    for r in 0..k {
                        let dy = rows.grad(r, term.dy).expose_provenance();
                        let x = term.x.map_or(0, |x| rows.val(x, r).expose_provenance());
                        list.push((dy, x));
                    }
                    if !opts.lazy {
                        // SAFETY: addresses of this run's arenas.
                        unsafe {
                            param_term(
                                threads,
                                term,
                                &back.rows,
                                &mut back.pgrads[role],
                                &mut back.outer,
                            )
                        };
                        c.kernels += 1;
                    }
                }
            }
        }
    }
}

/// One op-level batch's data per row: the op's result at its node's slot,
/// operand `i` at its source node's slot (zeros for an absent input), their
/// gradients likewise in the gradient arena (an absent input's into a sink).
struct OpRows<'a> {
    prog: &'a crate::workloads::OpProgram,
    batch: &'a [NodeId],
    slot: &'a [usize],
    units: &'a [usize],
    cell_op: &'a crate::cells::Op,
    arena: SharedMut<f32>,
    garena: SharedMut<f32>,
    zeros: *const f32,
    sink: SharedMut<f32>,
    par: *const f32,
    pgrad: SharedMut<f32>,
}

// SAFETY: used from one thread (op-level backward rows run serially); the
// pointers are the session's arenas.
unsafe impl Sync for OpRows<'_> {}

impl OpRows<'_> {
    /// Where the value at record offset `off` lives for row `r`: `Some(node)`
    /// for the result or an operand fed by a node, `None` for an absent input.
    fn node_of(&self, r: usize, off: usize) -> Option<NodeId> {
        let v = self.batch[r];
        if off == self.units[self.cell_op.out.index()] {
            return Some(v);
        }
        let OpOrigin::CellOp { args, .. } = &self.prog.origins[v.index()] else {
            return None;
        };
        let i = self
            .cell_op
            .args
            .iter()
            .position(|a| self.units[a.index()] == off)?;
        match args[i] {
            ArgSrc::Node(u) => Some(u),
            _ => None,
        }
    }
}

impl super::backward::GradRows for OpRows<'_> {
    fn val(&self, v: View, r: usize) -> *mut f32 {
        if v.buf == Buf::Par {
            // SAFETY: parameter offsets come from the plan.
            return unsafe { self.par.add(v.off).cast_mut() };
        }
        match self.node_of(r, v.off) {
            // SAFETY: the node's slot in the arena.
            Some(u) => unsafe { self.arena.get().add(self.slot[u.index()]) },
            None => self.zeros.cast_mut(),
        }
    }

    fn grad(&self, r: usize, off: usize) -> *mut f32 {
        match self.node_of(r, off) {
            // SAFETY: the node's slot in the gradient arena.
            Some(u) => unsafe { self.garena.get().add(self.slot[u.index()]) },
            None => self.sink.get(),
        }
    }

    fn pgrad(&self, off: usize) -> *mut f32 {
        // SAFETY: parameter gradient offsets come from the plan.
        unsafe { self.pgrad.get().add(off) }
    }
}
