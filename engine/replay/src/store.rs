//! Node outputs in one preallocated arena (Cavs' dynamic tensors, DyNet's memory
//! pool): every node's cell outputs get a fixed slot, sized once per run, so an
//! executor never allocates while it executes.

use crate::graph::{Graph, NodeId};
use crate::model::Model;

/// Where each node's outputs live.
#[derive(Clone)]
pub struct Store {
    /// All outputs of all nodes.
    pub arena: Vec<f32>,
    node_start: Vec<usize>,
    /// Per role: (offset within a node's slot, numel) of each cell output.
    out_layout: Vec<Vec<(usize, usize)>>,
}

impl Store {
    /// Allocates the arena for every node of `g`.
    pub fn new(g: &Graph, model: &Model) -> Store {
        let out_layout: Vec<Vec<(usize, usize)>> = model
            .roles
            .iter()
            .map(|r| {
                let mut off = 0;
                r.cell
                    .outputs
                    .iter()
                    .map(|o| {
                        let n = r.cell.values[o.0 as usize].numel();
                        off += n;
                        (off - n, n)
                    })
                    .collect()
            })
            .collect();
        let mut node_start = Vec::with_capacity(g.len() + 1);
        let mut total = 0;
        for v in g.nodes() {
            node_start.push(total);
            let role = model.type_role[g.node_type(v).index()];
            total += out_layout[role].iter().map(|x| x.1).sum::<usize>();
        }
        node_start.push(total);
        Store {
            arena: vec![0.0; total],
            node_start,
            out_layout,
        }
    }

    /// Output `j` of node `v` (a node of role `role`).
    pub fn output(&self, v: NodeId, role: usize, j: usize) -> &[f32] {
        let (off, n) = self.out_layout[role][j];
        let s = self.node_start[v.index()] + off;
        &self.arena[s..s + n]
    }

    /// Where output `j` of node `v` starts in the arena, and its length.
    pub fn output_range(&self, v: NodeId, role: usize, j: usize) -> (usize, usize) {
        let (off, n) = self.out_layout[role][j];
        (self.node_start[v.index()] + off, n)
    }

    /// Mutable output `j` of node `v`.
    pub fn output_mut(&mut self, v: NodeId, role: usize, j: usize) -> &mut [f32] {
        let (off, n) = self.out_layout[role][j];
        let s = self.node_start[v.index()] + off;
        &mut self.arena[s..s + n]
    }

    /// All outputs of node `v`, flattened.
    pub fn node(&self, v: NodeId) -> &[f32] {
        &self.arena[self.node_start[v.index()]..self.node_start[v.index() + 1]]
    }
}
