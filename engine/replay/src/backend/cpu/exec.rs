//! Running batches of cell-level nodes on the CPU: gather the producers'
//! outputs into the instances' records (summing `many` ports), run the role's
//! [`CpuPlan`], scatter the cell outputs to the nodes' slots in the store —
//! Cavs' gather at cell entry and scatter at exit. Where the plan allows
//! (`Buf::In`, `Buf::Out`), the gather and the scatter are fused into the
//! cell's reads and writes: each row gets a table of its producers' output
//! slots and its node's slots, and nothing is copied. The reference runs the
//! same path one node at a time.
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
use crate::model::Model;
use crate::run::Counters;
use crate::store::Store;

/// The forward records of a run kept for its backward pass: batches take
/// consecutive regions of one arena (sized once per trace), and each node
/// remembers where its record starts.
#[derive(Default)]
pub(crate) struct KeptRecords {
    pub arena: Vec<f32>,
    pub bump: usize,
    pub node_rec: Vec<usize>,
}

/// Per-batch buffers, reused across batches and runs.
#[derive(Default)]
pub struct BatchBuffers {
    rec: Vec<f32>,
    tmp: Vec<f32>,
    data: Vec<(u32, u32)>,
    /// Per row, the addresses of its directly read inputs (`k ×
    /// direct_inputs`) and of its node's output slots (`k × outputs`).
    in_ptrs: Vec<usize>,
    out_ptrs: Vec<usize>,
    /// Zeros, read by an optional port without a producer.
    zeros: Vec<f32>,
    /// Training: every batch's records kept for the backward pass.
    pub(crate) keep: Option<KeptRecords>,
    gemm: GemmScratch,
    /// Per thread, the GEMM scratch of a batch split by rows.
    row_gemm: Vec<GemmScratch>,
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
        let (ni, no) = (plan.direct_inputs, plan.outputs.len());
        if self.in_ptrs.len() < k * ni {
            self.in_ptrs.resize(k * ni, 0);
        }
        if self.out_ptrs.len() < k * no {
            self.out_ptrs.resize(k * no, 0);
        }
        let widest = plan.inputs.iter().flatten().map(|i| i.1).max().unwrap_or(0);
        if self.zeros.len() < widest {
            self.zeros.resize(widest, 0.0);
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
    in_ptrs: SharedMut<usize>,
    n_in: usize,
    out_ptrs: SharedMut<usize>,
    n_out: usize,
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

    /// For a view whose rows are not at one stride, its row table: the
    /// address of row 0's entry and the entries between rows.
    fn row_table(&self, v: View) -> Option<(*const usize, usize)> {
        let _ = v;
        None
    }

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
            Buf::Par | Buf::In(_) | Buf::Out(_) => 0,
        }
    }

    fn row_table(&self, v: View) -> Option<(*const usize, usize)> {
        match v.buf {
            // SAFETY: the table holds k × n_in entries (fitted to the batch).
            Buf::In(i) => Some((unsafe { self.in_ptrs.get().add(i as usize) }, self.n_in)),
            // SAFETY: as above, k × n_out entries.
            Buf::Out(j) => Some((unsafe { self.out_ptrs.get().add(j as usize) }, self.n_out)),
            _ => None,
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
                Buf::In(i) => std::ptr::with_exposed_provenance_mut::<f32>(
                    *self.in_ptrs.get().add(r * self.n_in + i as usize),
                )
                .add(v.off),
                Buf::Out(j) => std::ptr::with_exposed_provenance_mut::<f32>(
                    *self.out_ptrs.get().add(r * self.n_out + j as usize),
                )
                .add(v.off),
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
    if batch.is_empty() {
        return;
    }
    let k = batch.len();
    bufs.fit(plan, k);
    for (d, &v) in bufs.data.iter_mut().zip(batch) {
        *d = model.node_data(v);
    }
    let rec = match &mut bufs.keep {
        Some(kept) => {
            let base = kept.bump;
            for (r, &v) in batch.iter().enumerate() {
                kept.node_rec[v.index()] = base + r * plan.units;
            }
            kept.bump += k * plan.units;
            assert!(
                kept.bump <= kept.arena.len(),
                "kept records sized for the trace"
            );
            SharedMut(kept.arena[base..].as_mut_ptr())
        }
        None => SharedMut(bufs.rec.as_mut_ptr()),
    };
    let bases = Bases {
        rec,
        units: plan.units,
        tmp: SharedMut(bufs.tmp.as_mut_ptr()),
        tunits: plan.tunits,
        par: plan.params.as_ptr(),
        in_ptrs: SharedMut(bufs.in_ptrs.as_mut_ptr()),
        n_in: plan.direct_inputs,
        out_ptrs: SharedMut(bufs.out_ptrs.as_mut_ptr()),
        n_out: plan.outputs.len(),
    };
    let scattered: u64 = plan.outputs.iter().map(|o| o.1 as u64 * 4).sum::<u64>() * k as u64;
    if let Some(log) = &mut bufs.log {
        for step in &plan.steps {
            if let Step::Gemm(s) = step {
                log.add(k, &s.b);
            }
        }
    }
    let arena = SharedMut(store.arena.as_mut_ptr());
    let store: &Store = store;
    let io = BatchIo {
        g,
        model,
        plan,
        store,
        arena,
        zeros: bufs.zeros.as_ptr().expose_provenance(),
        bases,
        batch,
        data: &bufs.data[..k],
    };
    let gathered = match split_by_rows(plan, k, threads) {
        Some(t) => {
            if bufs.row_gemm.len() < t {
                bufs.row_gemm.resize_with(t, GemmScratch::default);
            }
            io.run_by_rows(threads, t, &mut bufs.row_gemm[..t])
        }
        None => io.run_by_steps(threads, &mut bufs.gemm),
    };
    c.kernels += plan.kernels + plan.copy_kernels + 2;
    c.bytes_gathered += gathered + plan.copy_bytes_per_row * k as u64;
    c.bytes_scattered += scattered;
    c.batches += 1;
}

/// Packed weights (bytes, all of a cell's products) up to which a batch runs
/// whole on each thread's share of its rows (`split_by_rows`): every
/// thread then reads every weight panel, and one hand-over per batch
/// replaces two per product and one per row pass. Measured on two threads,
/// `cavs`, interleaved (docs/benchmarks.md): with a 1 MiB limit the h256
/// cells (2–2.6 MiB) stayed step by step, and lifting it made lattice-gru
/// b64 h256 1.4× and tree-lstm b256 h256 1.3× faster; lifting it past the
/// h512 cells (6–10 MiB) made tree-lstm b256 h512, bilstm-tagger b256 h512
/// and lattice-lstm b128 h512 1–3 % faster (this VM's L3 holds them many
/// times over). Beyond 16 MiB a cell's weights outgrow a typical L3, and
/// reading each panel once, split by weight panels, is kept.
pub const ROW_SPLIT_MAX_WEIGHT_BYTES: usize = 16 << 20;

#[cfg(test)]
thread_local! {
    /// Tests move the weight limit of [`split_by_rows`] (0: every batch
    /// step by step) to compare both ways on the same batches.
    pub(crate) static TEST_ROW_SPLIT_MAX_WEIGHT_BYTES: std::cell::Cell<usize> =
        const { std::cell::Cell::new(ROW_SPLIT_MAX_WEIGHT_BYTES) };
}

/// How many threads run a batch of `k` rows of `plan` as one step, each its
/// share of the rows through the whole cell (entry, every product and row
/// pass, exit), or `None` to split each product and row pass over the
/// threads in turn. One thread (`Some(1)`) when the whole batch is below the
/// threads' parallel thresholds.
fn split_by_rows(plan: &CpuPlan, k: usize, threads: &Threads) -> Option<usize> {
    #[cfg(test)]
    let max_weights = TEST_ROW_SPLIT_MAX_WEIGHT_BYTES.with(std::cell::Cell::get);
    #[cfg(not(test))]
    let max_weights = ROW_SPLIT_MAX_WEIGHT_BYTES;
    if threads.count() <= 1 || plan.packed_bytes() > max_weights {
        return None;
    }
    let t = threads
        .count_for(plan.flops_per_row as usize * k)
        .max(threads.rows_for(k, plan.floats_per_row));
    Some(t.min(k))
}

/// One batch's rows and where they read and write: what both ways of
/// splitting a batch over the threads need.
struct BatchIo<'a> {
    g: &'a Graph,
    model: &'a Model,
    plan: &'a CpuPlan,
    store: &'a Store,
    /// The store's arena (node slots written through it by one row each).
    arena: SharedMut<f32>,
    zeros: usize,
    bases: Bases,
    batch: &'a [NodeId],
    data: &'a [(u32, u32)],
}

impl BatchIo<'_> {
    /// Cell entry of rows `rows` (see [`enter_row`]); returns the bytes gathered.
    ///
    /// # Safety
    /// The rows belong to the calling thread.
    unsafe fn enter(&self, rows: std::ops::Range<usize>) -> u64 {
        let mut bytes = 0;
        for r in rows {
            // SAFETY: row r's record and table entries are this thread's
            // alone; the store is only read here (its slot addresses taken
            // for later writes by row r alone).
            bytes += unsafe {
                enter_row(
                    self.g,
                    self.model,
                    self.plan,
                    self.store,
                    self.arena,
                    self.zeros,
                    self.bases,
                    self.batch[r],
                    r,
                )
            };
        }
        bytes
    }

    /// Row ops `ops` on rows `rows` of `b` (rows numbered from `b`'s row 0,
    /// data from `first`).
    ///
    /// # Safety
    /// The rows belong to the calling thread.
    unsafe fn row_ops<B: RowBuffers>(
        &self,
        b: &B,
        ops: &[RowOp],
        rows: std::ops::Range<usize>,
        first: usize,
    ) {
        for r in rows {
            for op in ops {
                // SAFETY: row r belongs to this thread; an op's result never
                // overlaps its operands (cell values are written once,
                // temporaries are distinct).
                unsafe { run_row_op(op, b, r, self.data[first + r]) };
            }
        }
    }

    /// Cell exit of rows `rows`: the outputs not written in place, copied
    /// into the nodes' slots.
    ///
    /// # Safety
    /// The rows belong to the calling thread.
    unsafe fn exit(&self, rows: std::ops::Range<usize>) {
        for r in rows {
            for (j, &(home, n)) in self.plan.outputs.iter().enumerate() {
                if matches!(home.buf, Buf::Out(_)) {
                    continue;
                }
                // SAFETY: node batch[r]'s slot is written by this row only (a
                // batch holds distinct nodes), and row r's record read.
                unsafe {
                    let dst = self.bases.get_mut(View::at(Buf::Out(j as u16), 0), r, 0, n);
                    dst.copy_from_slice(self.bases.get(home, r, 0, n));
                }
            }
        }
    }

    /// Floats the cell exit copies per row.
    fn exit_floats(&self) -> usize {
        self.plan
            .outputs
            .iter()
            .filter(|o| !matches!(o.0.buf, Buf::Out(_)))
            .map(|o| o.1)
            .sum()
    }

    /// The batch step by step, each step split over the threads (a product
    /// by weight or row panels, a row pass by rows). Returns the bytes
    /// gathered.
    fn run_by_steps(&self, threads: &Threads, scratch: &mut GemmScratch) -> u64 {
        let (plan, k) = (self.plan, self.batch.len());
        let gathered = AtomicU64::new(0);
        // Work per row: the floats copied into the record (inputs read in
        // place cost one table entry), so rows with large inputs — MV-RNN's
        // h × h matrices — split over the threads.
        let per_row = plan.outputs.len()
            + plan
                .inputs
                .iter()
                .flatten()
                .map(|&(home, n)| if matches!(home.buf, Buf::In(_)) { 1 } else { n })
                .sum::<usize>();
        threads.rows(k, per_row, |rows| {
            // SAFETY: `split` hands each row to one thread.
            let bytes = unsafe { self.enter(rows) };
            gathered.fetch_add(bytes, Ordering::Relaxed);
        });
        for step in &plan.steps {
            match step {
                // SAFETY: A reads the rows' input values and C writes the
                // result values: distinct variables of the records (or
                // temporaries), so the ranges never overlap; both lie in
                // buffers fitted to k rows.
                Step::Gemm(s) => unsafe { run_gemm(s, &self.bases, k, threads, scratch, true) },
                Step::Rows(row_ops) => {
                    let work: usize = row_ops.iter().map(|o| o.m * o.len).sum();
                    threads.rows(k, work, |rows| {
                        // SAFETY: `split` hands each row to one thread.
                        unsafe { self.row_ops(&self.bases, row_ops, rows, 0) }
                    });
                }
            }
        }
        let copied = self.exit_floats();
        if copied > 0 {
            // SAFETY: `split` hands each row to one thread.
            threads.rows(k, copied, |rows| unsafe { self.exit(rows) });
        }
        gathered.into_inner()
    }

    /// The batch as one step over `t` threads, each running its share of
    /// the rows through the whole cell with its own GEMM scratch (`scratch`,
    /// at least `t`). A row's results do not depend on which rows share its
    /// products (each is its own dot products, in the same K order), so this
    /// computes the same bits as [`run_by_steps`](Self::run_by_steps).
    /// Returns the bytes gathered.
    fn run_by_rows(&self, threads: &Threads, t: usize, scratch: &mut [GemmScratch]) -> u64 {
        assert!(scratch.len() >= t, "GEMM scratch for every thread");
        let k = self.batch.len();
        let gathered = AtomicU64::new(0);
        let scratch = SharedMut(scratch.as_mut_ptr());
        let copied = self.exit_floats();
        threads.split_indexed(k, t, |c, rows| {
            // SAFETY: chunk c is this thread's alone, and c < t ≤ the
            // scratch's length.
            let scratch = unsafe { &mut *scratch.get().add(c) };
            let one = Threads::new(1);
            let mine = Shifted {
                inner: &self.bases,
                r0: rows.start,
            };
            let n = rows.len();
            // SAFETY: `split_indexed` hands each row to one thread, and the
            // rows of `mine` are exactly those.
            unsafe {
                gathered.fetch_add(self.enter(rows.clone()), Ordering::Relaxed);
                let mut consecutive = false;
                for step in &self.plan.steps {
                    match step {
                        // SAFETY: as in `run_by_steps`, restricted to this
                        // thread's rows.
                        Step::Gemm(s) => {
                            run_gemm(s, &mine, n, &one, scratch, consecutive);
                            consecutive = true;
                        }
                        Step::Rows(row_ops) => {
                            self.row_ops(&mine, row_ops, 0..n, rows.start);
                            consecutive = false;
                        }
                    }
                }
                if copied > 0 {
                    self.exit(rows);
                }
            }
        });
        gathered.into_inner()
    }
}

/// A batch's buffers seen from row `r0` on: one thread's share of the rows
/// as rows `0..`, for the GEMM over those rows alone.
struct Shifted<'a> {
    inner: &'a Bases,
    r0: usize,
}

impl RowBuffers for Shifted<'_> {
    fn ptr(&self, v: View, r: usize) -> *mut f32 {
        self.inner.ptr(v, self.r0 + r)
    }

    fn stride(&self, v: View) -> usize {
        self.inner.stride(v)
    }

    fn row_table(&self, v: View) -> Option<(*const usize, usize)> {
        self.inner.row_table(v).map(|(table, stride)| {
            // SAFETY: the table has an entry per row of the batch, and
            // r0 is one of them.
            (unsafe { table.add(self.r0 * stride) }, stride)
        })
    }
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
        *seg = unsafe {
            match b.row_table(v) {
                Some((table, stride)) => ASeg::rows(table, stride, v.off, len),
                None => ASeg::raw(b.ptr(v, 0), b.stride(v), len),
            }
        };
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

/// Cell entry of node `v` on row `r`: its inputs gathered into the record
/// (or, for inputs read in place, its producers' slot addresses into the row
/// table) and its output slots' addresses into the row table. Returns the
/// bytes its inputs hold.
///
/// # Safety
/// Row `r` belongs to the calling thread; `arena` is the store's arena.
#[allow(clippy::too_many_arguments)]
unsafe fn enter_row(
    g: &Graph,
    model: &Model,
    plan: &CpuPlan,
    store: &Store,
    arena: SharedMut<f32>,
    zeros: usize,
    bases: Bases,
    v: NodeId,
    r: usize,
) -> u64 {
    let role = model.type_role[g.node_type(v).index()];
    for j in 0..plan.outputs.len() {
        let (at, _) = store.output_range(v, role, j);
        // SAFETY: row r's table entries are this thread's; `at` is inside the
        // arena.
        unsafe {
            *bases.out_ptrs.get().add(r * bases.n_out + j) =
                arena.get().add(at).expose_provenance();
        }
    }
    let mut bytes = 0;
    for (p, inputs) in plan.inputs.iter().enumerate() {
        let us = model.bindings.port(v, p);
        for (j, &(home, n)) in inputs.iter().enumerate() {
            if let Buf::In(i) = home.buf {
                let addr = match us.first() {
                    Some(&u) => {
                        let (at, _) =
                            store.output_range(u, model.type_role[g.node_type(u).index()], j);
                        bytes += n as u64 * 4;
                        // SAFETY: `at` is inside the arena.
                        unsafe { arena.get().add(at).expose_provenance() }
                    }
                    None => zeros,
                };
                // SAFETY: row r's table entries are this thread's.
                unsafe { *bases.in_ptrs.get().add(r * bases.n_in + i as usize) = addr };
                continue;
            }
            // SAFETY: row r's record belongs to this thread.
            let dst = unsafe { bases.get_mut(home, r, 0, n) };
            if us.is_empty() {
                dst.fill(0.0);
            }
            for (i, &u) in us.iter().enumerate() {
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
            RowKind::Scale { factor } => {
                for j in 0..calls {
                    let x = b.get(op.args[0], r, j, span);
                    super::simd::scaled(x, *factor, b.get_mut(op.out, r, j, span));
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
            RowKind::Softmax { width } | RowKind::LayerNorm { width } => {
                let norm = matches!(op.kind, RowKind::LayerNorm { .. });
                for j in 0..m {
                    let x = b.get(op.args[0], r, j, len);
                    let y = b.get_mut(op.out, r, j, len);
                    for (xc, yc) in x.chunks_exact(*width).zip(y.chunks_exact_mut(*width)) {
                        if norm {
                            ops::layer_norm(xc, yc);
                        } else {
                            ops::softmax(xc, yc);
                        }
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
