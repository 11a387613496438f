//! In-cell batching: which of a cell's ops run together as one kernel.
//!
//! A cell run over `B` instances executes each op `B` times; those `B` copies
//! always form one kernel. Beyond that, different ops of the cell with the same
//! *in-cell signature* (op kind, argument shapes and which arguments are
//! parameters, not parameter identity) can share the kernel: the four LSTM
//! gate affines are one batch. Which ops share is a batching problem on the
//! cell's op DAG, solved here exactly for cells of up to [`MAX_EXACT_OPS`]
//! ops by the reference's method: exhaustive search over ED-Batch Algorithm 1
//! sequences (pick a type, run *all* its ready ops) with lower-bound pruning
//! and memoisation ([`search`]). Unlike the reference we keep every
//! minimum-batch sequence (up to a cap) so the planner can pick the one whose
//! layout copies least.

mod search;

pub use search::{ScheduleSearch, search};

use engine::cells::{Cell, ValueKind};

/// Largest cell (in ops) searched exhaustively; a state is a `u128` bitmask.
/// Larger cells get the greedy Algorithm 1 schedule.
pub const MAX_EXACT_OPS: usize = 128;

/// Memo entries after which the exhaustive search gives up and falls back to
/// the greedy schedule (keeps pathological user cells from running for ages).
pub const MAX_SEARCH_STATES: usize = 200_000;

/// Default cap on the number of minimum-batch schedules enumerated.
pub const DEFAULT_SCHEDULE_CAP: usize = 256;

/// In-cell signature of op `op`: `<kind>[<arg shapes>]`, plus the row range
/// for a slice; a parameter argument's shape is marked `p` (`p64x64`). Two
/// ops may share a batch iff their signatures are equal. Parameter names are
/// deliberately absent (unlike the engine's op-level signature): inside one
/// cell, different weights of one shape batch fine. Whether an argument is a
/// parameter is not: the executors read a batch's operand either from the
/// parameters or from the per-instance values, so a slice of a bias and a
/// slice of a gate pre-activation (a stateless `nn.GRUCell`) must not share.
///
/// # Panics
/// If `op >= cell.ops.len()`.
pub fn in_cell_signature(cell: &Cell, op: usize) -> String {
    let op = &cell.ops[op];
    let shapes: Vec<String> = op
        .args
        .iter()
        .map(|&a| {
            let v = cell.value(a);
            let dims: Vec<String> = v.shape.iter().map(usize::to_string).collect();
            let mark = if v.kind == ValueKind::Param { "p" } else { "" };
            format!("{mark}{}", dims.join("x"))
        })
        .collect();
    let mut sig = op.kind.name().to_owned();
    if let Some((start, len)) = op.slice {
        sig.push_str(&format!("({start}..{})", start + len));
    }
    if let Some(c) = op.factor {
        sig.push_str(&format!("({c:?})"));
    }
    sig.push_str(&format!("[{}]", shapes.join(";")));
    sig
}

/// The op DAG of a cell with one type per op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpDag {
    /// Type id of each op (dense, numbered by first appearance).
    pub types: Vec<usize>,
    /// Signature text of each type id.
    pub type_names: Vec<String>,
    /// Distinct producer ops of each op's arguments, ascending.
    pub preds: Vec<Vec<usize>>,
}

impl OpDag {
    /// The DAG of `cell`, typed by [`in_cell_signature`].
    pub fn from_cell(cell: &Cell) -> OpDag {
        let mut producer = vec![usize::MAX; cell.values.len()];
        for (i, op) in cell.ops.iter().enumerate() {
            producer[op.out.index()] = i;
        }
        let sigs: Vec<String> = (0..cell.ops.len())
            .map(|i| in_cell_signature(cell, i))
            .collect();
        let preds = cell
            .ops
            .iter()
            .map(|op| {
                let mut p: Vec<usize> = op
                    .args
                    .iter()
                    .map(|a| producer[a.index()])
                    .filter(|&p| p != usize::MAX)
                    .collect();
                p.sort_unstable();
                p.dedup();
                p
            })
            .collect();
        OpDag::from_parts(&sigs, preds)
    }

    /// A DAG from per-op type labels and predecessor lists. Ops must be in
    /// topological order (every predecessor index below the op's own); an
    /// out-of-order predecessor is dropped rather than trusted.
    pub fn from_parts(labels: &[String], preds: Vec<Vec<usize>>) -> OpDag {
        let mut type_names: Vec<String> = Vec::new();
        let types = labels
            .iter()
            .map(|l| match type_names.iter().position(|t| t == l) {
                Some(t) => t,
                None => {
                    type_names.push(l.clone());
                    type_names.len() - 1
                }
            })
            .collect();
        let preds = preds
            .into_iter()
            .enumerate()
            .map(|(i, mut p)| {
                p.retain(|&u| u < i);
                p.sort_unstable();
                p.dedup();
                p
            })
            .collect();
        OpDag {
            types,
            type_names,
            preds,
        }
    }

    /// Number of ops.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether the DAG has no ops.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// ED-Batch's lower bound on the batches of any schedule over the ops not
    /// in `done`: the sum over types of the longest chain of that type (a path
    /// counted by its ops of the type).
    pub fn lower_bound(&self, done: &[bool]) -> usize {
        let t = self.type_names.len();
        let mut chain = vec![0usize; self.len() * t];
        let mut best = vec![0usize; t];
        for v in 0..self.len() {
            if done[v] {
                continue;
            }
            for &u in &self.preds[v] {
                if done[u] {
                    continue;
                }
                for ty in 0..t {
                    chain[v * t + ty] = chain[v * t + ty].max(chain[u * t + ty]);
                }
            }
            chain[v * t + self.types[v]] += 1;
            for ty in 0..t {
                best[ty] = best[ty].max(chain[v * t + ty]);
            }
        }
        best.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::cells::CellLibrary;

    /// A stateless `nn.GRUCell` as batchlab_torch lowers it: slices of the
    /// gate pre-activation (a value) beside slices of `bias_hh` (a
    /// parameter), same range and shape.
    const PARAM_AND_VALUE_SLICES: &str = r#"
name: "param_and_value_slices"
ports:
  - name: "x"
    arity: one
    inputs:
      - {name: "x", shape: [4]}
params:
  - {name: "w", shape: [8, 4]}
  - {name: "b", shape: [8]}
  - {name: "c", shape: [8]}
ops:
  - {out: "g", op: affine, args: ["b", "w", "x"]}
  - {out: "g0", op: slice, args: ["g"], start: 0, len: 4}
  - {out: "c0", op: slice, args: ["c"], start: 0, len: 4}
  - {out: "s", op: add, args: ["g0", "c0"]}
outputs: ["s"]
"#;

    #[test]
    fn a_slice_of_a_parameter_never_shares_a_batch_with_a_slice_of_a_value() {
        // The executors read a batch's operand from the parameters or from
        // the per-instance values, never both: batched together, edbatch
        // panicked on these two slices and edbatch-nolayout computed garbage.
        let mut lib = CellLibrary::new();
        let name = lib.add_yaml(PARAM_AND_VALUE_SLICES, "test").unwrap();
        let cell = lib.instantiate(&name, 4).unwrap();
        assert_eq!(in_cell_signature(&cell, 1), "slice(0..4)[8]");
        assert_eq!(in_cell_signature(&cell, 2), "slice(0..4)[p8]");
        assert_eq!(in_cell_signature(&cell, 0), "affine[p8;p8x4;4]");
        let dag = OpDag::from_cell(&cell);
        assert_ne!(dag.types[1], dag.types[2]);
    }
}
