//! Copy accounting: what a layout costs in gathers and scatters.
//!
//! A batched op over `k >= 2` ops reads each argument position as one
//! strided operand. It needs no copy when the operand is
//!
//! - **contiguous and aligned**: the `k` variables are distinct, of one size
//!   and kind, and lie back to back in the batch's op order, or
//! - **a broadcast**: all `k` entries are one variable (stride 0);
//!
//! otherwise it is **gathered** (one memory kernel moving all `k` blocks).
//! The result is contiguous and aligned or **scattered** (one kernel).
//! Single-op batches never copy. The op order within a batch is free: with
//! [`OrderPolicy::Best`] the accounting tries the reference order and the
//! orders that sort the result or any argument by address, and keeps the
//! cheapest (fewest bytes, then kernels; ties to the earlier candidate).
//!
//! Two further views are kept for comparison with ED-Batch Table 2, whose
//! DyNet numbers include work a strided kernel avoids: materialising each
//! per-instance broadcast (`k` copies of the block; parameter broadcasts are
//! free in DyNet too) and gathering weights once per *instance* (`B` times)
//! rather than once per batch.

use crate::layout::Layout;
use crate::problem::{BatchSpec, Problem};

/// How an operand is accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read or written in place (one block, or `k` blocks back to back in op order).
    Contiguous,
    /// One variable read by every op with stride 0.
    Broadcast,
    /// Copied into a temporary before the kernel.
    Gather,
    /// Written to a temporary and copied out after the kernel.
    Scatter,
}

impl Access {
    /// Name used in layout files.
    pub fn name(self) -> &'static str {
        match self {
            Access::Contiguous => "contiguous",
            Access::Broadcast => "broadcast",
            Access::Gather => "gather",
            Access::Scatter => "scatter",
        }
    }
}

/// Cost of one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperandCost {
    /// Access kind.
    pub access: Access,
    /// Bytes copied by the gather or scatter (0 otherwise).
    pub copy_bytes: u64,
    /// Bytes DyNet would copy to materialise this broadcast (0 otherwise,
    /// and 0 for a parameter).
    pub broadcast_bytes: u64,
    /// Whether the operand's variables are parameters.
    pub shared: bool,
}

/// Cost of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchCost {
    /// Execution order: positions into the spec's `ops`.
    pub order: Vec<usize>,
    /// One per argument position.
    pub args: Vec<OperandCost>,
    /// The result.
    pub result: OperandCost,
}

/// Sums over all batches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Batched ops (kernels for compute).
    pub batches: u64,
    /// Gathered operands.
    pub gathers: u64,
    /// Scattered results.
    pub scatters: u64,
    /// `gathers + scatters`: memory kernels.
    pub memory_kernels: u64,
    /// Bytes gathered plus scattered.
    pub copy_bytes: u64,
    /// Per-instance broadcast operands (free here, a copy in DyNet).
    pub broadcasts: u64,
    /// Bytes to materialise them.
    pub broadcast_bytes: u64,
    /// `copy_bytes` with every gathered parameter operand counted once per
    /// instance (how the paper's DyNet baseline appears to count).
    pub copy_bytes_per_instance_weights: u64,
}

impl Totals {
    /// Memory kernels counting broadcast materialisation (paper style).
    pub fn paper_kernels(&self) -> u64 {
        self.memory_kernels + self.broadcasts
    }

    /// Copy bytes plus broadcast materialisation (paper style).
    pub fn paper_bytes(&self) -> u64 {
        self.copy_bytes + self.broadcast_bytes
    }

    /// Paper style with weights gathered per instance.
    pub fn paper_bytes_per_instance_weights(&self) -> u64 {
        self.copy_bytes_per_instance_weights + self.broadcast_bytes
    }

    fn add(&mut self, c: &OperandCost, instances: u64) {
        match c.access {
            Access::Gather => self.gathers += 1,
            Access::Scatter => self.scatters += 1,
            Access::Broadcast if c.broadcast_bytes > 0 => self.broadcasts += 1,
            _ => {}
        }
        self.copy_bytes = self.copy_bytes.saturating_add(c.copy_bytes);
        self.broadcast_bytes = self.broadcast_bytes.saturating_add(c.broadcast_bytes);
        let per = if c.shared { instances } else { 1 };
        self.copy_bytes_per_instance_weights = self
            .copy_bytes_per_instance_weights
            .saturating_add(c.copy_bytes.saturating_mul(per));
    }
}

/// Costs of every batch plus totals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// One per batch of the problem.
    pub batches: Vec<BatchCost>,
    /// Sums.
    pub totals: Totals,
}

/// Which op orders the accounting may use within a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderPolicy {
    /// The spec's reference order only (the DyNet baseline).
    Reference,
    /// The cheapest of the candidate orders.
    Best,
}

/// Costs `problem` under `layout` (which must cover the problem's variables).
pub fn evaluate(problem: &Problem, layout: &Layout, policy: OrderPolicy) -> Evaluation {
    let mut totals = Totals::default();
    let batches = problem
        .batches
        .iter()
        .map(|spec| {
            let cost = cost_batch(problem, layout, spec, policy);
            totals.batches += 1;
            for c in cost.args.iter().chain([&cost.result]) {
                totals.add(c, problem.instances);
            }
            cost
        })
        .collect();
    totals.memory_kernels = totals.gathers + totals.scatters;
    Evaluation { batches, totals }
}

fn cost_batch(p: &Problem, layout: &Layout, spec: &BatchSpec, policy: OrderPolicy) -> BatchCost {
    let k = spec.len();
    let none = OperandCost {
        access: Access::Contiguous,
        copy_bytes: 0,
        broadcast_bytes: 0,
        shared: false,
    };
    if k == 0 {
        // Rejected by `Problem::validate`; costed as nothing rather than panicking.
        return BatchCost {
            order: Vec::new(),
            args: Vec::new(),
            result: none,
        };
    }
    let mut candidates = vec![(0..k).collect::<Vec<usize>>()];
    if policy == OrderPolicy::Best && k >= 2 {
        for list in std::iter::once(&spec.result).chain(&spec.args) {
            let mut ord: Vec<usize> = (0..k).collect();
            ord.sort_by_key(|&i| layout.offsets[list[i]]);
            if !candidates.contains(&ord) {
                candidates.push(ord);
            }
        }
    }
    let mut best: Option<(u64, u64, BatchCost)> = None;
    for order in candidates {
        let args: Vec<OperandCost> = spec
            .args
            .iter()
            .map(|list| operand_cost(p, layout, list, &order, false))
            .collect();
        let result = operand_cost(p, layout, &spec.result, &order, true);
        let all = args.iter().chain([&result]);
        let bytes = all
            .clone()
            .fold(0u64, |s, c| s.saturating_add(c.copy_bytes));
        let kernels = all
            .filter(|c| matches!(c.access, Access::Gather | Access::Scatter))
            .count() as u64;
        if best.as_ref().is_none_or(|b| (bytes, kernels) < (b.0, b.1)) {
            best = Some((
                bytes,
                kernels,
                BatchCost {
                    order,
                    args,
                    result,
                },
            ));
        }
    }
    // The candidate list always holds the reference order, so `best` is set.
    best.map_or(
        BatchCost {
            order: Vec::new(),
            args: Vec::new(),
            result: none,
        },
        |b| b.2,
    )
}

/// Access of one operand (`list[order[i]]` for op `i`).
pub(crate) fn operand_cost(
    p: &Problem,
    layout: &Layout,
    list: &[usize],
    order: &[usize],
    is_result: bool,
) -> OperandCost {
    let first = &p.vars[list[order[0]]];
    let shared = list.iter().all(|&v| p.vars[v].shared);
    let free = |access| OperandCost {
        access,
        copy_bytes: 0,
        broadcast_bytes: 0,
        shared,
    };
    if order.len() == 1 {
        return free(Access::Contiguous);
    }
    if !is_result && list.iter().all(|&v| v == list[0]) {
        let mut c = free(Access::Broadcast);
        if !shared {
            c.broadcast_bytes = first.bytes.saturating_mul(order.len() as u64);
        }
        return c;
    }
    let uniform = list
        .iter()
        .all(|&v| p.vars[v].bytes == first.bytes && p.vars[v].shared == shared);
    let packed = order.windows(2).all(|w| {
        let (a, b) = (list[w[0]], list[w[1]]);
        layout.offsets[a].checked_add(p.vars[a].bytes) == Some(layout.offsets[b])
    });
    if uniform && packed {
        return free(Access::Contiguous);
    }
    OperandCost {
        access: if is_result {
            Access::Scatter
        } else {
            Access::Gather
        },
        copy_bytes: list
            .iter()
            .fold(0u64, |s, &v| s.saturating_add(p.vars[v].bytes)),
        broadcast_bytes: 0,
        shared,
    }
}
