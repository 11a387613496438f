//! Training runs on the CPU: the forward pass with every batch's records
//! kept, then the backward pass — batched on the *reversed* instance graph
//! (a node's output gradient is complete once all its users have run, the
//! reverse frontier) by any batching policy — running each role's
//! [`GradPlan`], then the parameter gradients (per batch, or deferred to one
//! product per parameter: lazy batching).
//!
//! Memory: the forward records of every node (what backward reads), one
//! batch's gradient records (a scratch reused by every batch, so it stays in
//! cache), what lazy batching keeps of them for the deferred weight
//! gradients (the products' output gradients, laid out in backward batch
//! order), the output gradients of every node (store-shaped) and the
//! parameter gradients. All are sized once per trace and reused by every
//! run; [`TrainRun::kept_bytes`](crate::run::TrainRun::kept_bytes) reports them.

use std::time::Instant;

use super::exec::{KeptRecords, RowBuffers};
use super::gemm::{
    ASeg, COut, GemmScratch, MAX_SEGS, OuterScratch, PackedRows, gemm_outer_acc,
    gemm_outer_acc_packed, gemm_reusing,
};
use super::grad::{GDst, GKind, GRowOp, GStep, GradPlan, LazyGroup, ParamTerm};
use super::ops;
use super::plan::{Buf, View};
use super::split::{CHUNK_ROWS, chunk_rows, per_run_dag};
use super::threads::{SharedMut, Threads};
use crate::error::ReplayError;
use crate::graph::{Graph, NodeId};
use crate::incell::CellProgram;
use crate::model::Model;
use crate::run::{Counters, Decide, Order, PassRun, TimeSplit, TrainOptions, Walk, walk};
use crate::store::Store;
use crate::trace::Trace;

/// The backward state of a session.
pub(crate) struct Backward {
    pub(super) plans: Vec<GradPlan>,
    reversed: Graph,
    /// Output gradients of every node (the store's layout).
    dout: Store,
    /// Per node, the index of its first output in `dout_set`.
    dout_at: Vec<usize>,
    /// Whether an output gradient holds a value yet this run: the first
    /// contribution stores, later ones add, and one never set reads as zero
    /// (no per-run zeroing of `dout`).
    dout_set: Vec<bool>,
    /// One batch's gradient records (grown to the largest batch).
    grads: Vec<f32>,
    /// Lazy batching: every node's [`GradPlan::dy_ranges`], packed per role
    /// and range (rows in backward order) at `packed[role][range]`
    /// (allocated by the first lazy run: `kept_total` floats).
    kept_dy: Vec<f32>,
    kept_total: usize,
    packed: Vec<Vec<(usize, PackedRows)>>,
    /// Rows of each role kept so far in this run.
    next_row: Vec<usize>,
    /// Parameter gradients per role (the program's parameter order).
    pub pgrads: Vec<Vec<f32>>,
    /// Lazy batching's rows, per role and [`LazyGroup`]: the address of
    /// each row's input (none for biases).
    lazy: Vec<Vec<Vec<usize>>>,
    rows: Vec<(usize, usize)>,
    fwd_ptrs: Vec<usize>,
    in_ptrs: Vec<usize>,
    out_ptrs: Vec<usize>,
    zeros: Vec<f32>,
    gemm: GemmScratch,
    outer: OuterScratch,
    /// Roles whose nodes seed the backward pass (the loss sums).
    pub(super) seeds: Vec<bool>,
}

impl Backward {
    pub(crate) fn new(
        trace: &Trace,
        model: &Model,
        programs: &[CellProgram],
    ) -> Result<Backward, ReplayError> {
        let g = &trace.graph;
        let seeds: Vec<bool> = model.roles.iter().map(|r| r.role.loss).collect();
        if !g
            .nodes()
            .any(|v| seeds[model.type_role[g.node_type(v).index()]])
        {
            return Err(ReplayError::NoLoss(trace.workload.clone()));
        }
        let plans: Vec<GradPlan> = model
            .roles
            .iter()
            .zip(programs)
            .map(|(rm, p)| GradPlan::new(rm, p, true))
            .collect();
        let mut dout_at = Vec::with_capacity(g.len());
        let mut outputs = 0;
        for v in g.nodes() {
            dout_at.push(outputs);
            outputs += plans[model.type_role[g.node_type(v).index()]].outputs.len();
        }
        let mut rows = vec![0usize; plans.len()];
        for v in g.nodes() {
            rows[model.type_role[g.node_type(v).index()]] += 1;
        }
        let mut kept = 0;
        let packed: Vec<Vec<(usize, PackedRows)>> = plans
            .iter()
            .zip(&rows)
            .map(|(p, &k)| {
                p.dy_ranges
                    .iter()
                    .map(|&(_, m)| {
                        let layout = PackedRows { m, k };
                        kept += layout.floats();
                        (kept - layout.floats(), layout)
                    })
                    .collect()
            })
            .collect();
        let widest = model
            .roles
            .iter()
            .flat_map(|r| {
                r.cell
                    .ports
                    .iter()
                    .flat_map(|p| p.inputs.iter().map(|i| r.cell.values[i.index()].numel()))
            })
            .max()
            .unwrap_or(0);
        Ok(Backward {
            lazy: plans
                .iter()
                .map(|p| vec![Vec::new(); p.lazy.len()])
                .collect(),
            pgrads: plans.iter().map(|p| vec![0.0; p.pgrad_len]).collect(),
            plans,
            reversed: g.reversed(),
            dout: Store::new(g, model),
            dout_at,
            dout_set: vec![false; outputs],
            grads: Vec::new(),
            kept_dy: Vec::new(),
            kept_total: kept,
            packed,
            next_row: vec![0; rows.len()],
            rows: Vec::new(),
            fwd_ptrs: Vec::new(),
            in_ptrs: Vec::new(),
            out_ptrs: Vec::new(),
            zeros: vec![0.0; widest],
            gemm: GemmScratch::default(),
            outer: OuterScratch::default(),
            seeds,
        })
    }

    /// Bytes this state keeps.
    pub(crate) fn bytes(&self) -> u64 {
        4 * (self.dout.arena.len()
            + self.grads.len()
            + self.kept_dy.len()
            + self.pgrads.iter().map(Vec::len).sum::<usize>()) as u64
    }
}

/// Per-row addresses of one backward batch.
#[derive(Clone, Copy)]
struct GBases {
    grad: SharedMut<f32>,
    units: usize,
    pgrad: SharedMut<f32>,
    par: *const f32,
    fwd: SharedMut<usize>,
    ins: SharedMut<usize>,
    n_in: usize,
    outs: SharedMut<usize>,
    n_out: usize,
}

// SAFETY: parameters only read; the rest are `SharedMut` (rows written by
// one thread each; parameter gradients only by serial steps).
unsafe impl Send for GBases {}
unsafe impl Sync for GBases {}

impl RowBuffers for GBases {
    fn ptr(&self, v: View, r: usize) -> *mut f32 {
        // SAFETY: the tables hold k rows of addresses set at batch entry;
        // offsets come from the plan.
        unsafe {
            let at = |table: SharedMut<usize>, i: usize| {
                std::ptr::with_exposed_provenance_mut::<f32>(*table.get().add(i)).add(v.off)
            };
            match v.buf {
                Buf::Rec => at(self.fwd, r),
                Buf::In(i) => at(self.ins, r * self.n_in + i as usize),
                Buf::Out(j) => at(self.outs, r * self.n_out + j as usize),
                Buf::Par => self.par.add(v.off).cast_mut(),
                // Backward reads no forward temporaries.
                Buf::Tmp => std::ptr::null_mut(),
            }
        }
    }

    fn stride(&self, v: View) -> usize {
        let _ = v;
        0
    }
}

/// Where a backward row op's data is: the seam between the vector–Jacobian
/// kernels and the executors' memory (gradient records for cell-level
/// batches, the op graph's gradient arena for DyNet's op-level batches).
pub(crate) trait GradRows: Sync {
    /// Row `r`'s forward value at `v`.
    fn val(&self, v: View, r: usize) -> *mut f32;

    /// Row `r`'s gradient of the value at record offset `off`.
    fn grad(&self, r: usize, off: usize) -> *mut f32;

    /// The parameter gradient at `off`.
    fn pgrad(&self, off: usize) -> *mut f32;

    /// Where a gradient goes.
    fn dst(&self, r: usize, d: GDst) -> *mut f32 {
        match d {
            GDst::Grad(off) => self.grad(r, off),
            GDst::Param(off) => self.pgrad(off),
        }
    }
}

impl GradRows for GBases {
    fn val(&self, v: View, r: usize) -> *mut f32 {
        self.ptr(v, r)
    }

    fn grad(&self, r: usize, off: usize) -> *mut f32 {
        // SAFETY: the batch's gradient records are k rows of `units` floats.
        unsafe { self.grad.get().add(r * self.units + off) }
    }

    fn pgrad(&self, off: usize) -> *mut f32 {
        // SAFETY: parameter gradient offsets come from the plan.
        unsafe { self.pgrad.get().add(off) }
    }
}

/// Parameter gradients (per role, in program order) as per-value tensors.
pub(crate) fn unpack_gradients(
    model: &Model,
    plans: &[GradPlan],
    pgrads: &[Vec<f32>],
) -> Vec<Vec<Vec<f32>>> {
    model
        .roles
        .iter()
        .zip(plans)
        .zip(pgrads)
        .map(|((rm, plan), pg)| {
            rm.params
                .iter()
                .enumerate()
                .map(|(v, p)| {
                    if p.is_empty() {
                        Vec::new()
                    } else {
                        let at = plan.param_at[v];
                        pg[at..at + p.len()].to_vec()
                    }
                })
                .collect()
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run_backward(
    g: &Graph,
    model: &Model,
    fwd_plans: &[super::plan::CpuPlan],
    bw: &mut Backward,
    kept: &KeptRecords,
    store: &Store,
    threads: &Threads,
    order: Order<'_>,
    opts: &TrainOptions,
) -> Result<PassRun, ReplayError> {
    let t0 = Instant::now();
    // Output gradients start unset (zero) but for the loss sums' (d loss =
    // 1).
    bw.dout_set.fill(false);
    for v in g.nodes() {
        if bw.seeds[model.type_role[g.node_type(v).index()]] {
            let role = model.type_role[g.node_type(v).index()];
            for j in 0..bw.plans[role].outputs.len() {
                bw.dout.output_mut(v, role, j).fill(1.0);
                bw.dout_set[bw.dout_at[v.index()] + j] = true;
            }
        }
    }
    for p in &mut bw.pgrads {
        p.fill(0.0);
    }
    for l in bw.lazy.iter_mut().flatten() {
        l.clear();
    }
    bw.next_row.fill(0);
    if opts.lazy && bw.kept_dy.len() < bw.kept_total {
        bw.kept_dy.resize(bw.kept_total, 0.0);
    }
    let rg = std::mem::replace(&mut bw.reversed, Graph::empty());
    let mut time = TimeSplit {
        construction: t0.elapsed().as_secs_f64(),
        ..TimeSplit::default()
    };
    let mut c = Counters::default();
    let t1 = Instant::now();
    let mut run_one = |batch: &[NodeId], c: &mut Counters| {
        let role = model.type_role[g.node_type(batch[0]).index()];
        // In chunks of rows whose gradient records stay in cache (a
        // 1,200-row leaf batch at h512 has 24 MB of them). The backward
        // keeps 64 rows at every width (longer chunks were measured for
        // inference only).
        for (i, part) in batch.chunks(chunk_rows(threads, CHUNK_ROWS)).enumerate() {
            let mut pc = Counters::default();
            backward_batch(
                g,
                model,
                &fwd_plans[role],
                role,
                bw,
                kept,
                store,
                threads,
                part,
                opts,
                &mut pc,
            );
            c.add_chunk(&pc, i == 0);
        }
    };
    // Every decision first: they run on the main thread between batches
    // either way, and back to back they find the frontier in cache
    // (lattice-lstm b64 h128, `cavs` backward on one thread: 0.59 → 0.40 ms).
    let how = Walk {
        decide: Decide::AllFirst,
        id_order: false,
    };
    let exact = |g: &Graph| per_run_dag(g, true, threads);
    let result = walk(&rg, order, how, &exact, |batch, _| {
        run_one(batch, &mut c);
        Ok(())
    });
    bw.reversed = rg;
    let walked = result?;
    let (mut exec, misses) = (walked.execution, walked.misses);
    time.construction += walked.dag_s.unwrap_or(0.0);
    // Lazy batching: every stack of parameter terms as one product over all
    // its rows.
    if opts.lazy {
        let t = Instant::now();
        for (role, plan) in bw.plans.iter().enumerate() {
            for (gi, group) in plan.lazy.iter().enumerate() {
                let rows = &bw.lazy[role][gi];
                if bw.next_row[role] == 0 {
                    continue;
                }
                assert_eq!(
                    bw.next_row[role],
                    bw.packed[role].first().map_or(0, |p| p.1.k),
                    "a backward pass that did not visit every node"
                );
                // SAFETY: the rows are addresses of kept forward values and of
                // kept output gradients of this run, none inside the
                // parameter gradients.
                unsafe {
                    lazy_group(
                        threads,
                        group,
                        &plan.terms,
                        rows,
                        &bw.kept_dy,
                        &bw.packed[role],
                        &mut bw.pgrads[role],
                        &mut bw.outer,
                    )
                };
                c.kernels += 1;
            }
        }
        exec += t.elapsed().as_secs_f64();
    }
    time.execution = exec;
    time.scheduling = t1.elapsed().as_secs_f64() - exec;
    Ok(PassRun {
        counters: c,
        time,
        misses,
    })
}

/// One [`LazyGroup`] over its rows (`xs` their inputs), the output
/// gradients packed ahead.
///
/// # Safety
/// As [`gemm_outer_acc_packed`].
#[allow(clippy::too_many_arguments)]
unsafe fn lazy_group(
    threads: &Threads,
    group: &LazyGroup,
    terms: &[ParamTerm],
    xs: &[usize],
    kept_dy: &[f32],
    packed: &[(usize, PackedRows)],
    pgrad: &mut [f32],
    outer: &mut OuterScratch,
) {
    let outs: Vec<(&[f32], PackedRows, usize)> = group
        .terms
        .iter()
        .map(|&t| {
            let (at, layout) = packed[terms[t].range];
            (&kept_dy[at..at + layout.floats()], layout, terms[t].dw)
        })
        .collect();
    // Every term of the group reads the same input, so the same n.
    let n = terms[group.terms[0]].n;
    // SAFETY: the caller's contract; the terms' dW are distinct parameters.
    unsafe { gemm_outer_acc_packed(threads, n, xs, &outs, pgrad, outer) };
}

/// `dW += Σ dy ⊗ x` (or `db += Σ dy`) over `rows`.
///
/// # Safety
/// As [`gemm_outer_acc`].
pub(crate) unsafe fn param_term(
    threads: &Threads,
    term: &super::grad::ParamTerm,
    rows: &[(usize, usize)],
    pgrad: &mut [f32],
    outer: &mut OuterScratch,
) {
    let dw = &mut pgrad[term.dw..term.dw + term.m * term.n.max(1)];
    if term.x.is_some() {
        // SAFETY: the caller's contract.
        unsafe { gemm_outer_acc(threads, term.m, term.n, rows, dw, outer) };
    } else {
        for &(dy, _) in rows {
            // SAFETY: dy points to m floats (the caller's contract).
            let dy = unsafe {
                std::slice::from_raw_parts(std::ptr::with_exposed_provenance::<f32>(dy), term.m)
            };
            super::simd::accumulate(&mut dw[..term.m], dy);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn backward_batch(
    g: &Graph,
    model: &Model,
    fwd: &super::plan::CpuPlan,
    role: usize,
    bw: &mut Backward,
    kept: &KeptRecords,
    store: &Store,
    threads: &Threads,
    batch: &[NodeId],
    opts: &TrainOptions,
    c: &mut Counters,
) {
    let plan = &bw.plans[role];
    let k = batch.len();
    let (n_in, n_out) = (fwd.direct_inputs, fwd.outputs.len());
    let grow = |v: &mut Vec<usize>, n: usize| {
        if v.len() < n {
            v.resize(n, 0);
        }
    };
    grow(&mut bw.fwd_ptrs, k);
    grow(&mut bw.in_ptrs, k * n_in);
    grow(&mut bw.out_ptrs, k * n_out);
    if bw.grads.len() < k * plan.units {
        bw.grads.resize(k * plan.units, 0.0);
    }
    let grads = &mut bw.grads[..k * plan.units];
    // Only what is read before it is written starts at zero (the plan's
    // first writers store).
    match plan.zero.as_slice() {
        [] => {}
        [(0, n)] if *n == plan.units => grads.fill(0.0),
        ranges => {
            for rec in grads.chunks_exact_mut(plan.units) {
                for &(at, n) in ranges {
                    rec[at..at + n].fill(0.0);
                }
            }
        }
    }
    let arena = kept.arena.as_ptr();
    let store_arena = store.arena.as_ptr();
    let zeros = bw.zeros.as_ptr().expose_provenance();
    let b = GBases {
        grad: SharedMut(grads.as_mut_ptr()),
        units: plan.units,
        pgrad: SharedMut(bw.pgrads[role].as_mut_ptr()),
        par: fwd.params.as_ptr(),
        fwd: SharedMut(bw.fwd_ptrs.as_mut_ptr()),
        ins: SharedMut(bw.in_ptrs.as_mut_ptr()),
        n_in,
        outs: SharedMut(bw.out_ptrs.as_mut_ptr()),
        n_out,
    };
    // Entry: where each row's forward values are, and its output gradients.
    for (r, &v) in batch.iter().enumerate() {
        // SAFETY: table entries of row r; addresses inside the kept records
        // and the store.
        unsafe {
            *b.fwd.get().add(r) = arena.add(kept.node_rec[v.index()]).expose_provenance();
            for j in 0..n_out {
                let (at, _) = store.output_range(v, role, j);
                *b.outs.get().add(r * n_out + j) = store_arena.add(at).expose_provenance();
            }
        }
        for (p, inputs) in fwd.inputs.iter().enumerate() {
            let us = model.bindings.port(v, p);
            for (j, &(home, _)) in inputs.iter().enumerate() {
                if let Buf::In(i) = home.buf {
                    let addr = match us.first() {
                        Some(&u) => {
                            let (at, _) =
                                store.output_range(u, model.type_role[g.node_type(u).index()], j);
                            // SAFETY: inside the store.
                            unsafe { store_arena.add(at).expose_provenance() }
                        }
                        None => zeros,
                    };
                    // SAFETY: row r's table entry.
                    unsafe { *b.ins.get().add(r * n_in + i as usize) = addr };
                }
            }
        }
        for (j, &(off, n)) in plan.outputs.iter().enumerate() {
            // SAFETY: row r's gradient record.
            let dst = unsafe { std::slice::from_raw_parts_mut(b.grad(r, off), n) };
            if bw.dout_set[bw.dout_at[v.index()] + j] {
                dst.copy_from_slice(bw.dout.output(v, role, j));
            } else {
                dst.fill(0.0);
            }
            c.bytes_gathered += 4 * n as u64;
        }
    }
    for step in &plan.steps {
        match step {
            GStep::Gemm(s) => {
                let mut a = [ASeg::EMPTY; MAX_SEGS];
                for (seg, &(off, len)) in a.iter_mut().zip(&s.a) {
                    // SAFETY: dY segments and dx are distinct values of the
                    // k gradient records.
                    *seg = unsafe { ASeg::raw(b.grad(0, off), plan.units, len) };
                }
                // SAFETY: as above.
                let out = unsafe { COut::raw(b.grad(0, s.c), plan.units) };
                gemm_reusing(
                    threads,
                    k,
                    &a[..s.a.len()],
                    &s.b,
                    out,
                    s.init,
                    &mut bw.gemm,
                    s.reuse_a,
                );
                c.kernels += 1;
            }
            GStep::Rows(ops) => {
                let work: usize = ops.iter().map(|o| o.len).sum();
                threads.rows(k, work, |rows| {
                    for r in rows {
                        for op in ops {
                            // SAFETY: row r is this thread's; these ops write
                            // only gradient records.
                            unsafe { grad_row_op(op, &b, r, model.node_data(batch[r])) };
                        }
                    }
                });
                c.kernels += 1;
            }
            GStep::Serial(ops) => {
                for (r, &v) in batch.iter().enumerate() {
                    for op in ops {
                        // SAFETY: one thread; parameter gradients are this
                        // role's.
                        unsafe { grad_row_op(op, &b, r, model.node_data(v)) };
                    }
                }
                c.kernels += 1;
            }
            GStep::Params(terms) => {
                for &ti in terms {
                    let term = &plan.terms[ti];
                    if opts.lazy && term.x.is_some() {
                        // Deferred: the rows are kept at the end of the
                        // batch. (Biases are sums, not products: nothing to
                        // batch, and the records are in cache now.)
                        continue;
                    }
                    bw.rows.clear();
                    for r in 0..k {
                        let dy = b.grad(r, term.dy).expose_provenance();
                        let x = term.x.map_or(0, |x| b.ptr(x, r).expose_provenance());
                        bw.rows.push((dy, x));
                    }
                    // SAFETY: addresses of this batch's gradient records and
                    // kept forward values.
                    unsafe {
                        param_term(threads, term, &bw.rows, &mut bw.pgrads[role], &mut bw.outer)
                    };
                    c.kernels += 1;
                }
            }
        }
    }
    if opts.lazy && !plan.lazy.is_empty() {
        // Keep the products' output gradients for the deferred terms, packed
        // as their products read them: the records are scratch the next
        // batch overwrites.
        let p0 = bw.next_row[role];
        bw.next_row[role] += k;
        for (d, &(at, m)) in plan.dy_ranges.iter().enumerate() {
            let (off, layout) = bw.packed[role][d];
            let dst = &mut bw.kept_dy[off..off + layout.floats()];
            for r in 0..k {
                // SAFETY: row r's gradient record.
                let src = unsafe { std::slice::from_raw_parts(b.grad(r, at), m) };
                layout.put(dst, p0 + r, src);
            }
        }
        for (gi, group) in plan.lazy.iter().enumerate() {
            let rows = &mut bw.lazy[role][gi];
            rows.extend((0..k).map(|r| b.ptr(group.x, r).expose_provenance()));
        }
    }
    // Exit: input gradients into the producers' output gradients.
    for (r, &v) in batch.iter().enumerate() {
        for (p, inputs) in plan.inputs.iter().enumerate() {
            for &u in model.bindings.port(v, p) {
                let ur = model.type_role[g.node_type(u).index()];
                for (j, &(off, n)) in inputs.iter().enumerate() {
                    // SAFETY: row r's gradient record.
                    let src = unsafe { std::slice::from_raw_parts(b.grad(r, off), n) };
                    let dst = bw.dout.output_mut(u, ur, j);
                    let set = &mut bw.dout_set[bw.dout_at[u.index()] + j];
                    if *set {
                        super::simd::accumulate(dst, src);
                    } else {
                        dst.copy_from_slice(src);
                        *set = true;
                    }
                    c.bytes_scattered += 4 * n as u64;
                }
            }
        }
    }
    c.batches += 1;
}

/// One op's vector–Jacobian product on row `r`.
///
/// # Safety
/// Row `r` belongs to the calling thread (a parameter-writing op runs on one
/// thread); gradient destinations never overlap the values read.
pub(crate) unsafe fn grad_row_op<B: GradRows>(op: &GRowOp, b: &B, r: usize, data: (u32, u32)) {
    let len = op.len;
    // SAFETY (whole body): addresses from the plan and the batch's tables.
    unsafe {
        let dy = std::slice::from_raw_parts(b.grad(r, op.dy), len);
        let val = |i: usize| std::slice::from_raw_parts(b.val(op.vals[i], r), op.arg_len[i]);
        let y = || std::slice::from_raw_parts(b.val(op.y, r), len);
        let dx = |i: usize| std::slice::from_raw_parts_mut(b.dst(r, op.dx[i]), op.arg_len[i]);
        let st = |i: usize| op.store[i];
        use super::simd::{gelu_vjp, mul_vjp, relu_vjp, scaled_vjp, sigmoid_vjp, tanh_vjp};
        match &op.kind {
            GKind::Sigmoid => sigmoid_vjp(dy, y(), dx(0), st(0)),
            GKind::Tanh => tanh_vjp(dy, y(), dx(0), st(0)),
            GKind::Relu => relu_vjp(dy, val(0), dx(0), st(0)),
            GKind::Gelu => gelu_vjp(dy, val(0), dx(0), st(0)),
            GKind::Scale { factor } => scaled_vjp(dy, *factor, dx(0), st(0)),
            // d eˣ = eˣ: the product's VJP with the output as the other factor.
            GKind::Exp => mul_vjp(dy, y(), dx(0), st(0)),
            GKind::OneMinus => scaled_vjp(dy, -1.0, dx(0), st(0)),
            GKind::Add | GKind::Sub => {
                scaled_vjp(dy, 1.0, dx(0), st(0));
                let s = if op.kind == GKind::Add { 1.0 } else { -1.0 };
                scaled_vjp(dy, s, dx(1), st(1));
            }
            GKind::Mul => {
                for i in 0..2 {
                    mul_vjp(dy, val(1 - i), dx(i), st(i));
                }
            }
            GKind::Sum { mean } => {
                let s = if *mean {
                    1.0 / op.vals.len() as f32
                } else {
                    1.0
                };
                for i in 0..op.vals.len() {
                    scaled_vjp(dy, s, dx(i), st(i));
                }
            }
            GKind::Concat => {
                let mut at = 0;
                for i in 0..op.vals.len() {
                    let n = op.arg_len[i];
                    scaled_vjp(&dy[at..at + n], 1.0, dx(i), st(i));
                    at += n;
                }
            }
            GKind::Slice { start } => {
                scaled_vjp(dy, 1.0, &mut dx(0)[*start..*start + len], st(0));
            }
            GKind::Lookup { rows } => {
                let row = data.0 as usize % rows;
                super::simd::accumulate(&mut dx(0)[row * len..(row + 1) * len], dy);
            }
            GKind::Softmax { width } => {
                let (y, d) = (y(), dx(0));
                for ((yc, gc), dc) in y
                    .chunks_exact(*width)
                    .zip(dy.chunks_exact(*width))
                    .zip(d.chunks_exact_mut(*width))
                {
                    let s: f32 = yc.iter().zip(gc).map(|(y, g)| y * g).sum();
                    for ((d, &y), &g) in dc.iter_mut().zip(yc).zip(gc) {
                        *d = y * (g - s) + if st(0) { 0.0 } else { *d };
                    }
                }
            }
            GKind::LayerNorm { width } => {
                let (x, y, d) = (val(0), y(), dx(0));
                for (((xc, yc), gc), dc) in x
                    .chunks_exact(*width)
                    .zip(y.chunks_exact(*width))
                    .zip(dy.chunks_exact(*width))
                    .zip(d.chunks_exact_mut(*width))
                {
                    // 1 / √(σ² + ε) of the chunk, as the forward had it.
                    let (_, inv) = super::ops::layer_norm_stats(xc);
                    let n = *width as f32;
                    let mean_g = gc.iter().sum::<f32>() / n;
                    let mean_gy = gc.iter().zip(yc).map(|(g, y)| g * y).sum::<f32>() / n;
                    for ((d, &y), &g) in dc.iter_mut().zip(yc).zip(gc) {
                        let v = (g - mean_g - y * mean_gy) * inv;
                        *d = v + if st(0) { 0.0 } else { *d };
                    }
                }
            }
            GKind::PickLoss { width } => {
                let (x, d) = (val(0), dx(0));
                // The softmax of each row, vectorised (a row may be a whole
                // vocabulary); one buffer for the op's rows.
                let mut p = vec![0.0f32; *width];
                let label = data.1 as usize % width;
                for (c, (xc, dc)) in x
                    .chunks_exact(*width)
                    .zip(d.chunks_exact_mut(*width))
                    .enumerate()
                {
                    let g = dy[c];
                    let mut max = f32::NEG_INFINITY;
                    super::simd::row_max(xc, &mut max);
                    let mut sum = 0.0;
                    super::simd::exp_shifted(xc, max, &mut p, &mut sum);
                    let inv = 1.0 / sum;
                    let store = st(0);
                    for (i, (d, &e)) in dc.iter_mut().zip(&p).enumerate() {
                        let onehot = if i == label { 1.0 } else { 0.0 };
                        *d = g * (e * inv - onehot) + if store { 0.0 } else { *d };
                    }
                }
            }
            GKind::Product { bias, terms } => {
                let mut i = 0;
                if *bias {
                    super::simd::accumulate(dx(0), dy);
                    i = 1;
                }
                for &(mm, nn, p) in terms {
                    let (wi, xi) = (i, i + 1);
                    let (w, x) = (val(wi), val(xi));
                    // dW[mm×nn] += dy[mm×p] · xᵀ (x is [nn×p]).
                    ops::product_strided(mm, p, nn, dy, (p, 1), x, (1, p), 1.0, dx(wi), nn);
                    // dx[nn×p] += Wᵀ dy (W is [mm×nn]).
                    ops::product_strided(nn, mm, p, w, (1, nn), dy, (p, 1), 1.0, dx(xi), p);
                    i += 2;
                }
            }
        }
    }
}
