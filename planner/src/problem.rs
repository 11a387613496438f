//! The layout problem in the abstract: variables with sizes, and batched ops
//! whose operands are lists of variables.
//!
//! Alignment and copy accounting only need this much, so they are written
//! against [`Problem`] rather than [`Cell`]: the paper's §3.1 example and the
//! property tests build problems by hand, and [`Problem::from_cell`] builds
//! the real ones (one variable per cell value, one [`BatchSpec`] per in-cell
//! batch).

use engine::cells::{Cell, ValueKind};

use crate::error::PlanError;

/// Bytes per element: every value is f32.
pub const DTYPE_BYTES: u64 = 4;

/// One variable of the arena.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Var {
    /// Name for messages and files.
    pub name: String,
    /// Bytes it occupies in the arena.
    pub bytes: u64,
    /// True for a parameter: stored once and read by every instance (its
    /// instance stride is 0); false for a per-instance value (one row per
    /// instance).
    pub shared: bool,
}

/// One batched op: `k = ops.len()` ops run as one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSpec {
    /// Op ids in the reference order (ascending op index for cells); the
    /// accounting may execute them in another order.
    pub ops: Vec<usize>,
    /// `args[j][i]` is the variable op `ops[i]` reads at argument position `j`.
    pub args: Vec<Vec<usize>>,
    /// `result[i]` is the variable op `ops[i]` writes.
    pub result: Vec<usize>,
}

impl BatchSpec {
    /// Number of ops in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no ops (never true for a valid problem).
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Variables plus batches: everything the planner needs to choose a layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Instances per batch (`B`); used only for the per-instance weight
    /// variant of the accounting.
    pub instances: u64,
    /// All variables; ids are indices.
    pub vars: Vec<Var>,
    /// Batched ops in execution order.
    pub batches: Vec<BatchSpec>,
}

impl Problem {
    /// Checks shapes of the lists: non-empty batches, equal lengths, ids in
    /// range, every variable the result of at most one op.
    pub fn validate(&self) -> Result<(), PlanError> {
        let n = self.vars.len();
        if let Some(v) = self.vars.iter().position(|v| v.bytes == 0) {
            return Err(PlanError::InvalidProblem {
                batch: 0,
                reason: format!("variable {v} (`{}`) has size 0", self.vars[v].name),
            });
        }
        let mut written = vec![false; n];
        for (b, spec) in self.batches.iter().enumerate() {
            let bad = |reason: String| PlanError::InvalidProblem { batch: b, reason };
            let k = spec.ops.len();
            if k == 0 {
                return Err(bad("a batch needs at least one op".into()));
            }
            if spec.result.len() != k {
                return Err(bad(format!(
                    "result has {} entries for {k} ops",
                    spec.result.len()
                )));
            }
            for (j, arg) in spec.args.iter().enumerate() {
                if arg.len() != k {
                    return Err(bad(format!(
                        "arg {j} has {} entries for {k} ops",
                        arg.len()
                    )));
                }
            }
            for &v in spec.args.iter().flatten().chain(&spec.result) {
                if v >= n {
                    return Err(bad(format!("variable {v} out of range ({n} variables)")));
                }
            }
            for &v in &spec.result {
                if std::mem::replace(&mut written[v], true) {
                    return Err(bad(format!(
                        "variable {v} (`{}`) is the result of two ops",
                        self.vars[v].name
                    )));
                }
            }
        }
        Ok(())
    }

    /// The problem of running `cell` over `batch` instances with the in-cell
    /// schedule `schedule` (each entry a list of op indices; the reference
    /// order within a batch is ascending op index).
    ///
    /// Variables are the cell's values in value-id order: a param takes
    /// `numel × 4` bytes, any other value `batch × numel × 4`.
    pub fn from_cell(
        cell: &Cell,
        batch: usize,
        schedule: &[Vec<usize>],
    ) -> Result<Problem, PlanError> {
        let vars = cell_vars(cell, batch)?;
        let mut seen = vec![false; cell.ops.len()];
        let mut batches = Vec::with_capacity(schedule.len());
        for (b, ops) in schedule.iter().enumerate() {
            let bad = |reason: String| PlanError::InvalidProblem { batch: b, reason };
            let mut ops = ops.clone();
            ops.sort_unstable();
            for &o in &ops {
                if o >= cell.ops.len() {
                    return Err(bad(format!("op {o} out of range ({} ops)", cell.ops.len())));
                }
                if std::mem::replace(&mut seen[o], true) {
                    return Err(bad(format!("op {o} scheduled twice")));
                }
            }
            let arity = ops.first().map_or(0, |&o| cell.ops[o].args.len());
            if ops.iter().any(|&o| cell.ops[o].args.len() != arity) {
                return Err(bad("ops with different argument counts".into()));
            }
            batches.push(spec_of(cell, ops, arity));
        }
        let p = Problem {
            instances: batch as u64,
            vars,
            batches,
        };
        p.validate()?;
        Ok(p)
    }
}

/// The variables of `cell` at `batch` instances, in value-id order.
pub fn cell_vars(cell: &Cell, batch: usize) -> Result<Vec<Var>, PlanError> {
    if batch == 0 {
        return Err(PlanError::ZeroBatch);
    }
    cell.values
        .iter()
        .map(|v| {
            let shared = v.kind == ValueKind::Param;
            let rows = if shared { 1 } else { batch as u64 };
            let bytes = (v.numel() as u64)
                .checked_mul(DTYPE_BYTES)
                .and_then(|b| b.checked_mul(rows))
                .ok_or_else(|| PlanError::TooLarge {
                    what: format!("size of `{}`", v.name),
                    batch,
                })?;
            Ok(Var {
                name: v.name.clone(),
                bytes,
                shared,
            })
        })
        .collect()
}

/// The batch spec of `ops` (in range, in reference order, all with `arity` args).
fn spec_of(cell: &Cell, ops: Vec<usize>, arity: usize) -> BatchSpec {
    let args = (0..arity)
        .map(|j| ops.iter().map(|&o| cell.ops[o].args[j].index()).collect())
        .collect();
    let result = ops.iter().map(|&o| cell.ops[o].out.index()).collect();
    BatchSpec { ops, args, result }
}
