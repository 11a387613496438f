//! Lowering a role's cell into instruction templates, forward and backward,
//! once per model: operands are offsets inside a node's record (forward
//! values, or their gradients in the mirrored gradient record) or absolute
//! pool addresses (parameters and parameter gradients in DRAM). The script
//! compiler instantiates the templates per batch.
//!
//! A node's record holds every non-parameter value of its cell (inputs and
//! op results) in the cell's value order — [`CellProgram::op_by_op`]'s
//! layout — so the cell's outputs are read by the consumers' gathers from
//! the producer's record directly.

use super::placement::Plan;
use crate::cells::{PrimOp, ValueKind};
use crate::incell::CellProgram;
use crate::model::Model;

/// An operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opd {
    /// Value `value` at `off` in each row's forward record.
    Fwd { off: u32, value: u32 },
    /// The gradient of value `value`, at `off` in each row's gradient record.
    Grad { off: u32, value: u32 },
    /// An absolute pool address (the same for every row): a parameter, or a
    /// parameter's gradient. `region` names it for hazard tracking
    /// (`2·param + is_gradient`).
    Abs { addr: u32, region: u32 },
}

impl Opd {
    /// The operand `extra` floats further.
    pub(crate) fn at(self, extra: usize) -> Opd {
        let e = extra as u32;
        match self {
            Opd::Fwd { off, value } => Opd::Fwd {
                off: off + e,
                value,
            },
            Opd::Grad { off, value } => Opd::Grad {
                off: off + e,
                value,
            },
            Opd::Abs { addr, region } => Opd::Abs {
                addr: addr + e,
                region,
            },
        }
    }
}

/// Elementwise maps (`MAP1`'s function).
pub(crate) mod map1 {
    pub const COPY: u8 = 0;
    pub const SIGMOID: u8 = 1;
    pub const TANH: u8 = 2;
    pub const RELU: u8 = 3;
    pub const ONE_MINUS: u8 = 4;
    pub const GELU: u8 = 5;
    pub const EXP: u8 = 6;
}

/// Binary maps (`MAP2`'s function).
pub(crate) mod map2 {
    pub const ADD: u8 = 0;
    pub const SUB: u8 = 1;
    pub const MUL: u8 = 2;
}

/// Vector–Jacobian maps (`DMAP`'s kind): `dx += scale · dy · f(aux)`.
pub(crate) mod dmap {
    /// `dx += scale · dy`.
    pub const AXPY: u8 = 0;
    /// `dx += scale · dy · aux`.
    pub const FMA: u8 = 1;
    /// `dx += dy · y (1 − y)`, aux = y (sigmoid).
    pub const SIGMOID: u8 = 2;
    /// `dx += dy (1 − y²)`, aux = y (tanh).
    pub const TANH: u8 = 3;
    /// `dx += dy · [x > 0]`, aux = x (relu).
    pub const RELU: u8 = 4;
    /// `dx += dy · (Φ(x) + x φ(x))`, aux = x (gelu).
    pub const GELU: u8 = 5;
}

/// One instruction template (per batch it becomes one instruction per
/// executing processor, with its rows).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Template {
    Map1 {
        f: u8,
        len: u32,
        dst: Opd,
        a: Opd,
    },
    Map2 {
        f: u8,
        len: u32,
        dst: Opd,
        a: Opd,
        b: Opd,
    },
    SumN {
        len: u32,
        dst: Opd,
        scale: f32,
        args: Vec<Opd>,
    },
    Lookup {
        len: u32,
        dst: Opd,
        table: Opd,
        rows: u32,
    },
    Softmax {
        len: u32,
        dst: Opd,
        a: Opd,
    },
    PickLoss {
        width: u32,
        dst: Opd,
        a: Opd,
    },
    /// A resident product by the rows' owners: `dst = bias + Σ W_j x_j`
    /// (the bias kept with the rows), or `dst += Σ W_j x_j` (`acc`: a bias
    /// that is not, copied into `dst` first), or `dst = Σ W_j x_j`.
    RProd {
        mat: u32,
        acc: bool,
        dst: Opd,
        xs: Vec<Opd>,
    },
    /// A product against DRAM operands, per row: `C[m×p] (+)= op(A)·op(B)`.
    GProd {
        m: u32,
        n: u32,
        p: u32,
        ta: bool,
        tb: bool,
        acc: bool,
        c: Opd,
        a: Opd,
        b: Opd,
    },
    DMap {
        kind: u8,
        len: u32,
        dx: Opd,
        dy: Opd,
        aux: Opd,
        scale: f32,
    },
    /// A resident product's backward: weight and bias gradients by the
    /// rows' owners; `Σ_rows W_jᵀ dy` into partial sums reduced into `dxs`.
    RProdB {
        mat: u32,
        dy: Opd,
        xs: Vec<Opd>,
        dxs: Vec<Opd>,
    },
    DLookup {
        len: u32,
        dy: Opd,
        dtable: Opd,
        rows: u32,
    },
    DSoftmax {
        len: u32,
        dx: Opd,
        dy: Opd,
        y: Opd,
    },
    DPickLoss {
        width: u32,
        dx: Opd,
        dy: Opd,
        x: Opd,
    },
}

/// Who executes a template's instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    /// The batch's rows, split over processors.
    Rows,
    /// Every owner of the matrix's rows, over all rows of the batch.
    Resident(u32),
    /// One processor over all rows (the template accumulates into a DRAM
    /// parameter gradient, which no two processors may race on).
    Owner(u32),
}

impl Template {
    /// Who runs it.
    pub(crate) fn split(&self) -> Split {
        match self {
            Template::RProd { mat, .. } | Template::RProdB { mat, .. } => Split::Resident(*mat),
            _ => match self.writes().first() {
                Some(Opd::Abs { region, .. }) => Split::Owner(region / 2),
                _ => Split::Rows,
            },
        }
    }

    /// Operands it reads.
    pub(crate) fn reads(&self) -> Vec<Opd> {
        match self {
            Template::Map1 { a, .. }
            | Template::Softmax { a, .. }
            | Template::PickLoss { a, .. } => vec![*a],
            Template::Map2 { a, b, .. } => vec![*a, *b],
            Template::SumN { args, .. } => args.clone(),
            Template::Lookup { table, .. } => vec![*table],
            Template::RProd { xs, .. } => xs.clone(),
            Template::GProd { a, b, c, acc, .. } => {
                let mut r = vec![*a, *b];
                if *acc {
                    r.push(*c);
                }
                r
            }
            Template::DMap { dy, aux, dx, .. } => vec![*dy, *aux, *dx],
            Template::RProdB { dy, xs, .. } => {
                let mut r = vec![*dy];
                r.extend(xs);
                r
            }
            Template::DLookup { dy, dtable, .. } => vec![*dy, *dtable],
            Template::DSoftmax { dx, dy, y, .. } => vec![*dx, *dy, *y],
            Template::DPickLoss { dx, dy, x, .. } => vec![*dx, *dy, *x],
        }
    }

    /// Operands it writes (for `RProdB`, the reductions' destinations).
    pub(crate) fn writes(&self) -> Vec<Opd> {
        match self {
            Template::Map1 { dst, .. }
            | Template::Map2 { dst, .. }
            | Template::SumN { dst, .. }
            | Template::Lookup { dst, .. }
            | Template::Softmax { dst, .. }
            | Template::PickLoss { dst, .. }
            | Template::RProd { dst, .. } => vec![*dst],
            Template::GProd { c, .. } => vec![*c],
            Template::DMap { dx, .. }
            | Template::DSoftmax { dx, .. }
            | Template::DPickLoss { dx, .. } => vec![*dx],
            Template::RProdB { dxs, .. } => dxs.clone(),
            Template::DLookup { dtable, .. } => vec![*dtable],
        }
    }

    /// Floats of row work (for load balancing).
    pub(crate) fn work(&self) -> usize {
        match self {
            Template::Map1 { len, .. }
            | Template::Map2 { len, .. }
            | Template::Lookup { len, .. }
            | Template::Softmax { len, .. }
            | Template::DMap { len, .. }
            | Template::DLookup { len, .. }
            | Template::DSoftmax { len, .. } => *len as usize,
            Template::SumN { len, args, .. } => *len as usize * args.len(),
            Template::PickLoss { width, .. } | Template::DPickLoss { width, .. } => *width as usize,
            Template::GProd { m, n, p, .. } => (*m * *n * *p) as usize,
            Template::RProd { .. } | Template::RProdB { .. } => 0,
        }
    }
}

/// Where every parameter (and its gradient) is in the pool: parameters
/// first, in role then cell-value order, then their gradients in the same
/// layout.
pub(crate) struct ParamLayout {
    /// Per role, per cell value: pool address (`u32::MAX` for non-parameters).
    pub at: Vec<Vec<u32>>,
    /// Per role, per cell value: global parameter index.
    pub index: Vec<Vec<u32>>,
    /// Floats of all parameters (the gradients follow at this shift).
    pub total: usize,
}

impl ParamLayout {
    pub(crate) fn new(model: &Model) -> ParamLayout {
        let (mut at, mut index) = (Vec::new(), Vec::new());
        let (mut total, mut n) = (0usize, 0u32);
        for rm in &model.roles {
            let mut a = vec![u32::MAX; rm.cell.values.len()];
            let mut ix = vec![u32::MAX; rm.cell.values.len()];
            for (v, p) in rm.params.iter().enumerate() {
                if rm.cell.values[v].kind == ValueKind::Param {
                    a[v] = total as u32;
                    ix[v] = n;
                    n += 1;
                    total += p.len();
                }
            }
            at.push(a);
            index.push(ix);
        }
        ParamLayout { at, index, total }
    }
}

/// A role lowered.
pub(crate) struct RoleCode {
    /// Floats of a node's record.
    pub units: usize,
    /// Per port, per input: `(record offset, floats, value id)`.
    pub inputs: Vec<Vec<(u32, u32, u32)>>,
    /// Per cell output: `(record offset, floats, value id)`.
    pub outputs: Vec<(u32, u32, u32)>,
    /// Forward templates, in cell op order.
    pub fwd: Vec<Template>,
    /// Backward templates, ops in reverse.
    pub bwd: Vec<Template>,
    /// Whether nodes of the role read their lookup row / label.
    pub needs_ids: bool,
    /// Whether they read their label.
    pub needs_labels: bool,
}

/// Lowers every role of `model` against `plan` and the parameter layout.
pub(crate) fn lower(model: &Model, plan: &Plan, params: &ParamLayout) -> Vec<RoleCode> {
    model
        .roles
        .iter()
        .enumerate()
        .map(|(ri, rm)| {
            let cell = &rm.cell;
            let prog = CellProgram::op_by_op(rm);
            let val = |v: usize| -> Opd {
                if cell.values[v].kind == ValueKind::Param {
                    Opd::Abs {
                        addr: params.at[ri][v],
                        region: 2 * params.index[ri][v],
                    }
                } else {
                    Opd::Fwd {
                        off: prog.unit[v] as u32,
                        value: v as u32,
                    }
                }
            };
            let grad = |v: usize| -> Opd {
                if cell.values[v].kind == ValueKind::Param {
                    Opd::Abs {
                        addr: params.at[ri][v] + params.total as u32,
                        region: 2 * params.index[ri][v] + 1,
                    }
                } else {
                    Opd::Grad {
                        off: prog.unit[v] as u32,
                        value: v as u32,
                    }
                }
            };
            let numel = |v: usize| cell.values[v].numel() as u32;
            let mut fwd = Vec::new();
            let mut bwd_per_op: Vec<Vec<Template>> = Vec::new();
            let (mut needs_ids, mut needs_labels) = (false, false);
            for (oi, op) in cell.ops.iter().enumerate() {
                let a: Vec<usize> = op.args.iter().map(|x| x.index()).collect();
                let out = op.out.index();
                let (y, dy, len) = (val(out), grad(out), numel(out));
                let mut b = Vec::new();
                let axpy = |dx: Opd, dy: Opd, len: u32, scale: f32| Template::DMap {
                    kind: dmap::AXPY,
                    len,
                    dx,
                    dy,
                    aux: dy,
                    scale,
                };
                match op.kind {
                    // Refused before lowering (`Vpps::new`: outside the instruction set).
                    PrimOp::LayerNorm => unreachable!("vpps::check_ops refuses layer_norm"),
                    PrimOp::Matmul | PrimOp::Affine if plan.mat_of(ri, oi).is_some() => {
                        let mi = plan.mat_of(ri, oi).expect("checked") as u32;
                        let mat = &plan.mats[mi as usize].mat;
                        let xs: Vec<Opd> = match op.kind {
                            PrimOp::Matmul => vec![val(a[1])],
                            _ => a[1..].chunks(2).map(|wx| val(wx[1])).collect(),
                        };
                        let dxs: Vec<Opd> = match op.kind {
                            PrimOp::Matmul => vec![grad(a[1])],
                            _ => a[1..].chunks(2).map(|wx| grad(wx[1])).collect(),
                        };
                        let bias = (op.kind == PrimOp::Affine && mat.bias.is_none()).then(|| a[0]);
                        let mut f = Vec::new();
                        if let Some(bv) = bias {
                            // A bias that is not kept with the rows: copied
                            // first, the product adds onto it.
                            f.push(Template::Map1 {
                                f: map1::COPY,
                                len,
                                dst: y,
                                a: val(bv),
                            });
                            b.push(axpy(grad(bv), dy, len, 1.0));
                        }
                        f.push(Template::RProd {
                            mat: mi,
                            acc: bias.is_some(),
                            dst: y,
                            xs: xs.clone(),
                        });
                        fwd.extend(f);
                        b.insert(
                            0,
                            Template::RProdB {
                                mat: mi,
                                dy,
                                xs,
                                dxs,
                            },
                        );
                    }
                    PrimOp::Matmul => {
                        let (sa, sb) = (&cell.values[a[0]].shape, &cell.values[a[1]].shape);
                        let (m, n) = (sa[0] as u32, sa[1] as u32);
                        let p = sb.get(1).copied().unwrap_or(1) as u32;
                        gprod(
                            &mut fwd,
                            &mut b,
                            m,
                            n,
                            p,
                            false,
                            y,
                            dy,
                            val(a[0]),
                            grad(a[0]),
                            val(a[1]),
                            grad(a[1]),
                        );
                    }
                    PrimOp::Affine => {
                        fwd.push(Template::Map1 {
                            f: map1::COPY,
                            len,
                            dst: y,
                            a: val(a[0]),
                        });
                        b.push(axpy(grad(a[0]), dy, len, 1.0));
                        for wx in a[1..].chunks(2) {
                            let k = cell.values[wx[0]].shape[1] as u32;
                            gprod(
                                &mut fwd,
                                &mut b,
                                len,
                                k,
                                1,
                                true,
                                y,
                                dy,
                                val(wx[0]),
                                grad(wx[0]),
                                val(wx[1]),
                                grad(wx[1]),
                            );
                        }
                    }
                    PrimOp::Add | PrimOp::Sub | PrimOp::Mul => {
                        let f = match op.kind {
                            PrimOp::Add => map2::ADD,
                            PrimOp::Sub => map2::SUB,
                            _ => map2::MUL,
                        };
                        fwd.push(Template::Map2 {
                            f,
                            len,
                            dst: y,
                            a: val(a[0]),
                            b: val(a[1]),
                        });
                        if op.kind == PrimOp::Mul {
                            for i in 0..2 {
                                b.push(Template::DMap {
                                    kind: dmap::FMA,
                                    len,
                                    dx: grad(a[i]),
                                    dy,
                                    aux: val(a[1 - i]),
                                    scale: 1.0,
                                });
                            }
                        } else {
                            b.push(axpy(grad(a[0]), dy, len, 1.0));
                            let s = if op.kind == PrimOp::Sub { -1.0 } else { 1.0 };
                            b.push(axpy(grad(a[1]), dy, len, s));
                        }
                    }
                    PrimOp::Sum | PrimOp::Mean => {
                        let scale = if op.kind == PrimOp::Mean {
                            1.0 / a.len() as f32
                        } else {
                            1.0
                        };
                        if a.len() == 1 {
                            fwd.push(Template::Map1 {
                                f: map1::COPY,
                                len,
                                dst: y,
                                a: val(a[0]),
                            });
                        } else {
                            fwd.push(Template::SumN {
                                len,
                                dst: y,
                                scale,
                                args: a.iter().map(|&v| val(v)).collect(),
                            });
                        }
                        for &v in &a {
                            b.push(axpy(grad(v), dy, len, scale));
                        }
                    }
                    PrimOp::Scale => {
                        // `SUMN` of one argument is `factor · x`; its
                        // gradient the `DMAP` axpy `dx += factor · dy`.
                        let c = op.factor.unwrap_or(1.0);
                        fwd.push(Template::SumN {
                            len,
                            dst: y,
                            scale: c,
                            args: vec![val(a[0])],
                        });
                        b.push(axpy(grad(a[0]), dy, len, c));
                    }
                    PrimOp::Sigmoid
                    | PrimOp::Tanh
                    | PrimOp::Relu
                    | PrimOp::Gelu
                    | PrimOp::Exp
                    | PrimOp::OneMinus => {
                        let (f, kind, aux) = match op.kind {
                            PrimOp::Sigmoid => (map1::SIGMOID, dmap::SIGMOID, y),
                            PrimOp::Tanh => (map1::TANH, dmap::TANH, y),
                            PrimOp::Relu => (map1::RELU, dmap::RELU, val(a[0])),
                            PrimOp::Gelu => (map1::GELU, dmap::GELU, val(a[0])),
                            // dx += dy · y: the product map with aux = y.
                            PrimOp::Exp => (map1::EXP, dmap::FMA, y),
                            _ => (map1::ONE_MINUS, dmap::AXPY, dy),
                        };
                        fwd.push(Template::Map1 {
                            f,
                            len,
                            dst: y,
                            a: val(a[0]),
                        });
                        let scale = if op.kind == PrimOp::OneMinus {
                            -1.0
                        } else {
                            1.0
                        };
                        b.push(Template::DMap {
                            kind,
                            len,
                            dx: grad(a[0]),
                            dy,
                            aux,
                            scale,
                        });
                    }
                    PrimOp::Concat => {
                        let mut at = 0usize;
                        for &v in &a {
                            let n = numel(v);
                            fwd.push(Template::Map1 {
                                f: map1::COPY,
                                len: n,
                                dst: y.at(at),
                                a: val(v),
                            });
                            b.push(axpy(grad(v), dy.at(at), n, 1.0));
                            at += n as usize;
                        }
                    }
                    PrimOp::Slice => {
                        let (start, _) = op.slice.expect("a slice has its range");
                        let inner: usize = cell.values[a[0]].shape[1..].iter().product();
                        let from = start * inner;
                        fwd.push(Template::Map1 {
                            f: map1::COPY,
                            len,
                            dst: y,
                            a: val(a[0]).at(from),
                        });
                        b.push(axpy(grad(a[0]).at(from), dy, len, 1.0));
                    }
                    PrimOp::Lookup => {
                        needs_ids = true;
                        let rows = cell.values[a[0]].shape[0] as u32;
                        fwd.push(Template::Lookup {
                            len,
                            dst: y,
                            table: val(a[0]),
                            rows,
                        });
                        b.push(Template::DLookup {
                            len,
                            dy,
                            dtable: grad(a[0]),
                            rows,
                        });
                    }
                    PrimOp::Softmax => {
                        fwd.push(Template::Softmax {
                            len,
                            dst: y,
                            a: val(a[0]),
                        });
                        b.push(Template::DSoftmax {
                            len,
                            dx: grad(a[0]),
                            dy,
                            y,
                        });
                    }
                    PrimOp::PickLoss => {
                        needs_labels = true;
                        let width = numel(a[0]);
                        fwd.push(Template::PickLoss {
                            width,
                            dst: y,
                            a: val(a[0]),
                        });
                        b.push(Template::DPickLoss {
                            width,
                            dx: grad(a[0]),
                            dy,
                            x: val(a[0]),
                        });
                    }
                }
                bwd_per_op.push(b);
            }
            let rec = |v: usize| (prog.unit[v] as u32, numel(v), v as u32);
            RoleCode {
                units: prog.units,
                inputs: cell
                    .ports
                    .iter()
                    .map(|p| p.inputs.iter().map(|i| rec(i.index())).collect())
                    .collect(),
                outputs: cell.outputs.iter().map(|o| rec(o.index())).collect(),
                fwd,
                bwd: bwd_per_op.into_iter().rev().flatten().collect(),
                needs_ids,
                needs_labels,
            }
        })
        .collect()
}

/// `C[m×p] (+)= A[m×n]·B[n×p]` and its backward: `dA += dC·Bᵀ`, `dB += Aᵀ·dC`.
#[allow(clippy::too_many_arguments)]
fn gprod(
    fwd: &mut Vec<Template>,
    bwd: &mut Vec<Template>,
    m: u32,
    n: u32,
    p: u32,
    acc: bool,
    c: Opd,
    dc: Opd,
    a: Opd,
    da: Opd,
    b: Opd,
    db: Opd,
) {
    fwd.push(Template::GProd {
        m,
        n,
        p,
        ta: false,
        tb: false,
        acc,
        c,
        a,
        b,
    });
    bwd.push(Template::GProd {
        m,
        n: p,
        p: n,
        ta: false,
        tb: true,
        acc: true,
        c: da,
        a: dc,
        b,
    });
    bwd.push(Template::GProd {
        m: n,
        n: m,
        p,
        ta: true,
        tb: false,
        acc: true,
        c: db,
        a,
        b: dc,
    });
}
