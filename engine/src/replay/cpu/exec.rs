//! Running batches of cell-level nodes on the CPU: gather the producers'
//! outputs into the instances' records (summing `many` ports), run the role's
//! [`CpuPlan`], scatter the cell outputs to the nodes' slots in the store —
//! Cavs' gather at cell entry and scatter at exit. The reference runs the same
//! path one node at a time.
//!
//! Every buffer lives in [`BatchBuffers`], owned by the session and grown to
//! the largest batch once, so a steady-state run allocates nothing. Rows are
//! split over the session's threads; each instance's record, temporaries and
//! node slot are touched by one thread only.

use std::sync::atomic::{AtomicU64, Ordering};

use super::gemm::{ASeg, COut, GemmScratch, MAX_SEGS, gemm_reusing};
use super::ops;
use super::plan::{Buf, CpuPlan, GemmStep, RowKind, RowOp, Step, View};
use super::roofline::GemmLog;
use super::threads::{SharedMut, Threads};
use crate::cells::PrimOp;
use crate::graph::{Graph, NodeId};
use crate::replay::Counters;
use crate::replay::model::Model;
use crate::replay::store::Store;

/// Per-batch buffers, reused across batches and runs.
#[derive(Default)]
pub struct BatchBuffers {
    rec: Vec<f32>,
    tmp: Vec<f32>,
    data: Vec<(u32, u32)>,
    gemm: GemmScratch,
    /// The GEMM shapes run, when asked for (the roofline).
    pub(crate) log: Option<GemmLog>,
}

impl BatchBuffers {
    /// Grows the buffers for `k` instances of `plan` (never shrinks).
    fn fit(&mut self, plan: &CpuPlan, k: usize) {
        grow(&mut self.rec, k * plan.units);
        grow(&mut self.tmp, k * plan.tunits);
        if self.data.len() < k {
            self.data.resize(k, (0, 0));
        }
    }
}

fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

/// Base pointers of one batch's per-instance buffers.
#[derive(Clone, Copy)]
struct Bases {
    rec: SharedMut<f32>,
    units: usize,
    tmp: SharedMut<f32>,
    tunits: usize,
    par: *const f32,
}

// SAFETY: the parameters are only read; the record and temporary pointers
// are `SharedMut` (rows written by one thread each).
unsafe impl Send for Bases {}
unsafe impl Sync for Bases {}

/// Where a view's data is, per row: the seam between the row kernels and the
/// executors' memory schemes (records for cell-level batches, operand
/// buffers for DyNet's op-level batches).
pub(crate) trait RowBuffers: Sync {
    /// Pointer to `view`'s op 0 in row `r`.
    fn ptr(&self, v: View, r: usize) -> *mut f32;

    /// Floats between consecutive rows of `view`'s buffer.
    fn stride(&self, v: View) -> usize;

    /// Op `j`'s `len` floats of `view` in row `r`.
    ///
    /// # Safety
    /// No `&mut` to those floats may be live.
    unsafe fn get(&self, v: View, r: usize, j: usize, len: usize) -> &[f32] {
        // SAFETY: see `ptr`; the caller rules out a live `&mut`.
        unsafe { std::slice::from_raw_parts(self.ptr(v.op(j), r), len) }
    }

    /// Op `j`'s `len` floats of `view` in row `r`, writable.
    ///
    /// # Safety
    /// No other reference to those floats may be live, and only this thread
    /// may touch row `r` (row ops never write parameters).
    #[allow(clippy::mut_from_ref)]
    unsafe fn get_mut(&self, v: View, r: usize, j: usize, len: usize) -> &mut [f32] {
        debug_assert!(v.buf != Buf::Par, "a row op writes a parameter");
        // SAFETY: as stated.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(v.op(j), r), len) }
    }
}

impl RowBuffers for Bases {
    fn stride(&self, v: View) -> usize {
        match v.buf {
            Buf::Rec => self.units,
            Buf::Tmp => self.tunits,
            Buf::Par => 0,
        }
    }

    fn ptr(&self, v: View, r: usize) -> *mut f32 {
        // SAFETY: offsets come from the plan, whose every view lies inside a
        // record (`units`), a temporary block (`tunits`) or the parameters;
        // `r` is below the batch size the buffers were fitted to.
        unsafe {
            match v.buf {
                Buf::Rec => self.rec.get().add(r * self.units + v.off),
                Buf::Tmp => self.tmp.get().add(r * self.tunits + v.off),
                Buf::Par => self.par.add(v.off).cast_mut(),
            }
        }
    }
}

/// Runs `batch` (nodes of one role) through `plan`; returns nothing, counts
/// into `c`.
#[allow(clippy::too_many_arguments)]
pub fn run_batch(
    g: &Graph,
    model: &Model,
    plan: &CpuPlan,
    store: &mut Store,
    bufs: &mut BatchBuffers,
    threads: &Threads,
    batch: &[NodeId],
    c: &mut Counters,
) {
    let Some(&first) = batch.first() else {
        return;
    };
    let role = model.type_role[g.node_type(first).index()];
    let k = batch.len();
    bufs.fit(plan, k);
    for (d, &v) in bufs.data.iter_mut().zip(batch) {
        *d = model.node_data(v);
    }
    let bases = Bases {
        rec: SharedMut(bufs.rec.as_mut_ptr()),
        units: plan.units,
        tmp: SharedMut(bufs.tmp.as_mut_ptr()),
        tunits: plan.tunits,
        par: plan.params.as_ptr(),
    };
    // Cell entry: producers' outputs into the records.
    let gathered = AtomicU64::new(0);
    {
        let store: &Store = store;
        threads.rows(k, plan.units, |rows| {
            let mut bytes = 0;
            for r in rows {
                // SAFETY: row r's record is this thread's alone; the store is
                // only read in this phase.
                bytes += unsafe { gather_row(g, model, plan, store, bases, batch[r], r) };
            }
            gathered.fetch_add(bytes, Ordering::Relaxed);
        });
    }
    let data = &bufs.data[..k];
    for step in &plan.steps {
        match step {
            // SAFETY: A reads the rows' input values and C writes the result
            // values: distinct variables of the records (or temporaries), so
            // the ranges never overlap; both lie in buffers fitted to k rows.
            Step::Gemm(s) => {
                if let Some(log) = &mut bufs.log {
                    log.add(k, s.b.n(), s.b.k());
                }
                // SAFETY: see above.
                unsafe { run_gemm(s, &bases, k, threads, &mut bufs.gemm, true) }
            }
            Step::Rows(row_ops) => {
                let work: usize = row_ops.iter().map(|o| o.m * o.len).sum();
                threads.rows(k, work, |rows| {
                    for r in rows {
                        for op in row_ops {
                            // SAFETY: row r belongs to this thread; an op's
                            // result never overlaps its operands (cell values
                            // are written once, temporaries are distinct).
                            unsafe { run_row_op(op, &bases, r, data[r]) };
                        }
                    }
                });
            }
        }
    }
    // Cell exit: the outputs into the nodes' slots.
    let arena = SharedMut(store.arena.as_mut_ptr());
    let layout: &Store = &*store;
    let scattered: u64 = plan.outputs.iter().map(|o| o.1 as u64 * 4).sum::<u64>() * k as u64;
    threads.rows(k, plan.outputs.iter().map(|o| o.1).sum(), |rows| {
        for r in rows {
            for (j, &(off, n)) in plan.outputs.iter().enumerate() {
                let (at, len) = layout.output_range(batch[r], role, j);
                debug_assert_eq!(len, n);
                // SAFETY: node batch[r]'s slot is written by this row only
                // (a batch holds distinct nodes), and row r's record only read.
                unsafe {
                    let src = std::slice::from_raw_parts(
                        bases.ptr(
                            View {
                                buf: Buf::Rec,
                                off,
                                os: 0,
                            },
                            r,
                        ),
                        n,
                    );
                    std::slice::from_raw_parts_mut(arena.get().add(at), n).copy_from_slice(src);
                }
            }
        }
    });
    c.kernels += plan.kernels + plan.copy_kernels + 2;
    c.bytes_gathered += gathered.into_inner() + plan.copy_bytes_per_row * k as u64;
    c.bytes_scattered += scattered;
    c.batches += 1;
}

/// Runs a shared-weight product over `k` rows of `b`, reusing the packed
/// activations of the previous product when the plan says so and the caller
/// ran that product just before on the same rows (`consecutive`).
///
/// # Safety
/// The step's A rows and its C rectangle lie in `b`'s buffers for `k` rows
/// and do not overlap; nothing else touches C meanwhile.
pub(crate) unsafe fn run_gemm<B: RowBuffers>(
    s: &GemmStep,
    b: &B,
    k: usize,
    threads: &Threads,
    scratch: &mut GemmScratch,
    consecutive: bool,
) {
    let mut a = [ASeg::EMPTY; MAX_SEGS];
    for (seg, &(v, len)) in a.iter_mut().zip(&s.a) {
        // SAFETY: the caller's contract.
        *seg = unsafe { ASeg::raw(b.ptr(v, 0), b.stride(v), len) };
    }
    // SAFETY: the caller's contract.
    let out = unsafe { COut::raw(b.ptr(s.c, 0), b.stride(s.c)) };
    gemm_reusing(
        threads,
        k,
        &a[..s.a.len()],
        &s.b,
        out,
        s.init,
        scratch,
        s.reuse_a && consecutive,
    );
}

/// Gathers node `v`'s inputs into row `r`'s record; returns the bytes read.
///
/// # Safety
/// Row `r` belongs to the calling thread.
unsafe fn gather_row(
    g: &Graph,
    model: &Model,
    plan: &CpuPlan,
    store: &Store,
    bases: Bases,
    v: NodeId,
    r: usize,
) -> u64 {
    let mut bytes = 0;
    for (p, inputs) in plan.inputs.iter().enumerate() {
        let positions = &model.bindings[v.index()][p];
        for (j, &(off, n)) in inputs.iter().enumerate() {
            // SAFETY: row r's record belongs to this thread.
            let dst = unsafe {
                bases.get_mut(
                    View {
                        buf: Buf::Rec,
                        off,
                        os: 0,
                    },
                    r,
                    0,
                    n,
                )
            };
            if positions.is_empty() {
                dst.fill(0.0);
            }
            for (i, &pos) in positions.iter().enumerate() {
                let u = g.args(v)[pos as usize];
                let src = store.output(u, model.type_role[g.node_type(u).index()], j);
                if i == 0 {
                    dst.copy_from_slice(src);
                } else {
                    super::simd::accumulate(dst, src);
                }
                bytes += n as u64 * 4;
            }
        }
    }
    bytes
}

/// Runs one row op on row `r` (`data` = the instance's lookup id and label).
///
/// # Safety
/// Row `r` belongs to the calling thread; the op's result does not overlap
/// its operands.
pub(crate) unsafe fn run_row_op<B: RowBuffers>(op: &RowOp, b: &B, r: usize, data: (u32, u32)) {
    let (m, len) = (op.m, op.len);
    // SAFETY (whole body): the caller's contract; every view was laid out by
    // the plan inside row r's buffers or the parameters.
    unsafe {
        // Consecutive operands and result: the whole batch in one call.
        let whole = m > 1 && op.out.os == len && op.args.iter().all(|a| a.os == len);
        let (calls, span) = if whole { (1, m * len) } else { (m, len) };
        match &op.kind {
            RowKind::Copy => {
                for j in 0..calls {
                    let src = b.get(op.args[0], r, j, span);
                    b.get_mut(op.out, r, j, span).copy_from_slice(src);
                }
            }
            RowKind::Map(kind) => {
                for j in 0..calls {
                    let y = b.get_mut(op.out, r, j, span);
                    match op.args.len() {
                        1 => ops::unary(*kind, b.get(op.args[0], r, j, span), y),
                        2 if ops::is_binary(*kind) => ops::binary(
                            *kind,
                            b.get(op.args[0], r, j, span),
                            b.get(op.args[1], r, j, span),
                            y,
                        ),
                        _ => {
                            // n-ary sum or mean
                            y.copy_from_slice(b.get(op.args[0], r, j, span));
                            for a in &op.args[1..] {
                                super::simd::accumulate(y, b.get(*a, r, j, span));
                            }
                            if *kind == PrimOp::Mean {
                                super::simd::scale(y, 1.0 / op.args.len() as f32);
                            }
                        }
                    }
                }
            }
            RowKind::Concat => {
                for j in 0..m {
                    let y = b.get_mut(op.out, r, j, len);
                    let mut at = 0;
                    for (a, &n) in op.args.iter().zip(&op.arg_len) {
                        y[at..at + n].copy_from_slice(b.get(*a, r, j, n));
                        at += n;
                    }
                }
            }
            RowKind::Slice => {
                for (j, &start) in op.starts.iter().enumerate() {
                    let x = b.get(op.args[0], r, j, start + len);
                    b.get_mut(op.out, r, j, len).copy_from_slice(&x[start..]);
                }
            }
            RowKind::Lookup { rows } => {
                for j in 0..m {
                    let table = b.get(op.args[0], r, j, rows * len);
                    ops::lookup(table, *rows, data.0, b.get_mut(op.out, r, j, len));
                }
            }
            RowKind::Softmax { width } => {
                for j in 0..m {
                    let x = b.get(op.args[0], r, j, len);
                    let y = b.get_mut(op.out, r, j, len);
                    for (xc, yc) in x.chunks_exact(*width).zip(y.chunks_exact_mut(*width)) {
                        ops::softmax(xc, yc);
                    }
                }
            }
            RowKind::PickLoss { width } => {
                for j in 0..m {
                    let x = b.get(op.args[0], r, j, op.arg_len[0]);
                    let y = b.get_mut(op.out, r, j, len);
                    for (xc, o) in x.chunks_exact(*width).zip(y.iter_mut()) {
                        *o = ops::pick_loss(xc, data.1);
                    }
                }
            }
            RowKind::Product { bias, terms } => {
                for j in 0..m {
                    let y = b.get_mut(op.out, r, j, len);
                    let mut args = op.args.iter();
                    if *bias {
                        let bv = args.next().copied().unwrap_or(op.out);
                        y.copy_from_slice(b.get(bv, r, j, len));
                    } else {
                        y.fill(0.0);
                    }
                    for &(mm, nn, p) in terms {
                        let (Some(&w), Some(&x)) = (args.next(), args.next()) else {
                            break;
                        };
                        let wv = b.get(w, r, j, mm * nn);
                        let xv = b.get(x, r, j, nn * p);
                        ops::product(mm, nn, p, wv, xv, 1.0, y);
                    }
                }
            }
        }
    }
}
