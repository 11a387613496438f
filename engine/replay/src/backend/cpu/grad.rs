//! Reverse mode over a role's cell program: the backward pass as a second
//! program of the same cell, run by the same kernels.
//!
//! The forward program (a layout's, or op by op) is walked in-cell batch by
//! in-cell batch in reverse. Every value's gradient lives in the row's
//! *gradient record*, at the value's forward record offset (so the layout
//! that makes forward operands consecutive makes their gradients consecutive
//! too); forward values are read where the forward pass left them (its
//! record, a producer's slot, the node's slot). Per batch:
//!
//! - a shared-weight product (grouped as in the forward pass) becomes, per
//!   group and term, one GEMM `dx += dY · W` against the stacked weights
//!   packed when the session opens (`dY` the group's output gradients,
//!   K-concatenated), and one *parameter term* per op and weight, `dW +=
//!   dyᵀ x` (and `db += Σ dy`) — run per batch, or all deferred to one GEMM
//!   per parameter at the end of the pass (Cavs §3.5's lazy batching);
//! - every other op becomes a row op applying its vector–Jacobian product
//!   (sigmoid `dx += dy·y(1−y)`, tanh `dx += dy(1−y²)`, mul, sum, concat,
//!   slice, lookup, softmax, pick loss, per-instance products...); row ops
//!   that add into a parameter's gradient (lookup rows, MV-RNN's shared
//!   matrix) run on one thread, the others split over rows.
//!
//! Gradients accumulate (`+=`): a value read by several ops gets each one's
//! contribution. A record does not start from zero, though: the *first
//! writer* of every gradient float (in the program's order) stores instead
//! of adding, and only floats read before anything writes them (a value no
//! op differentiates) are zeroed — see `GradPlan::zero`. Zeroing whole
//! records before every backward batch was 4 % of a tree-lstm training step.

use super::gemm::{Init, MAX_SEGS, PackedB};
use super::plan::{Buf, View, homes};
use crate::cells::{Cell, PrimOp, ValueKind};
use crate::incell::CellProgram;
use crate::model::RoleModel;

/// What a backward row op computes (the op whose gradient it is).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GKind {
    /// `dx += dy · y(1 − y)`.
    Sigmoid,
    /// `dx += dy · (1 − y²)`.
    Tanh,
    /// `dx += dy · [x > 0]`.
    Relu,
    /// `dx += dy · (Φ(x) + x φ(x))`.
    Gelu,
    /// `dx += c · dy` (`scale` by `c`).
    Scale { factor: f32 },
    /// `dx += dy · y`.
    Exp,
    /// `dx −= dy`.
    OneMinus,
    /// `da += dy`, `db += dy`.
    Add,
    /// `da += dy`, `db −= dy`.
    Sub,
    /// `da += dy · b`, `db += dy · a`.
    Mul,
    /// every `dxᵢ += dy` (`Mean`: `dy / n`).
    Sum { mean: bool },
    /// `dxᵢ += dy[segment i]`.
    Concat,
    /// `dx[start ..] += dy`.
    Slice { start: usize },
    /// `dE[row] += dy` (a parameter's gradient).
    Lookup { rows: usize },
    /// `dx += y ⊙ (dy − ⟨dy, y⟩)` per chunk of `width`.
    Softmax { width: usize },
    /// `dx += (dy − mean dy − y · mean(dy ⊙ y)) / √(σ² + ε)` per chunk of
    /// `width` (σ of the chunk of `x`).
    LayerNorm { width: usize },
    /// `dx += dy · (softmax x − onehot label)` per chunk of `width`.
    PickLoss { width: usize },
    /// Per-instance products `y = [b] + Σ Wₜ xₜ` (`Wₜ` `[mm, nn]`, `xₜ`
    /// `[nn, p]`): `dWₜ += dy xₜᵀ`, `dxₜ += Wₜᵀ dy`, `db += dy`.
    Product {
        bias: bool,
        terms: Vec<(usize, usize, usize)>,
    },
}

/// Where an argument's gradient goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GDst {
    /// The gradient record at this offset.
    Grad(usize),
    /// The role's parameter gradient at this offset (the program's parameter
    /// order).
    Param(usize),
}

/// One op's backward on one row.
#[derive(Clone, Debug)]
pub(crate) struct GRowOp {
    pub kind: GKind,
    /// Floats of the op's result.
    pub len: usize,
    /// Gradient offset of the result.
    pub dy: usize,
    /// The forward result.
    pub y: View,
    /// The forward arguments.
    pub vals: Vec<View>,
    /// Where each argument's gradient goes.
    pub dx: Vec<GDst>,
    /// Floats of each argument.
    pub arg_len: Vec<usize>,
    /// Per argument: the op is the first writer of that gradient, so it
    /// stores (`=`) instead of adding (`+=`).
    pub store: Vec<bool>,
}

impl GRowOp {
    /// Does it add into a parameter's gradient (so rows must not race)?
    pub fn serial(&self) -> bool {
        self.dx.iter().any(|d| matches!(d, GDst::Param(_)))
    }
}

/// `dx += dY · W` for a group of a shared-weight product: `dY` the groups'
/// output gradients (segments of the gradient record, K-concatenated), `W`
/// the stacked weights packed as `Wᵀ`.
pub(crate) struct GGemm {
    /// (gradient offset, floats) of each `dY` segment.
    pub a: Vec<(usize, usize)>,
    pub b: PackedB,
    /// Gradient offset of `dx`.
    pub c: usize,
    /// `Overwrite` where the product is `dx`'s first writer.
    pub init: Init,
    /// The step before is a product over the same `dY` segments (the other
    /// input of the same gates): its packed `A` is reused.
    pub reuse_a: bool,
}

/// A parameter gradient of a product: `dW[m × n] += dy ⊗ x` summed over
/// rows (`x` absent: a bias, `db[m] += dy`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ParamTerm {
    pub dy: usize,
    pub m: usize,
    pub x: Option<View>,
    pub n: usize,
    /// Offset of `dW` (or `db`) in the parameter gradient.
    pub dw: usize,
    /// Index of `dy` in [`GradPlan::dy_ranges`] (weights only).
    pub range: usize,
}

/// A step of a backward batch.
pub(crate) enum GStep {
    Gemm(GGemm),
    /// Row ops, rows split over threads.
    Rows(Vec<GRowOp>),
    /// Row ops adding into parameter gradients: one thread.
    Serial(Vec<GRowOp>),
    /// Parameter terms (indices into [`GradPlan::terms`]): now (eager) or at
    /// the end of the pass (lazy).
    Params(Vec<usize>),
}

/// A role's backward program for the CPU.
pub struct GradPlan {
    pub(crate) steps: Vec<GStep>,
    pub(crate) terms: Vec<ParamTerm>,
    /// Floats of a row's gradient record (= the forward record's).
    pub units: usize,
    /// Floats of the role's parameter gradient (= its parameters').
    pub pgrad_len: usize,
    /// Offset of each parameter value in the parameter gradient.
    pub(crate) param_at: Vec<usize>,
    /// Per port, per input: (gradient offset, floats) — added into the
    /// producers' output gradients when the batch is done.
    pub(crate) inputs: Vec<Vec<(usize, usize)>>,
    /// Per cell output: (gradient offset, floats) — where the node's output
    /// gradient is put first.
    pub(crate) outputs: Vec<(usize, usize)>,
    /// Weight-gradient flops per row (parameter terms), input-gradient GEMM
    /// flops per row.
    pub flops_per_row: u64,
    /// Per forward in-cell batch, its backward steps (compiled `per_op`: the
    /// op-level DyNet executor runs one op's backward at a time).
    pub(crate) op_steps: Vec<std::ops::Range<usize>>,
    /// (gradient offset, floats) of every row's record that must be zero
    /// before the steps run: what is read before anything writes it. The
    /// rest of the record is written first by a storing op or by the output
    /// gradients put at entry. `per_op` plans (steps run in another order)
    /// store nothing and zero the whole record.
    pub(crate) zero: Vec<(usize, usize)>,
    /// The distinct output gradients the weight terms read, (gradient
    /// offset, floats): what lazy batching keeps of a record after its batch
    /// (packed for the deferred products), so that the records themselves
    /// are one reused scratch.
    pub(crate) dy_ranges: Vec<(usize, usize)>,
    /// The parameter terms as lazy batching runs them: by input.
    pub(crate) lazy: Vec<LazyGroup>,
}

/// Weight terms that read the same input, run together by lazy batching:
/// each block of rows packs the input once for all of them (Tree-LSTM's
/// five gates read each child state). Biases are not deferred: a sum has
/// nothing to batch.
#[derive(Clone, Debug)]
pub(crate) struct LazyGroup {
    pub x: View,
    /// The terms, in the plan's order.
    pub terms: Vec<usize>,
}

impl GradPlan {
    /// Compiles the backward of `prog` for role `rm`; forward values are read
    /// at the homes the forward plan gave them (`direct_io` as there).
    pub fn new(rm: &RoleModel, prog: &CellProgram, direct_io: bool) -> GradPlan {
        GradPlan::compile(rm, prog, direct_io, false)
    }

    /// [`GradPlan::new`]; `per_op` keeps every forward batch's backward in
    /// steps of its own (see `op_steps`).
    pub(crate) fn compile(
        rm: &RoleModel,
        prog: &CellProgram,
        direct_io: bool,
        per_op: bool,
    ) -> GradPlan {
        let cell = &rm.cell;
        let home = homes(cell, prog, direct_io);
        let mut c = Gc {
            cell,
            rm,
            prog,
            home: &home,
            steps: Vec::new(),
            rows: Vec::new(),
            terms: Vec::new(),
            flops: 0,
        };
        let mut op_steps = vec![0..0; prog.batches.len()];
        for b in (0..prog.batches.len()).rev() {
            let before = c.steps.len();
            c.batch(b);
            if per_op {
                c.flush();
            }
            op_steps[b] = before..c.steps.len();
        }
        c.flush();
        let numel = |v: usize| cell.values[v].numel();
        let mut plan = GradPlan {
            steps: c.steps,
            terms: c.terms,
            units: prog.units,
            pgrad_len: prog.params.len(),
            param_at: prog.param_at.clone(),
            inputs: cell
                .ports
                .iter()
                .map(|p| {
                    p.inputs
                        .iter()
                        .map(|i| (prog.unit[i.index()], numel(i.index())))
                        .collect()
                })
                .collect(),
            outputs: cell
                .outputs
                .iter()
                .map(|o| (prog.unit[o.index()], numel(o.index())))
                .collect(),
            flops_per_row: c.flops,
            op_steps,
            zero: vec![(0, prog.units)],
            dy_ranges: Vec::new(),
            lazy: Vec::new(),
        };
        plan.dy_ranges = dy_ranges(&mut plan.terms);
        plan.lazy = lazy_groups(&plan.terms);
        if !per_op {
            plan.zero = first_writers(
                &mut plan.steps,
                &plan.outputs,
                &plan.terms,
                &plan.inputs,
                prog.units,
            );
        }
        plan
    }
}

/// The distinct `dy` ranges of the weight terms, in the terms' order of
/// first appearance; sets their `range`.
fn dy_ranges(terms: &mut [ParamTerm]) -> Vec<(usize, usize)> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for t in terms.iter_mut().filter(|t| t.x.is_some()) {
        t.range = match ranges.iter().position(|&r| r == (t.dy, t.m)) {
            Some(i) => i,
            None => {
                ranges.push((t.dy, t.m));
                ranges.len() - 1
            }
        };
    }
    ranges
}

/// The weight terms by input, in order of first appearance.
fn lazy_groups(terms: &[ParamTerm]) -> Vec<LazyGroup> {
    let mut groups: Vec<LazyGroup> = Vec::new();
    for (i, t) in terms.iter().enumerate() {
        let Some(x) = t.x else { continue };
        match groups.iter_mut().find(|g| g.x == x) {
            Some(g) => g.terms.push(i),
            None => groups.push(LazyGroup { x, terms: vec![i] }),
        }
    }
    groups
}

/// The first-writer pass: walks the steps in order with a per-float
/// "written" mark (the output gradients are written at entry); an op whose
/// destination range is wholly unwritten stores, one that finds it partly
/// written adds and has the rest zeroed first, and every float read while
/// still unwritten is zeroed too. Returns the zeroed ranges, merged.
fn first_writers(
    steps: &mut [GStep],
    outputs: &[(usize, usize)],
    terms: &[ParamTerm],
    inputs: &[Vec<(usize, usize)>],
    units: usize,
) -> Vec<(usize, usize)> {
    let mut written = vec![false; units];
    let mut zero = vec![false; units];
    let read = |written: &mut [bool], zero: &mut [bool], at: usize, n: usize| {
        for i in at..at + n {
            if !written[i] {
                written[i] = true;
                zero[i] = true;
            }
        }
    };
    // Returns whether the write may store.
    let write = |written: &mut [bool], zero: &mut [bool], at: usize, n: usize| -> bool {
        let range = &mut written[at..at + n];
        if range.iter().all(|w| !w) {
            range.fill(true);
            return true;
        }
        // Adds: whatever is unwritten starts at zero.
        read(written, zero, at, n);
        false
    };
    for &(at, n) in outputs {
        written[at..at + n].fill(true);
    }
    for step in steps.iter_mut() {
        match step {
            GStep::Gemm(g) => {
                for &(at, n) in &g.a {
                    read(&mut written, &mut zero, at, n);
                }
                g.init = if write(&mut written, &mut zero, g.c, g.b.n()) {
                    Init::Overwrite
                } else {
                    Init::Accumulate
                };
            }
            GStep::Rows(ops) | GStep::Serial(ops) => {
                for op in ops {
                    read(&mut written, &mut zero, op.dy, op.len);
                    // Per-instance products add through a strided kernel and
                    // a lookup adds one row: neither stores.
                    let may_store =
                        !matches!(op.kind, GKind::Product { .. } | GKind::Lookup { .. });
                    for i in 0..op.dx.len() {
                        let GDst::Grad(at) = op.dx[i] else { continue };
                        let (at, n) = match op.kind {
                            GKind::Slice { start } => (at + start, op.len),
                            _ => (at, op.arg_len[i]),
                        };
                        if may_store {
                            op.store[i] = write(&mut written, &mut zero, at, n);
                        } else {
                            // Adds: whatever is unwritten starts at zero.
                            read(&mut written, &mut zero, at, n);
                        }
                    }
                }
            }
            GStep::Params(ts) => {
                for &t in ts.iter() {
                    read(&mut written, &mut zero, terms[t].dy, terms[t].m);
                }
            }
        }
    }
    for port in inputs {
        for &(at, n) in port {
            read(&mut written, &mut zero, at, n);
        }
    }
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (i, &z) in zero.iter().enumerate() {
        if !z {
            continue;
        }
        match ranges.last_mut() {
            Some((at, n)) if *at + *n == i => *n += 1,
            _ => ranges.push((i, 1)),
        }
    }
    ranges
}

struct Gc<'a> {
    cell: &'a Cell,
    rm: &'a RoleModel,
    prog: &'a CellProgram,
    home: &'a [View],
    steps: Vec<GStep>,
    rows: Vec<GRowOp>,
    terms: Vec<ParamTerm>,
    flops: u64,
}

impl Gc<'_> {
    fn is_param(&self, v: usize) -> bool {
        self.cell.values[v].kind == ValueKind::Param
    }

    fn numel(&self, v: usize) -> usize {
        self.cell.values[v].numel()
    }

    /// The forward value `v` where the forward pass left it.
    fn val(&self, v: usize) -> View {
        if self.is_param(v) {
            View::at(Buf::Par, self.prog.param_at[v])
        } else {
            self.home[v]
        }
    }

    /// Where `v`'s gradient goes.
    fn dst(&self, v: usize) -> GDst {
        if self.is_param(v) {
            GDst::Param(self.prog.param_at[v])
        } else {
            GDst::Grad(self.prog.unit[v])
        }
    }

    fn flush(&mut self) {
        // Consecutive row ops: the parallel ones together, serial ones apart,
        // in their order.
        let mut par = Vec::new();
        for op in std::mem::take(&mut self.rows) {
            if op.serial() {
                if !par.is_empty() {
                    self.steps.push(GStep::Rows(std::mem::take(&mut par)));
                }
                self.steps.push(GStep::Serial(vec![op]));
            } else {
                par.push(op);
            }
        }
        if !par.is_empty() {
            self.steps.push(GStep::Rows(par));
        }
    }

    /// The (weight, input) argument pairs of a product op, and whether it is a
    /// shared-weight product (weights parameters, inputs vectors).
    fn pairs(&self, o: usize) -> (Vec<(usize, usize)>, bool) {
        let op = &self.cell.ops[o];
        let pairs: Vec<(usize, usize)> = match op.kind {
            PrimOp::Affine => (1..op.args.len()).step_by(2).map(|i| (i, i + 1)).collect(),
            _ => vec![(0, 1)],
        };
        let shared = pairs.iter().all(|&(wi, xi)| {
            let (w, x) = (op.args[wi].index(), op.args[xi].index());
            let nn = self.cell.values[w].shape.get(1).copied().unwrap_or(1);
            self.is_param(w) && !self.is_param(x) && self.numel(x) == nn
        });
        (pairs, shared)
    }

    fn batch(&mut self, b: usize) {
        let batch = &self.prog.batches[b];
        let ops = batch.ops.clone();
        let kind = self.cell.ops[ops[0]].kind;
        if matches!(kind, PrimOp::Affine | PrimOp::Matmul) && self.pairs(ops[0]).1 {
            self.shared_product(&ops);
            return;
        }
        for &o in &ops {
            let op = self.row_op(o);
            self.rows.push(op);
        }
    }

    /// One op's backward as a row op.
    fn row_op(&mut self, o: usize) -> GRowOp {
        let op = &self.cell.ops[o];
        let out = op.out.index();
        let len = self.numel(out);
        let arg_len: Vec<usize> = op.args.iter().map(|a| self.numel(a.index())).collect();
        let first_dim = |i: usize| self.cell.values[op.args[i].index()].shape[0].max(1);
        let kind = match op.kind {
            PrimOp::Sigmoid => GKind::Sigmoid,
            PrimOp::Tanh => GKind::Tanh,
            PrimOp::Relu => GKind::Relu,
            PrimOp::Gelu => GKind::Gelu,
            PrimOp::Scale => GKind::Scale {
                factor: op.factor.unwrap_or(1.0),
            },
            PrimOp::Exp => GKind::Exp,
            PrimOp::OneMinus => GKind::OneMinus,
            PrimOp::Add => GKind::Add,
            PrimOp::Sub => GKind::Sub,
            PrimOp::Mul => GKind::Mul,
            PrimOp::Sum => GKind::Sum { mean: false },
            PrimOp::Mean => GKind::Sum { mean: true },
            PrimOp::Concat => GKind::Concat,
            PrimOp::Slice => {
                let v = &self.cell.values[op.args[0].index()];
                let inner: usize = v.shape[1..].iter().product();
                GKind::Slice {
                    start: op.slice.map_or(0, |(s, _)| s * inner),
                }
            }
            PrimOp::Lookup => GKind::Lookup { rows: first_dim(0) },
            PrimOp::Softmax => GKind::Softmax {
                width: first_dim(0),
            },
            PrimOp::LayerNorm => GKind::LayerNorm {
                width: first_dim(0),
            },
            PrimOp::PickLoss => GKind::PickLoss {
                width: first_dim(0),
            },
            PrimOp::Affine | PrimOp::Matmul => {
                let (pairs, _) = self.pairs(o);
                let terms: Vec<(usize, usize, usize)> = pairs
                    .iter()
                    .map(|&(wi, xi)| {
                        let ws = &self.cell.values[op.args[wi].index()].shape;
                        let (mm, nn) = (ws[0], ws.get(1).copied().unwrap_or(1));
                        (mm, nn, self.numel(op.args[xi].index()) / nn.max(1))
                    })
                    .collect();
                for &(mm, nn, p) in &terms {
                    // dW and dx: two products per forward one.
                    self.flops += (4 * mm * nn * p) as u64;
                }
                GKind::Product {
                    bias: op.kind == PrimOp::Affine,
                    terms,
                }
            }
        };
        GRowOp {
            kind,
            len,
            dy: self.prog.unit[out],
            y: self.val(out),
            vals: op.args.iter().map(|a| self.val(a.index())).collect(),
            dx: op.args.iter().map(|a| self.dst(a.index())).collect(),
            store: vec![false; arg_len.len()],
            arg_len,
        }
    }

    /// A shared-weight product batch: per group of ops reading the same
    /// inputs (the forward grouping) and per term, `dx += dY · W`; per op and
    /// weight, a parameter term.
    fn shared_product(&mut self, ops: &[usize]) {
        self.flush();
        let first = &self.cell.ops[ops[0]];
        let affine = first.kind == PrimOp::Affine;
        let (pairs, _) = self.pairs(ops[0]);
        let out = self.numel(first.out.index());
        let inputs_of = |o: usize| -> Vec<usize> {
            pairs
                .iter()
                .map(|&(_, xi)| self.cell.ops[o].args[xi].index())
                .collect()
        };
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for &o in ops {
            match groups.last_mut() {
                Some(g) if inputs_of(g[0]) == inputs_of(o) => g.push(o),
                _ => groups.push(vec![o]),
            }
        }
        let mut params = Vec::new();
        for g in &groups {
            for &(wi, xi) in &pairs {
                let x = self.cell.ops[g[0]].args[xi].index();
                let n = self.numel(x);
                // dY segments of the group, consecutive ones merged, in
                // chunks of at most MAX_SEGS (each chunk its own product,
                // accumulating).
                let mut segs: Vec<(usize, usize, Vec<usize>)> = Vec::new();
                for &o in g {
                    let at = self.prog.unit[self.cell.ops[o].out.index()];
                    match segs.last_mut() {
                        Some((s, l, os)) if *s + *l == at => {
                            *l += out;
                            os.push(o);
                        }
                        _ => segs.push((at, out, vec![o])),
                    }
                }
                for chunk in segs.chunks(MAX_SEGS) {
                    let chunk_ops: Vec<usize> = chunk.iter().flat_map(|s| s.2.clone()).collect();
                    let rm = self.rm;
                    let cell = self.cell;
                    // Wᵀ stacked: element (column c of dx, row p of dY) =
                    // W_{op}[p mod out][c].
                    let w = |c: usize, p: usize| -> f32 {
                        let o = chunk_ops[p / out];
                        rm.params[cell.ops[o].args[wi].index()][(p % out) * n + c]
                    };
                    let k = chunk_ops.len() * out;
                    let a: Vec<(usize, usize)> = chunk.iter().map(|s| (s.0, s.1)).collect();
                    let reuse_a = matches!(self.steps.last(), Some(GStep::Gemm(p)) if p.a == a);
                    self.steps.push(GStep::Gemm(GGemm {
                        a,
                        b: PackedB::new(n, k, w, None),
                        c: self.prog.unit[x],
                        init: Init::Accumulate,
                        reuse_a,
                    }));
                }
                self.flops += (2 * g.len() * out * n) as u64;
            }
        }
        for &o in ops {
            let op = &self.cell.ops[o];
            let dy = self.prog.unit[op.out.index()];
            if affine {
                params.push(self.terms.len());
                self.terms.push(ParamTerm {
                    dy,
                    m: out,
                    x: None,
                    n: 0,
                    dw: self.prog.param_at[op.args[0].index()],
                    range: 0,
                });
            }
            for &(wi, xi) in &pairs {
                let x = op.args[xi].index();
                let n = self.numel(x);
                params.push(self.terms.len());
                self.terms.push(ParamTerm {
                    dy,
                    m: out,
                    x: Some(self.val(x)),
                    n,
                    dw: self.prog.param_at[op.args[wi].index()],
                    range: 0,
                });
                self.flops += (2 * out * n) as u64;
            }
        }
        self.steps.push(GStep::Params(params));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::CellLibrary;
    use crate::model::Model;
    use crate::trace::Level;
    use crate::workloads::{self, DataChoice, RecordOptions};

    #[test]
    fn tree_lstm_internal_backward_is_products_terms_and_row_vjps() {
        let cells = CellLibrary::builtin().unwrap();
        let trace = workloads::record(
            &RecordOptions {
                workload: workloads::workload("tree-lstm").unwrap(),
                data: DataChoice::Default,
                batch: 2,
                hidden: 8,
                level: Level::Cell,
                seed: 1,
            },
            &cells,
        )
        .unwrap();
        let m = Model::new(&trace, &cells, 3).unwrap();
        let rm = m
            .roles
            .iter()
            .find(|r| r.cell.name == "tree_lstm.internal")
            .unwrap();
        let g = GradPlan::new(rm, &CellProgram::op_by_op(rm), true);
        let gemms = g
            .steps
            .iter()
            .filter(|s| matches!(s, GStep::Gemm(_)))
            .count();
        // Five gate affines, two inputs each: ten dx products, fifteen
        // parameter terms (five biases, ten weights).
        assert_eq!(gemms, 10);
        assert_eq!(g.terms.len(), 15);
        assert!(g.steps.iter().any(|s| matches!(s, GStep::Rows(_))));
        assert!(!g.steps.iter().any(|s| matches!(s, GStep::Serial(_))));
    }
}
