//! Executing a batch of same-role nodes as one cell run: gather the producers'
//! outputs into the cell's input rows (summing `many` ports), run the cell over
//! all rows, scatter the outputs back to the nodes' slots. This is Cavs' scheme
//! (gather at cell entry, scatter at exit); the reference runs it with one node.

use super::Counters;
use super::interp::{Scratch, run_cell};
use super::model::Model;
use super::store::Store;
use crate::graph::{Graph, NodeId};

/// Calls `add(row, input value id, producer output)` for every producer feeding
/// an input of the batch's cell (several producers on a `many` port are summed:
/// `add` accumulates). Returns the bytes read.
fn for_each_input(
    g: &Graph,
    model: &Model,
    store: &Store,
    batch: &[NodeId],
    mut add: impl FnMut(usize, usize, &[f32]),
) -> u64 {
    let mut bytes = 0u64;
    for (r, &v) in batch.iter().enumerate() {
        let cell = &model.roles[model.type_role[g.node_type(v).index()]].cell;
        for (p, port) in cell.ports.iter().enumerate() {
            for &pos in &model.bindings[v.index()][p] {
                let u = g.args(v)[pos as usize];
                let u_role = model.type_role[g.node_type(u).index()];
                for (j, &input) in port.inputs.iter().enumerate() {
                    let src = store.output(u, u_role, j);
                    add(r, input.0 as usize, src);
                    bytes += src.len() as u64 * 4;
                }
            }
        }
    }
    bytes
}

/// Runs `batch` (nodes of one role) and records what it moved and launched.
pub fn run_batch(
    g: &Graph,
    model: &Model,
    store: &mut Store,
    scratch: &mut Scratch,
    data: &mut Vec<(u32, u32)>,
    batch: &[NodeId],
    c: &mut Counters,
) {
    let Some(&first) = batch.first() else {
        return;
    };
    let role_idx = model.type_role[g.node_type(first).index()];
    let rm = &model.roles[role_idx];
    let cell = &rm.cell;
    let k = batch.len();
    scratch.prepare_inputs(rm, k);
    let gathered = for_each_input(g, model, store, batch, |r, input, src| {
        let n = src.len();
        let dst = &mut scratch.vals[input][r * n..(r + 1) * n];
        dst.iter_mut().zip(src).for_each(|(d, s)| *d += s);
    });
    data.clear();
    data.extend(batch.iter().map(|&v| model.node_data(v)));
    c.kernels += run_cell(rm, k, data, scratch);
    let mut scattered = 0u64;
    for (j, o) in cell.outputs.iter().enumerate() {
        let n = cell.values[o.0 as usize].numel();
        let src = &scratch.vals[o.0 as usize];
        for (r, &v) in batch.iter().enumerate() {
            store
                .output_mut(v, role_idx, j)
                .copy_from_slice(&src[r * n..(r + 1) * n]);
            scattered += n as u64 * 4;
        }
    }
    // One gather kernel at entry and one scatter kernel at exit per batch.
    c.kernels += 2;
    c.bytes_gathered += gathered;
    c.bytes_scattered += scattered;
    c.batches += 1;
}

/// [`run_batch`] for a role with an in-cell program (ED-Batch): the producers'
/// outputs are gathered into the input blocks of the program's arena, the cell
/// runs batch by batch as the layout says, the outputs are scattered back.
#[allow(clippy::too_many_arguments)]
pub fn run_batch_incell(
    g: &Graph,
    model: &Model,
    prog: &super::incell::CellProgram,
    store: &mut Store,
    arena: &mut Vec<f32>,
    tmp: &mut Vec<Vec<f32>>,
    data: &mut Vec<(u32, u32)>,
    batch: &[NodeId],
    c: &mut Counters,
) {
    let Some(&first) = batch.first() else {
        return;
    };
    let role_idx = model.type_role[g.node_type(first).index()];
    let cell = &model.roles[role_idx].cell;
    let k = batch.len();
    // Only the input blocks must start at zero (producers are added in); every
    // other variable is written by its op before any op reads it, so the rest of
    // a reused arena is not cleared.
    if arena.len() < prog.arena_len(k) {
        arena.resize(prog.arena_len(k), 0.0);
    }
    for port in &cell.ports {
        for &input in &port.inputs {
            let n = cell.values[input.0 as usize].numel();
            for r in 0..k {
                let at = prog.at(input.0 as usize, r);
                arena[at..at + n].fill(0.0);
            }
        }
    }
    let gathered = for_each_input(g, model, store, batch, |r, input, src| {
        let at = prog.at(input, r);
        let dst = &mut arena[at..at + src.len()];
        dst.iter_mut().zip(src).for_each(|(d, s)| *d += s);
    });
    data.clear();
    data.extend(batch.iter().map(|&v| model.node_data(v)));
    let counts = prog.run(cell, k, data, arena, tmp);
    let mut scattered = 0u64;
    for (j, o) in cell.outputs.iter().enumerate() {
        let n = cell.values[o.0 as usize].numel();
        for (r, &v) in batch.iter().enumerate() {
            let start = prog.at(o.0 as usize, r);
            store
                .output_mut(v, role_idx, j)
                .copy_from_slice(&arena[start..start + n]);
            scattered += n as u64 * 4;
        }
    }
    c.kernels += counts.kernels + counts.copy_kernels + 2;
    c.bytes_gathered += gathered + counts.copy_bytes;
    c.bytes_scattered += scattered;
    c.batches += 1;
}
