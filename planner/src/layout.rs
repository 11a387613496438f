//! A layout: the order of all variables in one arena, with byte offsets.

use crate::error::PlanError;
use crate::problem::Problem;

/// Variables in memory order, packed from offset 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Variable ids in memory order (each exactly once).
    pub order: Vec<usize>,
    /// Byte offset of each variable, indexed by variable id.
    pub offsets: Vec<u64>,
    /// Total bytes.
    pub arena_bytes: u64,
}

impl Layout {
    /// Packs the variables of `problem` in `order`.
    ///
    /// # Errors
    /// [`PlanError::InvalidProblem`] if `order` is not a permutation of the
    /// variables, [`PlanError::TooLarge`] if the arena overflows 64 bits.
    pub fn from_order(problem: &Problem, order: Vec<usize>) -> Result<Layout, PlanError> {
        let n = problem.vars.len();
        let bad = |reason: String| PlanError::InvalidProblem {
            batch: problem.batches.len(),
            reason,
        };
        if order.len() != n {
            return Err(bad(format!(
                "layout lists {} of {n} variables",
                order.len()
            )));
        }
        let mut offsets = vec![u64::MAX; n];
        let mut at = 0u64;
        for &v in &order {
            if v >= n || offsets[v] != u64::MAX {
                return Err(bad(format!("layout repeats or misnames variable {v}")));
            }
            offsets[v] = at;
            at = at
                .checked_add(problem.vars[v].bytes)
                .ok_or_else(|| PlanError::TooLarge {
                    what: "arena size".into(),
                    batch: problem.instances as usize,
                })?;
        }
        Ok(Layout {
            order,
            offsets,
            arena_bytes: at,
        })
    }

    /// DyNet-style allocation: variables in id order (for a cell: inputs in
    /// port order, params in declaration order, then op results in op order).
    pub fn identity(problem: &Problem) -> Result<Layout, PlanError> {
        Layout::from_order(problem, (0..problem.vars.len()).collect())
    }
}
