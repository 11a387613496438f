//! DyNet without static subgraphs: the trace expanded to primitive ops, batched
//! op by op by a policy (agenda or depth), every operand gathered into a
//! contiguous buffer unless it already is contiguous and in order, every batch's
//! results allocated contiguously (DyNet's autobatching memory scheme).

use std::time::Instant;

use super::interp::{Operand, exec_op};
use super::model::Model;
use super::store::Store;
use super::{Counters, ReplayError, TimeSplit};
use crate::cells::CellLibrary;
use crate::graph::NodeId;
use crate::sched::{BatchPolicy, SameTypeDag, run_policy_with};
use crate::trace::Trace;
use crate::workloads::{ArgSrc, OpOrigin, expand};

/// Runs the op-level program; returns the cell-level outputs (for checking),
/// counters, time split and policy misses.
pub fn run(
    trace: &Trace,
    model: &Model,
    cells: &CellLibrary,
    policy: &mut dyn BatchPolicy,
) -> Result<(Store, Counters, TimeSplit, u64), ReplayError> {
    let t0 = Instant::now();
    let prog = expand(model.workload, &trace.graph, cells, model.hidden)?;
    let og = &prog.graph;
    let st = SameTypeDag::for_policy(og, policy);
    let numel: Vec<usize> = prog
        .origins
        .iter()
        .map(|o| match o {
            OpOrigin::PortSum { numel, .. } => *numel as usize,
            OpOrigin::CellOp { role, op, .. } => {
                let cell = &model.roles[*role as usize].cell;
                cell.values[cell.ops[*op as usize].out.0 as usize].numel()
            }
        })
        .collect();
    let mut arena = vec![0.0f32; numel.iter().sum()];
    let mut slot = vec![0usize; og.len()];
    let mut bump = 0usize;
    let mut gather: Vec<Vec<f32>> = Vec::new();
    let mut data: Vec<(u32, u32)> = Vec::new();
    let mut c = Counters::default();
    let construction = t0.elapsed().as_secs_f64();

    let t1 = Instant::now();
    let mut exec = 0.0;
    let mut on_batch = |batch: &[NodeId]| {
        let t = Instant::now();
        let k = batch.len();
        let n = numel[batch[0].index()];
        let (done, rest) = arena.split_at_mut(bump);
        let y = &mut rest[..k * n];
        match &prog.origins[batch[0].index()] {
            OpOrigin::PortSum { .. } => {
                // One gather-and-sum kernel reading every producer in place.
                y.fill(0.0);
                for (r, &v) in batch.iter().enumerate() {
                    for a in og.args(v) {
                        let src = &done[slot[a.index()]..slot[a.index()] + n];
                        y[r * n..(r + 1) * n]
                            .iter_mut()
                            .zip(src)
                            .for_each(|(d, s)| *d += s);
                        c.bytes_gathered += n as u64 * 4;
                    }
                }
                c.kernels += 1;
            }
            OpOrigin::CellOp { role, op, args, .. } => {
                let rm = &model.roles[*role as usize];
                let cell = &rm.cell;
                let op = &cell.ops[*op as usize];
                gather.resize_with(args.len(), Vec::new);
                // Decide per operand: shared parameter, contiguous in place, or gathered.
                let mut in_place: Vec<Option<usize>> = vec![None; args.len()];
                for (i, a) in args.iter().enumerate() {
                    if let ArgSrc::Param(_) = a {
                        continue;
                    }
                    let m = cell.values[op.args[i].0 as usize].numel();
                    let src_of = |v: NodeId| match &prog.origins[v.index()] {
                        OpOrigin::CellOp { args, .. } => args[i],
                        OpOrigin::PortSum { .. } => ArgSrc::Zero,
                    };
                    let first = match src_of(batch[0]) {
                        ArgSrc::Node(u) => Some(slot[u.index()]),
                        _ => None,
                    };
                    let contiguous = first.is_some_and(|s0| {
                        batch.iter().enumerate().all(|(r, &v)| {
                            matches!(src_of(v), ArgSrc::Node(u) if slot[u.index()] == s0 + r * m)
                        })
                    });
                    if contiguous {
                        in_place[i] = first;
                        continue;
                    }
                    let buf = &mut gather[i];
                    buf.clear();
                    buf.resize(k * m, 0.0);
                    for (r, &v) in batch.iter().enumerate() {
                        if let ArgSrc::Node(u) = src_of(v) {
                            let s = slot[u.index()];
                            buf[r * m..(r + 1) * m].copy_from_slice(&done[s..s + m]);
                        }
                    }
                    c.kernels += 1;
                    c.bytes_gathered += (k * m) as u64 * 4;
                }
                let operands: Vec<Operand> = args
                    .iter()
                    .enumerate()
                    .map(|(i, a)| match a {
                        ArgSrc::Param(vid) => Operand {
                            data: &rm.params[*vid as usize],
                            per_row: false,
                        },
                        _ => {
                            let m = cell.values[op.args[i].0 as usize].numel();
                            match in_place[i] {
                                Some(s) => Operand {
                                    data: &done[s..s + k * m],
                                    per_row: true,
                                },
                                None => Operand {
                                    data: &gather[i],
                                    per_row: true,
                                },
                            }
                        }
                    })
                    .collect();
                data.clear();
                data.extend(batch.iter().map(|&v| match &prog.origins[v.index()] {
                    OpOrigin::CellOp { node, .. } | OpOrigin::PortSum { node, .. } => {
                        model.node_data(*node)
                    }
                }));
                exec_op(cell, op, k, &data, &operands, y);
                c.kernels += 1;
            }
        }
        for (r, &v) in batch.iter().enumerate() {
            slot[v.index()] = bump + r * n;
        }
        bump += k * n;
        c.batches += 1;
        exec += t.elapsed().as_secs_f64();
    };
    let (_, stats) = run_policy_with(og, &st, policy, &mut on_batch)?;
    let time = TimeSplit {
        construction,
        execution: exec,
        scheduling: t1.elapsed().as_secs_f64() - exec,
    };
    // The cell-level view of the results, for comparison with other executors.
    let g = &trace.graph;
    let mut store = Store::new(g, model);
    for v in g.nodes() {
        let role = model.type_role[g.node_type(v).index()];
        for (j, out) in prog.cell_outputs[v.index()].iter().enumerate() {
            if let Some(o) = out {
                let n = numel[o.index()];
                store
                    .output_mut(v, role, j)
                    .copy_from_slice(&arena[slot[o.index()]..slot[o.index()] + n]);
            }
        }
    }
    Ok((store, c, time, stats.misses))
}
