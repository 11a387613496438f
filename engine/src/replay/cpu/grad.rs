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
//! contribution, and the records start from zero.

use super::gemm::{MAX_SEGS, PackedB};
use super::plan::{Buf, View, homes};
use crate::cells::{Cell, PrimOp, ValueKind};
use crate::replay::incell::CellProgram;
use crate::replay::model::RoleModel;

/// What a backward row op computes (the op whose gradient it is).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum GKind {
    /// `dx += dy · y(1 − y)`.
    Sigmoid,
    /// `dx += dy · (1 − y²)`.
    Tanh,
    /// `dx += dy · [x > 0]`.
    Relu,
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
        GradPlan {
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
        }
    }
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
                    self.steps.push(GStep::Gemm(GGemm {
                        a: chunk.iter().map(|s| (s.0, s.1)).collect(),
                        b: PackedB::new(n, k, w, None),
                        c: self.prog.unit[x],
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
    use crate::replay::model::Model;
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
