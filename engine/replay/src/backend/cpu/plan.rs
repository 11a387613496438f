//! A role's [`CellProgram`] compiled for the CPU: the steps one batch of `k`
//! instances runs, with every weight matrix packed once.
//!
//! The program's semantics are the device-independent ones (`crate::incell`,
//! shared with the CUDA backend): each in-cell batch is one kernel over its
//! `m` ops; an operand whose blocks are consecutive in the layout is read in
//! place (strided), a broadcast with op stride 0, anything else is first
//! gathered into a per-instance temporary (a counted copy); a result that is
//! not consecutive is computed into a temporary and scattered (a counted
//! copy). What the CPU adds:
//!
//! - **Products with shared weights** become [`gemm`](super::gemm::gemm)
//!   calls against weights packed when the session opens (for every executor
//!   and layout alike: the CPU GEMM packs its weight operand in any case, so
//!   whether the stacked weights are consecutive in memory cannot matter here,
//!   unlike on the GPU where cuBLAS reads them in place). A multi-term affine
//!   is one product over the concatenated inputs, its bias the accumulators'
//!   start; `C` is written straight into the instance records. A is a list
//!   of row segments, so each group of ops over the same inputs reads them
//!   where they live: the in-cell gathers the layout's program asks for
//!   (operands not consecutive) are skipped for products, whatever the
//!   layout.
//! - **Everything else runs row by row** (`RowOp`): consecutive non-GEMM
//!   batches form one `Step::Rows`, run for one instance's record at a time
//!   (Cavs §3.5's fusion: the record stays in L1 through the whole chain of
//!   sigmoids, products and sums). With fusion off every batch is its own
//!   step over all rows (the ablation baseline).

use super::gemm::{Init, MAX_SEGS, PackedB};
use super::split::{CHUNK_ROWS, MAX_CHUNK_ROWS};
use crate::cells::{Cell, PrimOp, ValueKind};
use crate::incell::{Access, CellProgram};
use crate::model::RoleModel;

/// Which per-instance buffer a location is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Buf {
    /// The instance's record (cell variables in layout order).
    Rec,
    /// The instance's temporaries (gathered operands, unplaced results).
    Tmp,
    /// The parameters (shared by every instance).
    Par,
    /// Cell input `i` read in place from its producer's output slot (or from
    /// zeros when an optional port has no producer): Cavs' gather at cell
    /// entry, fused into the reads.
    In(u16),
    /// Cell output `j` written straight into the node's slot in the store:
    /// the scatter at cell exit, fused into the writes.
    Out(u16),
}

/// Op `j`'s data of instance `r` at `base(buf, r) + off + j·os`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct View {
    pub buf: Buf,
    pub off: usize,
    pub os: usize,
}

impl View {
    pub(crate) fn at(buf: Buf, off: usize) -> View {
        View { buf, off, os: 0 }
    }

    /// Op `j`'s view (op stride folded in).
    pub fn op(self, j: usize) -> View {
        View {
            buf: self.buf,
            off: self.off + j * self.os,
            os: 0,
        }
    }
}

/// One shared-weight product: `C = bias + [x₁ | x₂ | …] · Wᵀ` for all rows.
pub(crate) struct GemmStep {
    /// Packed weights (and bias).
    pub b: PackedB,
    /// The K segments of A: location and length.
    pub a: Vec<(View, usize)>,
    /// Where row `r`'s `N` results start.
    pub c: View,
    /// Overwrite (bias start) or accumulate (a continuation of an affine
    /// with more than [`MAX_SEGS`] terms).
    pub init: Init,
    /// The previous step is a product over the very same A (packed already).
    pub reuse_a: bool,
}

/// What a row op computes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RowKind {
    /// `out_j = arg0_j` (a gather into a temporary or a scatter out of one).
    Copy,
    /// An elementwise map (unary or binary), n-ary sum or mean.
    Map(PrimOp),
    /// `out_j = factor · arg0_j` (`scale`; a batch's ops share the factor).
    Scale { factor: f32 },
    /// Concatenation of the args (lengths in `arg_len`).
    Concat,
    /// `out_j = arg0_j[starts[j] ..]`.
    Slice,
    /// A row of the table `arg0` (`rows` rows) picked by the instance's id.
    Lookup { rows: usize },
    /// Softmax over chunks of `width`.
    Softmax { width: usize },
    /// Layer normalisation over chunks of `width`.
    LayerNorm { width: usize },
    /// `−log softmax` over chunks of `width`, picked by the instance's label.
    PickLoss { width: usize },
    /// Per-instance matrix products: `out = [bias] + Σ Wₜ·xₜ` with `Wₜ` of
    /// shape `[mm, nn]` and `xₜ` of shape `[nn, p]`; `args` = `[bias?,
    /// W₁, x₁, …]`.
    Product {
        bias: bool,
        terms: Vec<(usize, usize, usize)>,
    },
}

/// One batch's work on one instance's row.
#[derive(Clone, Debug)]
pub(crate) struct RowOp {
    pub kind: RowKind,
    /// Ops in the batch.
    pub m: usize,
    /// Floats of each op's result.
    pub len: usize,
    pub args: Vec<View>,
    pub arg_len: Vec<usize>,
    pub out: View,
    /// Per op, the first sliced float (slices only).
    pub starts: Vec<usize>,
}

/// A step of a batch.
pub(crate) enum Step {
    /// One product over all rows (threads split its panels).
    Gemm(GemmStep),
    /// Row ops run instance by instance (threads split the rows).
    Rows(Vec<RowOp>),
}

/// How to compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanOptions {
    /// Fuse consecutive row batches into one pass per instance (Cavs §3.5).
    pub fuse: bool,
    /// Read single-producer inputs from the producers' slots and write
    /// outputs into the nodes' slots instead of copying at cell borders
    /// (off for the op-level DyNet executor, which binds operands itself).
    pub direct_io: bool,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            fuse: true,
            direct_io: true,
        }
    }
}

/// A role's cell compiled for the CPU.
pub struct CpuPlan {
    /// Floats of an instance's record.
    pub units: usize,
    /// Floats of an instance's temporaries.
    pub tunits: usize,
    pub(crate) steps: Vec<Step>,
    /// Parameters the row ops read (the program's, in layout order, then
    /// gathered parameter blocks).
    pub(crate) params: Vec<f32>,
    /// Per port, per input value: where the cell reads it (a record offset
    /// the entry gather fills, or [`Buf::In`]) and its floats.
    pub(crate) inputs: Vec<Vec<(View, usize)>>,
    /// Per cell output: where the cell leaves it (a record offset the exit
    /// copies from, or [`Buf::Out`]: already in the store) and its floats.
    pub(crate) outputs: Vec<(View, usize)>,
    /// Inputs read in place ([`Buf::In`] indices `0..direct_inputs`).
    pub(crate) direct_inputs: usize,
    /// Kernels per batch run (products, row passes), excluding copies.
    pub kernels: u64,
    /// Copy kernels per batch run (gathers and scatters inside the cell).
    pub copy_kernels: u64,
    /// Bytes those copies move per instance.
    pub copy_bytes_per_row: u64,
    /// GEMM flops per instance (shared-weight and per-instance products).
    pub flops_per_row: u64,
    /// Floats a row touches outside the products' arithmetic: its inputs,
    /// one per output (a table entry), the row passes' and the products'
    /// results (how the row split weighs a batch's non-GEMM work).
    pub(crate) floats_per_row: usize,
    /// `(N, K)` of each shared-weight product (for the roofline).
    pub gemm_shapes: Vec<(usize, usize)>,
    /// Per in-cell batch, its steps (meaningful when compiled unfused: the
    /// op-level DyNet executor runs one op's steps at a time).
    pub(crate) op_steps: Vec<std::ops::Range<usize>>,
}

impl CpuPlan {
    /// Rows per inference chunk on one thread ([`CHUNK_ROWS`](super::split::CHUNK_ROWS) explains
    /// chunking). Each chunk streams the cell's weights again, and a chunk's
    /// records should stay in cache. A chunk is therefore made long enough
    /// that its records hold at least twice the bytes of the weights it
    /// re-reads, within 64–256 rows. The weights-to-record ratio
    /// grows with the cell's input width, so h64 cells keep 64 rows and h ≥ 256
    /// cells take 256. Measured on the AVX2 VM, one thread, 5 interleaved
    /// processes each, 256 rows against 64 (CPU time, median per-round
    /// ratio): lattice-lstm b256 h512 1.14× faster (1.47 against 1.67 s;
    /// 128 rows 1.01×), lattice-gru b256 h512 1.09×, bilstm-tagger b256 h256
    /// 1.09×, lattice-lstm b64 h256 1.02×, tree-lstm b256 h512 level
    /// (0.98×, whole batches 0.90×); tree-lstm b256 h64, whose rule gives 64
    /// rows, was 0.89× at 256.
    pub(crate) fn chunk_rows(&self) -> usize {
        let weights: usize = self.gemm_shapes.iter().map(|&(n, k)| n * k * 4).sum();
        let record = (self.units + self.tunits).max(1) * 4;
        (2 * weights / record).clamp(CHUNK_ROWS, MAX_CHUNK_ROWS)
    }

    /// Compiles `prog` (a layout's program, or [`CellProgram::op_by_op`]) for
    /// role `rm`.
    pub fn new(rm: &RoleModel, prog: &CellProgram, opts: PlanOptions) -> CpuPlan {
        let cell = &rm.cell;
        let home = homes(cell, prog, opts.direct_io);
        let mut c = Compiler {
            home: &home,
            cell,
            rm,
            prog,
            tunits: 0,
            params: prog.params.clone(),
            steps: Vec::new(),
            rows: Vec::new(),
            kernels: 0,
            copy_kernels: 0,
            copy_bytes: 0,
            flops: 0,
            shapes: Vec::new(),
            fuse: opts.fuse,
        };
        let mut op_steps = Vec::with_capacity(prog.batches.len());
        for b in 0..prog.batches.len() {
            let before = c.steps.len();
            c.batch(b);
            op_steps.push(before..c.steps.len());
        }
        c.flush_rows();
        let numel = |v: usize| cell.values[v].numel();
        let inputs: Vec<Vec<(View, usize)>> = cell
            .ports
            .iter()
            .map(|p| {
                p.inputs
                    .iter()
                    .map(|i| (home[i.index()], numel(i.index())))
                    .collect()
            })
            .collect();
        let outputs = cell
            .outputs
            .iter()
            .map(|o| (home[o.index()], numel(o.index())))
            .collect();
        let direct_inputs = home.iter().filter(|h| matches!(h.buf, Buf::In(_))).count();
        let floats_per_row = cell.outputs.len()
            + inputs.iter().flatten().map(|i| i.1).sum::<usize>()
            + c.steps
                .iter()
                .map(|s| match s {
                    Step::Rows(ops) => ops.iter().map(|o| o.m * o.len).sum(),
                    Step::Gemm(g) => g.b.n(),
                })
                .sum::<usize>();
        CpuPlan {
            units: prog.units,
            tunits: c.tunits,
            steps: c.steps,
            params: c.params,
            inputs,
            outputs,
            direct_inputs,
            kernels: c.kernels,
            copy_kernels: c.copy_kernels,
            copy_bytes_per_row: c.copy_bytes,
            flops_per_row: c.flops,
            floats_per_row,
            gemm_shapes: c.shapes,
            op_steps,
        }
    }

    /// Bytes of packed weights.
    pub fn packed_bytes(&self) -> usize {
        self.steps
            .iter()
            .map(|s| match s {
                Step::Gemm(g) => g.b.bytes(),
                Step::Rows(_) => 0,
            })
            .sum()
    }
}

/// Where every value of the cell lives for a batch run: its record slot,
/// or — with `direct` — for a cell input fed by at most one producer, the
/// producer's output slot ([`Buf::In`]), and for a cell output written by a
/// row op, the node's own slot ([`Buf::Out`]). A value a product reads or
/// writes as part of a multi-value strided operand (consecutive blocks in
/// the layout) stays in the record: its neighbours must be where the layout
/// put them; so do products' results (GEMM writes rows at one stride). A
/// row-op batch whose blocks are thereby no longer one strided block runs op
/// by op instead.
pub(crate) fn homes(cell: &Cell, prog: &CellProgram, direct: bool) -> Vec<View> {
    let n = cell.values.len();
    let mut home: Vec<View> = (0..n).map(|v| View::at(Buf::Rec, prog.unit[v])).collect();
    if !direct {
        return home;
    }
    let mut pinned = vec![false; n];
    for b in &prog.batches {
        let first = &cell.ops[b.ops[0]];
        let product = matches!(first.kind, PrimOp::Affine | PrimOp::Matmul);
        // Operands are never pinned: row ops (per-instance products
        // included) run op by op where their operands are not one strided
        // block (see `Compiler::batch`), and shared-weight products read each
        // input where it lives (GEMM row segments). Pinning MV-RNN's h × h
        // child matrices for its batched `B·a, A·b` copied 130 KB per node
        // at h128 into the record. Products' results stay in the record: a
        // GEMM writes its rows at one stride.
        if product {
            for &o in &b.ops {
                pinned[cell.ops[o].out.index()] = true;
            }
        }
    }
    let mut is_input = vec![false; n];
    let mut next = 0u16;
    for p in &cell.ports {
        for v in &p.inputs {
            let v = v.index();
            is_input[v] = true;
            if p.arity != crate::cells::Arity::Many && !pinned[v] {
                home[v] = View::at(Buf::In(next), 0);
                next += 1;
            }
        }
    }
    for (j, o) in cell.outputs.iter().enumerate() {
        let o = o.index();
        let once = cell.outputs.iter().filter(|x| x.index() == o).count() == 1;
        if !pinned[o] && !is_input[o] && once {
            home[o] = View::at(Buf::Out(j as u16), 0);
        }
    }
    home
}

/// The `(weight, input)` argument pairs of `op` when it is a product with
/// shared weights (every weight a parameter, every input a vector of the
/// weight's width), compiled to GEMMs; `None` for any other op.
fn shared_weight_terms(cell: &Cell, op: &crate::cells::Op) -> Option<Vec<(usize, usize)>> {
    let pairs: Vec<(usize, usize)> = match op.kind {
        PrimOp::Affine => (1..op.args.len()).step_by(2).map(|i| (i, i + 1)).collect(),
        PrimOp::Matmul => vec![(0, 1)],
        _ => return None,
    };
    let param = |v: usize| cell.values[v].kind == ValueKind::Param;
    let shared = pairs.iter().all(|&(wi, xi)| {
        let (w, x) = (op.args[wi].index(), op.args[xi].index());
        let nn = cell.values[w].shape.get(1).copied().unwrap_or(1);
        param(w) && !param(x) && cell.values[x].numel() == nn
    });
    shared.then_some(pairs)
}

struct Compiler<'a> {
    /// Where each non-parameter value lives (see [`homes`]).
    home: &'a [View],
    cell: &'a Cell,
    rm: &'a RoleModel,
    prog: &'a CellProgram,
    tunits: usize,
    params: Vec<f32>,
    steps: Vec<Step>,
    rows: Vec<RowOp>,
    kernels: u64,
    copy_kernels: u64,
    copy_bytes: u64,
    flops: u64,
    shapes: Vec<(usize, usize)>,
    fuse: bool,
}

impl Compiler<'_> {
    fn numel(&self, v: usize) -> usize {
        self.cell.values[v].numel()
    }

    fn is_param(&self, v: usize) -> bool {
        self.cell.values[v].kind == ValueKind::Param
    }

    fn temp(&mut self, floats: usize) -> usize {
        self.tunits += floats;
        self.tunits - floats
    }

    fn flush_rows(&mut self) {
        if !self.rows.is_empty() {
            self.kernels += 1;
            self.steps.push(Step::Rows(std::mem::take(&mut self.rows)));
        }
    }

    fn push_row(&mut self, op: RowOp) {
        self.rows.push(op);
    }

    /// The view of operand `i` of in-cell batch `b` (gathering it first when
    /// the layout does not have it consecutive).
    fn operand(&mut self, b: usize, i: usize) -> View {
        let batch = &self.prog.batches[b];
        let ops: Vec<usize> = batch.ops.clone();
        let values: Vec<usize> = ops
            .iter()
            .map(|&o| self.cell.ops[o].args[i].index())
            .collect();
        let v0 = values[0];
        let numel = self.numel(v0);
        let param = self.is_param(v0);
        let (buf, base) = if param {
            (Buf::Par, self.prog.param_at[v0])
        } else {
            (self.home[v0].buf, self.home[v0].off)
        };
        match batch.args[i] {
            Access::InPlace => View {
                buf,
                off: base,
                os: numel,
            },
            Access::Broadcast => View::at(buf, base),
            Access::Gather if param => {
                // Constant data: gathered once, here, like the packed weights.
                let off = self.params.len();
                for &v in &values {
                    let at = self.prog.param_at[v];
                    let block = self.prog.params[at..at + numel].to_vec();
                    self.params.extend(block);
                }
                View {
                    buf: Buf::Par,
                    off,
                    os: numel,
                }
            }
            Access::Gather => {
                let off = self.temp(values.len() * numel);
                for (j, &v) in values.iter().enumerate() {
                    self.push_row(RowOp {
                        kind: RowKind::Copy,
                        m: 1,
                        len: numel,
                        args: vec![self.home[v]],
                        arg_len: vec![numel],
                        out: View::at(Buf::Tmp, off + j * numel),
                        starts: Vec::new(),
                    });
                }
                self.copy_kernels += 1;
                self.copy_bytes += (values.len() * numel * 4) as u64;
                View {
                    buf: Buf::Tmp,
                    off,
                    os: numel,
                }
            }
        }
    }

    fn batch(&mut self, b: usize) {
        let batch = &self.prog.batches[b];
        let ops = batch.ops.clone();
        let first = &self.cell.ops[ops[0]];
        let kind = first.kind;
        let m = ops.len();
        let out = self.numel(first.out.index());
        let arity = first.args.len();
        let in_place = batch.result_in_place;
        if !self.fuse {
            self.flush_rows();
        }
        let groups = self.product_groups(b);
        let args: Vec<View> = match &groups {
            // A shared-weight product's GEMMs pack their weights from the
            // parameters and read each group's inputs where they live (A is
            // a list of row segments, so nothing needs to be consecutive):
            // no operand views, hence no gathers.
            Some(_) => Vec::new(),
            None => (0..arity).map(|i| self.operand(b, i)).collect(),
        };
        let result = if in_place {
            View {
                os: out,
                ..self.home[first.out.index()]
            }
        } else {
            View {
                buf: Buf::Tmp,
                off: self.temp(m * out),
                os: out,
            }
        };
        let arg_len: Vec<usize> = first.args.iter().map(|a| self.numel(a.index())).collect();
        match kind {
            PrimOp::Affine | PrimOp::Matmul => self.product(b, &args, result, groups),
            _ => {
                let row = RowOp {
                    kind: match kind {
                        PrimOp::Concat => RowKind::Concat,
                        PrimOp::Slice => RowKind::Slice,
                        PrimOp::Lookup => RowKind::Lookup {
                            rows: self.cell.values[first.args[0].index()].shape[0].max(1),
                        },
                        PrimOp::Softmax => RowKind::Softmax {
                            width: self.cell.values[first.args[0].index()].shape[0].max(1),
                        },
                        PrimOp::LayerNorm => RowKind::LayerNorm {
                            width: self.cell.values[first.args[0].index()].shape[0].max(1),
                        },
                        PrimOp::PickLoss => RowKind::PickLoss {
                            width: self.cell.values[first.args[0].index()].shape[0].max(1),
                        },
                        PrimOp::Scale => RowKind::Scale {
                            factor: first.factor.unwrap_or(1.0),
                        },
                        k => RowKind::Map(k),
                    },
                    m,
                    len: out,
                    args,
                    arg_len,
                    out: result,
                    starts: ops
                        .iter()
                        .map(|&o| {
                            let op = &self.cell.ops[o];
                            let v = &self.cell.values[op.args[0].index()];
                            let inner: usize = v.shape[1..].iter().product();
                            op.slice.map_or(0, |(s, _)| s * inner)
                        })
                        .collect(),
                };
                if self.uniform(b, &row) {
                    self.push_row(row);
                } else {
                    self.push_split(b, row);
                }
            }
        }
        if !in_place {
            for (j, &o) in ops.iter().enumerate() {
                let v = self.cell.ops[o].out.index();
                self.push_row(RowOp {
                    kind: RowKind::Copy,
                    m: 1,
                    len: out,
                    args: vec![result.op(j)],
                    arg_len: vec![out],
                    out: self.home[v],
                    starts: Vec::new(),
                });
            }
            self.copy_kernels += 1;
            self.copy_bytes += (m * out * 4) as u64;
        }
        if !self.fuse {
            self.flush_rows();
        }
    }

    /// Are `row`'s operand and result views (made from op 0's home and the
    /// layout's stride) right for every op of batch `b`? Not when a value of
    /// a consecutive block was redirected to a producer's or node's slot.
    fn uniform(&self, b: usize, row: &RowOp) -> bool {
        let batch = &self.prog.batches[b];
        let ops = &batch.ops;
        if ops.len() == 1 {
            return true;
        }
        let rec = |v: usize| self.home[v].buf == Buf::Rec;
        let args_ok = (0..row.args.len()).all(|i| {
            batch.args[i] != Access::InPlace
                || ops.iter().all(|&o| {
                    let v = self.cell.ops[o].args[i].index();
                    self.is_param(v) || rec(v)
                })
        });
        let out_ok =
            !batch.result_in_place || ops.iter().all(|&o| rec(self.cell.ops[o].out.index()));
        args_ok && out_ok
    }

    /// Pushes `row` (batch `b`) as one row op per op of the batch, each with
    /// its values' own homes.
    fn push_split(&mut self, b: usize, row: RowOp) {
        let batch = &self.prog.batches[b];
        let ops = batch.ops.clone();
        for (j, &o) in ops.iter().enumerate() {
            let op = &self.cell.ops[o];
            let args = row
                .args
                .iter()
                .enumerate()
                .map(|(i, v)| match batch.args[i] {
                    Access::InPlace if !self.is_param(op.args[i].index()) => {
                        self.home[op.args[i].index()]
                    }
                    _ => v.op(j),
                })
                .collect();
            let out = if batch.result_in_place {
                self.home[op.out.index()]
            } else {
                row.out.op(j)
            };
            self.rows.push(RowOp {
                kind: row.kind.clone(),
                m: 1,
                len: row.len,
                args,
                arg_len: row.arg_len.clone(),
                out,
                starts: vec![row.starts.get(j).copied().unwrap_or(0)],
            });
        }
    }

    /// For a shared-weight product batch (weights parameters, inputs
    /// vectors), its groups: runs of consecutive ops that read the same input
    /// values, one GEMM each (all ops when the inputs are broadcast, e.g. a
    /// cell's gates; the lattice LSTM's gates over h_prev apart from its word
    /// gate over c_w; singletons when every op has its own). `None` for any
    /// other batch.
    fn product_groups(&self, b: usize) -> Option<Vec<Vec<usize>>> {
        let ops = &self.prog.batches[b].ops;
        let pairs = shared_weight_terms(self.cell, &self.cell.ops[ops[0]])?;
        let inputs_of = |o: usize| -> Vec<usize> {
            pairs
                .iter()
                .map(|&(_, xi)| self.cell.ops[o].args[xi].index())
                .collect()
        };
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (j, &o) in ops.iter().enumerate() {
            match groups.last_mut() {
                Some(g) if inputs_of(ops[g[0]]) == inputs_of(o) => g.push(j),
                _ => groups.push(vec![j]),
            }
        }
        Some(groups)
    }

    /// An affine or matmul batch: shared-weight GEMMs (one per group) where
    /// the weights are parameters and the inputs vectors, per-instance
    /// products otherwise.
    fn product(&mut self, b: usize, args: &[View], result: View, groups: Option<Vec<Vec<usize>>>) {
        let ops = self.prog.batches[b].ops.clone();
        let first = &self.cell.ops[ops[0]];
        let m = ops.len();
        let out = self.numel(first.out.index());
        let affine = first.kind == PrimOp::Affine;
        let pairs: Vec<(usize, usize)> = if affine {
            (1..first.args.len())
                .step_by(2)
                .map(|i| (i, i + 1))
                .collect()
        } else {
            vec![(0, 1)]
        };
        // (rows, cols, p) of each term: W is [mm, nn], x is [nn, p].
        let dims: Vec<(usize, usize, usize)> = pairs
            .iter()
            .map(|&(wi, xi)| {
                let ws = &self.cell.values[first.args[wi].index()].shape;
                let (mm, nn) = (ws[0], ws.get(1).copied().unwrap_or(1));
                let p = self.numel(first.args[xi].index()) / nn.max(1);
                (mm, nn, p)
            })
            .collect();
        let shared = pairs.iter().zip(&dims).all(|(&(wi, xi), &(_, _, p))| {
            self.is_param(first.args[wi].index())
                && !self.is_param(first.args[xi].index())
                && p == 1
        });
        for &(mm, nn, p) in &dims {
            self.flops += (2 * m * mm * nn * p) as u64;
        }
        if !shared {
            let mut a = Vec::new();
            if affine {
                a.push(args[0]);
            }
            for &(wi, xi) in &pairs {
                a.push(args[wi]);
                a.push(args[xi]);
            }
            // `a` lists the op's own arguments in order (bias, then weight
            // and input of each term), as `push_split` expects.
            let row = RowOp {
                kind: RowKind::Product {
                    bias: affine,
                    terms: dims,
                },
                m,
                len: out,
                arg_len: a.iter().map(|_| 0).collect(),
                args: a,
                out: result,
                starts: Vec::new(),
            };
            if self.uniform(b, &row) {
                self.push_row(row);
            } else {
                self.push_split(b, row);
            }
            return;
        }
        self.flush_rows();
        let Some(mut groups) = groups else {
            unreachable!("shared-weight products come with their groups")
        };
        // Groups over the same inputs run back to back, so the later ones
        // reuse the packed inputs (they write disjoint columns of C, so their
        // order does not matter).
        let inputs_of = |g: &Vec<usize>| -> Vec<usize> {
            pairs
                .iter()
                .map(|&(_, xi)| self.cell.ops[ops[g[0]]].args[xi].index())
                .collect()
        };
        groups.sort_by_key(|g| inputs_of(g));
        for g in groups {
            // Terms in chunks of at most MAX_SEGS inputs: the first chunk
            // starts from the bias, the others accumulate.
            let terms: Vec<usize> = (0..pairs.len()).collect();
            for (ci, chunk) in terms.chunks(MAX_SEGS).enumerate() {
                let n = g.len() * out;
                let k_total: usize = chunk.iter().map(|&t| dims[t].1).sum();
                let rm = self.rm;
                let cell = self.cell;
                let w = |i: usize, p: usize| -> f32 {
                    let (jj, row) = (g[i / out], i % out);
                    let op = &cell.ops[ops[jj]];
                    let mut col = p;
                    for &t in chunk {
                        let nn = dims[t].1;
                        if col < nn {
                            return rm.params[op.args[pairs[t].0].index()][row * nn + col];
                        }
                        col -= nn;
                    }
                    unreachable!("column {p} beyond K")
                };
                let bias: Option<Vec<f32>> = (affine && ci == 0).then(|| {
                    g.iter()
                        .flat_map(|&jj| {
                            rm.params[cell.ops[ops[jj]].args[0].index()].iter().copied()
                        })
                        .collect()
                });
                let packed = PackedB::new(n, k_total, w, bias.as_deref());
                let j0 = g[0];
                let a = chunk
                    .iter()
                    .map(|&t| {
                        let x = self.cell.ops[ops[j0]].args[pairs[t].1].index();
                        (self.home[x], dims[t].1)
                    })
                    .collect();
                self.shapes.push((n, k_total));
                // Cell values are written once, so equal views of a directly
                // preceding product hold the same data.
                let reuse_a = matches!(self.steps.last(), Some(Step::Gemm(p)) if p.a == a);
                self.steps.push(Step::Gemm(GemmStep {
                    b: packed,
                    a,
                    c: result.op(j0),
                    init: if ci == 0 {
                        Init::Overwrite
                    } else {
                        Init::Accumulate
                    },
                    reuse_a,
                }));
                self.kernels += 1;
            }
        }
    }
}

impl std::fmt::Display for CpuPlan {
    /// One line per step: products with their shape and operand views, row
    /// passes with their ops.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "record {} floats, temporaries {}, {} copy kernels ({} B/instance), {} direct inputs",
            self.units, self.tunits, self.copy_kernels, self.copy_bytes_per_row, self.direct_inputs
        )?;
        for s in &self.steps {
            match s {
                Step::Gemm(g) => writeln!(
                    f,
                    "  gemm N {} K {} A {:?} C {:?}{}",
                    g.b.n(),
                    g.b.k(),
                    g.a,
                    g.c,
                    if g.reuse_a { " (A reused)" } else { "" }
                )?,
                Step::Rows(r) => {
                    let ops: Vec<String> = r
                        .iter()
                        .map(|o| format!("{:?}×{} {:?}->{:?}", o.kind, o.m, o.args, o.out))
                        .collect();
                    writeln!(f, "  rows {}", ops.join("; "))?
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::CellLibrary;
    use crate::model::Model;
    use crate::trace::Level;
    use crate::workloads::{self, DataChoice, RecordOptions};

    fn model(workload: &str) -> Model {
        model_at(workload, 8)
    }

    fn model_at(workload: &str, hidden: usize) -> Model {
        let cells = CellLibrary::builtin().unwrap();
        let trace = workloads::record(
            &RecordOptions {
                workload: workloads::workload(workload).unwrap(),
                data: DataChoice::Default,
                batch: 2,
                hidden,
                level: Level::Cell,
                seed: 1,
            },
            &cells,
        )
        .unwrap();
        Model::new(&trace, &cells, 3).unwrap()
    }

    #[test]
    fn inference_chunks_grow_with_the_cells_width_within_64_to_256_rows() {
        let rows = |hidden| {
            let m = model_at("tree-lstm", hidden);
            let rm = m
                .roles
                .iter()
                .find(|r| r.cell.name == "tree_lstm.internal")
                .unwrap();
            CpuPlan::new(rm, &CellProgram::op_by_op(rm), PlanOptions::default()).chunk_rows()
        };
        // Weights 5 × H × 2H against a record of 20 H floats: 2 × weights /
        // record = H rows.
        assert_eq!(rows(16), 64, "clamped up");
        assert_eq!(rows(128), 128);
        assert_eq!(rows(512), 256, "clamped down");
    }

    #[test]
    fn tree_lstm_internal_op_by_op_is_five_products_and_one_fused_pass() {
        let m = model("tree-lstm");
        let rm = m
            .roles
            .iter()
            .find(|r| r.cell.name == "tree_lstm.internal")
            .unwrap();
        let plan = CpuPlan::new(rm, &CellProgram::op_by_op(rm), PlanOptions::default());
        let gemms = plan
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Gemm(_)))
            .count();
        let reused = plan
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Gemm(g) if g.reuse_a))
            .count();
        assert_eq!(
            reused, 4,
            "the four later gates reuse the first one's packed inputs"
        );
        let rows = plan
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Rows(_)))
            .count();
        assert_eq!((gemms, rows), (5, 1));
        // Each gate's affine is one product over [h_l | h_r]: N = 8, K = 16.
        assert!(plan.gemm_shapes.iter().all(|&s| s == (8, 16)));
        assert_eq!(plan.copy_kernels, 0);
        assert_eq!(plan.flops_per_row, 5 * 2 * 2 * 8 * 8);
        let unfused = CpuPlan::new(
            rm,
            &CellProgram::op_by_op(rm),
            PlanOptions {
                fuse: false,
                ..PlanOptions::default()
            },
        );
        assert_eq!(unfused.steps.len(), 16);
    }
}
