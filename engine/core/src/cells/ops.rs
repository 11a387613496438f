//! The primitive ops a cell is built from, their argument counts and shape rules.
//!
//! The op set is the intersection of what the papers' cells need (Cavs Fig. 4,
//! ED-Batch Table 2, the VPPS models) and what every executor can run as one
//! batched kernel. Shape inference lives next to the enum so that adding an op
//! forces its rule to be written in the same place.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::shape::{checked_numel, show_shape};

/// A primitive operation inside a cell (the unit the op-level planner batches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrimOp {
    /// `matmul(a [m,k], b [k] | [k,n]) -> [m] | [m,n]`.
    Matmul,
    /// `affine(bias [m], W1 [m,k1], x1 [k1], ...) -> [m] = bias + Σ Wi·xi`.
    Affine,
    /// Elementwise `a + b`.
    Add,
    /// Elementwise `a - b`.
    Sub,
    /// Elementwise `a * b`.
    Mul,
    /// Elementwise n-ary sum (one argument = copy).
    Sum,
    /// Elementwise n-ary mean (at least two arguments).
    Mean,
    /// Logistic sigmoid.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// `max(x, 0)`.
    Relu,
    /// GELU, `x Φ(x)` with `Φ` the standard normal CDF (PyTorch's
    /// `F.gelu`, exact form).
    Gelu,
    /// `c · x` for the op's finite constant `c` (its `factor`): PyTorch's
    /// `0.5 * x`, `x / 2`, `-x`.
    Scale,
    /// `eˣ`.
    Exp,
    /// `1 - x` (the GRU's complementary update gate).
    OneMinus,
    /// Concatenation along dim 0.
    Concat,
    /// Rows `start .. start + len` along dim 0.
    Slice,
    /// Row of a parameter table selected by per-node run-time data.
    Lookup,
    /// Softmax of a vector.
    Softmax,
    /// A vector normalised to mean 0 and variance 1, `(x − μ) / √(σ² + ε)`
    /// with ε = 1e-5 (PyTorch's `F.layer_norm` without its elementwise
    /// affine, which cells write as `mul` and `add` of parameters).
    LayerNorm,
    /// `-log softmax(a)[label]`, label is per-node run-time data.
    PickLoss,
}

/// The ε of [`PrimOp::LayerNorm`] (PyTorch's default for `nn.LayerNorm`).
pub const LAYER_NORM_EPS: f32 = 1e-5;

/// How many arguments an op accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgCount {
    /// Exactly this many.
    Exact(usize),
    /// This many or more.
    AtLeast(usize),
    /// An odd number, at least 3 (`affine`: a bias plus weight/input pairs).
    OddAtLeast3,
}

impl ArgCount {
    /// Whether `n` arguments are accepted.
    pub fn accepts(self, n: usize) -> bool {
        match self {
            ArgCount::Exact(k) => n == k,
            ArgCount::AtLeast(k) => n >= k,
            ArgCount::OddAtLeast3 => n >= 3 && n % 2 == 1,
        }
    }
}

impl fmt::Display for ArgCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgCount::Exact(k) => write!(f, "exactly {k}"),
            ArgCount::AtLeast(k) => write!(f, "at least {k}"),
            ArgCount::OddAtLeast3 => f.write_str("an odd number >= 3 (bias, then W, x pairs)"),
        }
    }
}

/// Why shape inference rejected an op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShapeError {
    /// Operand shapes do not fit the op's rule; the text says which.
    Mismatch(String),
    /// `slice` reaches past the end of dim 0.
    SliceRange {
        /// First row.
        start: usize,
        /// Number of rows.
        len: usize,
        /// Size of dim 0 of the operand.
        dim: usize,
    },
}

impl PrimOp {
    /// Every op, in declaration order (used to list the known ops in errors).
    pub const ALL: [PrimOp; 20] = [
        PrimOp::Matmul,
        PrimOp::Affine,
        PrimOp::Add,
        PrimOp::Sub,
        PrimOp::Mul,
        PrimOp::Sum,
        PrimOp::Mean,
        PrimOp::Sigmoid,
        PrimOp::Tanh,
        PrimOp::Relu,
        PrimOp::Gelu,
        PrimOp::Scale,
        PrimOp::Exp,
        PrimOp::OneMinus,
        PrimOp::Concat,
        PrimOp::Slice,
        PrimOp::Lookup,
        PrimOp::Softmax,
        PrimOp::LayerNorm,
        PrimOp::PickLoss,
    ];

    /// The name used in cell files and signatures (same as the serde name).
    pub fn name(self) -> &'static str {
        match self {
            PrimOp::Matmul => "matmul",
            PrimOp::Affine => "affine",
            PrimOp::Add => "add",
            PrimOp::Sub => "sub",
            PrimOp::Mul => "mul",
            PrimOp::Sum => "sum",
            PrimOp::Mean => "mean",
            PrimOp::Sigmoid => "sigmoid",
            PrimOp::Tanh => "tanh",
            PrimOp::Relu => "relu",
            PrimOp::Gelu => "gelu",
            PrimOp::Scale => "scale",
            PrimOp::Exp => "exp",
            PrimOp::OneMinus => "one_minus",
            PrimOp::Concat => "concat",
            PrimOp::Slice => "slice",
            PrimOp::Lookup => "lookup",
            PrimOp::Softmax => "softmax",
            PrimOp::LayerNorm => "layer_norm",
            PrimOp::PickLoss => "pick_loss",
        }
    }

    /// The op with this file name, if any.
    pub fn from_name(name: &str) -> Option<PrimOp> {
        PrimOp::ALL.into_iter().find(|op| op.name() == name)
    }

    /// True for ops whose output element `i` depends only on input elements `i`
    /// (so a batch of them is one flat kernel over concatenated operands).
    pub fn is_elementwise(self) -> bool {
        matches!(
            self,
            PrimOp::Add
                | PrimOp::Sub
                | PrimOp::Mul
                | PrimOp::Sum
                | PrimOp::Mean
                | PrimOp::Sigmoid
                | PrimOp::Tanh
                | PrimOp::Relu
                | PrimOp::Gelu
                | PrimOp::Scale
                | PrimOp::Exp
                | PrimOp::OneMinus
        )
    }

    /// How many arguments the op takes.
    pub fn arg_count(self) -> ArgCount {
        match self {
            PrimOp::Matmul | PrimOp::Add | PrimOp::Sub | PrimOp::Mul => ArgCount::Exact(2),
            PrimOp::Affine => ArgCount::OddAtLeast3,
            PrimOp::Sum => ArgCount::AtLeast(1),
            PrimOp::Mean | PrimOp::Concat => ArgCount::AtLeast(2),
            PrimOp::Sigmoid
            | PrimOp::Tanh
            | PrimOp::Relu
            | PrimOp::Gelu
            | PrimOp::Scale
            | PrimOp::Exp
            | PrimOp::OneMinus
            | PrimOp::Slice
            | PrimOp::Lookup
            | PrimOp::Softmax
            | PrimOp::LayerNorm
            | PrimOp::PickLoss => ArgCount::Exact(1),
        }
    }

    /// Result shape for argument shapes `args`.
    /// `slice` is `(start, len)` and is only read by [`PrimOp::Slice`].
    pub fn infer_shape(
        self,
        args: &[&[usize]],
        slice: Option<(usize, usize)>,
    ) -> Result<Vec<usize>, ShapeError> {
        // Guards the indexing below; cell validation reports both cases earlier
        // with better messages, so this only matters for direct callers.
        if !self.arg_count().accepts(args.len()) {
            return Err(mismatch(format!(
                "expects {} args, got {}",
                self.arg_count(),
                args.len()
            )));
        }
        if args.iter().any(|a| a.is_empty()) {
            return Err(mismatch("operands must have at least one dim".to_owned()));
        }
        let out = match self {
            PrimOp::Matmul => matmul(args[0], args[1])?,
            PrimOp::Affine => affine(args)?,
            PrimOp::Add
            | PrimOp::Sub
            | PrimOp::Mul
            | PrimOp::Sum
            | PrimOp::Mean
            | PrimOp::Sigmoid
            | PrimOp::Tanh
            | PrimOp::Relu
            | PrimOp::Gelu
            | PrimOp::Scale
            | PrimOp::Exp
            | PrimOp::OneMinus => all_equal(args)?,
            PrimOp::Concat => concat(args)?,
            PrimOp::Slice => slice_rows(args[0], slice)?,
            PrimOp::Lookup => {
                if args[0].len() < 2 {
                    return Err(mismatch(format!(
                        "the table must have at least 2 dims [rows, ...], got {}",
                        show_shape(args[0])
                    )));
                }
                args[0][1..].to_vec()
            }
            PrimOp::Softmax | PrimOp::LayerNorm | PrimOp::PickLoss => {
                if args[0].len() != 1 {
                    return Err(mismatch(format!(
                        "expects a vector [n], got {}",
                        show_shape(args[0])
                    )));
                }
                if self == PrimOp::PickLoss {
                    vec![1]
                } else {
                    args[0].to_vec()
                }
            }
        };
        if checked_numel(&out).is_none() {
            return Err(mismatch(format!(
                "result {} is too large",
                show_shape(&out)
            )));
        }
        Ok(out)
    }
}

impl fmt::Display for PrimOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn mismatch(text: String) -> ShapeError {
    ShapeError::Mismatch(text)
}

fn matmul(a: &[usize], b: &[usize]) -> Result<Vec<usize>, ShapeError> {
    if a.len() != 2 {
        return Err(mismatch(format!(
            "left operand must be a matrix [m, k], got {}",
            show_shape(a)
        )));
    }
    match b {
        [k] | [k, _] if *k != a[1] => Err(mismatch(format!(
            "inner dims differ: {} x {}",
            show_shape(a),
            show_shape(b)
        ))),
        [_] => Ok(vec![a[0]]),
        [_, n] => Ok(vec![a[0], *n]),
        _ => Err(mismatch(format!(
            "right operand must be [k] or [k, n], got {}",
            show_shape(b)
        ))),
    }
}

fn affine(args: &[&[usize]]) -> Result<Vec<usize>, ShapeError> {
    let bias = args[0];
    let [m] = *bias else {
        return Err(mismatch(format!(
            "bias (arg 1) must be a vector [m], got {}",
            show_shape(bias)
        )));
    };
    for (pair, wx) in args[1..].chunks(2).enumerate() {
        let (w, x) = (wx[0], wx[1]);
        let (wi, xi) = (2 * pair + 2, 2 * pair + 3);
        let [k] = *x else {
            return Err(mismatch(format!(
                "input (arg {xi}) must be a vector, got {}",
                show_shape(x)
            )));
        };
        if w != [m, k] {
            return Err(mismatch(format!(
                "weight (arg {wi}) is {} but bias [{m}] and input (arg {xi}) [{k}] need [{m}, {k}]",
                show_shape(w)
            )));
        }
    }
    Ok(vec![m])
}

fn all_equal(args: &[&[usize]]) -> Result<Vec<usize>, ShapeError> {
    let first = args[0];
    for (i, a) in args.iter().enumerate().skip(1) {
        if *a != first {
            return Err(mismatch(format!(
                "arg 1 is {} but arg {} is {} (elementwise ops need equal shapes)",
                show_shape(first),
                i + 1,
                show_shape(a)
            )));
        }
    }
    Ok(first.to_vec())
}

fn concat(args: &[&[usize]]) -> Result<Vec<usize>, ShapeError> {
    let first = args[0];
    let mut rows = first[0];
    for (i, a) in args.iter().enumerate().skip(1) {
        if a.len() != first.len() || a[1..] != first[1..] {
            return Err(mismatch(format!(
                "arg 1 is {} but arg {} is {} (concat along dim 0 needs equal other dims)",
                show_shape(first),
                i + 1,
                show_shape(a)
            )));
        }
        rows = rows
            .checked_add(a[0])
            .ok_or_else(|| mismatch("concatenated size overflows".to_owned()))?;
    }
    let mut out = first.to_vec();
    out[0] = rows;
    Ok(out)
}

fn slice_rows(a: &[usize], slice: Option<(usize, usize)>) -> Result<Vec<usize>, ShapeError> {
    let Some((start, len)) = slice else {
        return Err(mismatch("slice needs `start` and `len`".to_owned()));
    };
    let dim = a[0];
    if len == 0 || start.checked_add(len).is_none_or(|end| end > dim) {
        return Err(ShapeError::SliceRange { start, len, dim });
    }
    let mut out = a.to_vec();
    out[0] = len;
    Ok(out)
}
