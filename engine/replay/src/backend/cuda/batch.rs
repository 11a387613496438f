//! One in-cell batch as the device runs it: the views its operands are read
//! through and its result written to. The program builder (`program.rs`)
//! makes them, the fuser (`fuse.rs`) chains them, the executor (`exec.rs`)
//! launches them.

use crate::cells::PrimOp;

/// Which buffer a view reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Buf {
    /// The batch's work buffer (records, then temporaries).
    Work,
    /// The program's parameters.
    Params,
}

/// A view: op `j` of instance `r` at `k·shift_k + tab[j] + r·rs`; when the view
/// is uniform, `tab[j] = base + j·os` (what GEMM operands need).
#[derive(Clone, Copy, Debug)]
pub(super) struct GView {
    pub buf: Buf,
    pub tab: usize,
    pub base: i64,
    pub os: i64,
    pub rs: i64,
    pub shift_k: i64,
}

/// One operand: where the op reads it, and the gather that fills it first.
pub(super) struct GArg {
    pub view: GView,
    pub gather: Option<GView>,
    pub per_row: bool,
    pub numel: usize,
    /// Per-instance shape of the operand.
    pub shape: Vec<usize>,
    /// The cell value each op of the batch reads here.
    pub values: Vec<usize>,
}

/// Kind-specific views.
pub(super) enum Extra {
    None,
    /// Per operand, the output view shifted to its place in the concatenation.
    Concat(Vec<GView>),
    /// The input view shifted to each op's first sliced row.
    Slice(GView),
}

/// One in-cell batch on the device.
pub(super) struct GBatch {
    pub kind: PrimOp,
    /// The batch's scale factor (`scale`: every op's, equal by its
    /// signature); 1 for other ops.
    pub factor: f32,
    pub m: usize,
    pub out: usize,
    pub args: Vec<GArg>,
    pub y: GView,
    /// Records to copy a packed result into (when not consecutive there).
    pub store: Option<GView>,
    pub extra: Extra,
    /// First dimension of operand 0 (lookup rows, softmax width).
    pub rows0: usize,
    /// The cell value each op of the batch produces.
    pub out_values: Vec<usize>,
}
