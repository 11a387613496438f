//! The model behind a trace: for each role of its workload, the cell and its
//! seeded parameters; for each node, the per-node data a cell needs at run time
//! (the lookup row and the loss label), derived from the seed and the node id so
//! every executor sees the same numbers.

use crate::cells::{Cell, CellLibrary, ValueKind};
use crate::graph::{Graph, NodeId};
use crate::trace::Trace;
use crate::workloads::{BindError, RoleSpec, WorkloadSpec, bind_ports, role_of, workload};

use super::ReplayError;

/// One role: its cell and parameter tensors (indexed by value id; empty for
/// values that are not parameters).
pub struct RoleModel {
    /// Role spec from the workload table.
    pub role: &'static RoleSpec,
    /// The cell at the trace's hidden size.
    pub cell: Cell,
    /// Parameter data per value id.
    pub params: Vec<Vec<f32>>,
}

/// Cells, parameters and port bindings of a trace.
pub struct Model {
    /// The workload.
    pub workload: &'static WorkloadSpec,
    /// Hidden size.
    pub hidden: usize,
    /// Roles, in the workload's order.
    pub roles: Vec<RoleModel>,
    /// Role index of every trace type.
    pub type_role: Vec<usize>,
    /// Per node, per port of its cell, the argument positions bound to it.
    pub bindings: Vec<Vec<Vec<u32>>>,
    seed: u64,
}

/// SplitMix64: a fixed, well-mixed hash for seeded per-node data.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A value in [-scale, scale) from a hash.
fn uniform(h: u64, scale: f32) -> f32 {
    let unit = (h >> 40) as f32 / (1u64 << 24) as f32;
    (2.0 * unit - 1.0) * scale
}

impl Model {
    /// Builds the model of `trace`: its workload must be one of the zoo (that is
    /// where the cells behind its types come from), every type a role of it,
    /// every node's arguments bindable to its cell's ports.
    pub fn new(trace: &Trace, cells: &CellLibrary, seed: u64) -> Result<Model, ReplayError> {
        let w = workload(&trace.workload)
            .ok_or_else(|| ReplayError::NoCells(trace.workload.clone()))?;
        let g = &trace.graph;
        let hidden = match trace.meta.hidden {
            Some(h) => h as usize,
            None => hidden_from_names(g).ok_or(ReplayError::NoHidden)?,
        };
        let mut roles = Vec::with_capacity(w.roles.len());
        for (ri, r) in w.roles.iter().enumerate() {
            let cell = cells.instantiate(r.cell, hidden)?;
            let params = init_params(&cell, seed, ri as u64);
            roles.push(RoleModel {
                role: r,
                cell,
                params,
            });
        }
        let mut type_role = Vec::with_capacity(g.types().len());
        for (_, op) in g.types().iter() {
            let name = &op.name;
            let idx = w.roles.iter().position(|r| r.role == role_of(name));
            let expected = crate::workloads::type_name(role_of(name), hidden);
            match idx {
                Some(i) if *name == expected => type_role.push(i),
                Some(_) => {
                    return Err(ReplayError::HiddenMismatch {
                        type_name: name.clone(),
                        hidden,
                    });
                }
                None => {
                    return Err(ReplayError::UnknownType {
                        type_name: name.clone(),
                        workload: w.name.to_string(),
                    });
                }
            }
        }
        let mut bindings = Vec::with_capacity(g.len());
        for v in g.nodes() {
            let r = &roles[type_role[g.node_type(v).index()]];
            let arg_roles: Vec<&str> = g
                .args(v)
                .iter()
                .map(|a| w.roles[type_role[g.node_type(*a).index()]].role)
                .collect();
            let b = bind_ports(r.role, &r.cell, &arg_roles)
                .map_err(|source: BindError| ReplayError::Bind { node: v.0, source })?;
            bindings.push(
                b.into_iter()
                    .map(|ps| ps.into_iter().map(|p| p as u32).collect())
                    .collect(),
            );
        }
        Ok(Model {
            workload: w,
            hidden,
            roles,
            type_role,
            bindings,
            seed,
        })
    }

    /// Role of node `v`.
    pub fn role_of(&self, g: &Graph, v: NodeId) -> &RoleModel {
        &self.roles[self.type_role[g.node_type(v).index()]]
    }

    /// The lookup row and loss label of node `v`.
    pub fn node_data(&self, v: NodeId) -> (u32, u32) {
        let h = mix(self.seed ^ mix(u64::from(v.0) + 1));
        ((h & 0xFFFF_FFFF) as u32, (h >> 32) as u32)
    }
}

pub(super) fn hidden_from_names(g: &Graph) -> Option<usize> {
    g.types().iter().find_map(|(_, op)| {
        let rest = op.name.split("[h=").nth(1)?;
        rest.strip_suffix(']')?.parse().ok()
    })
}

/// Parameters uniform in ±1/√fan_in (fan_in = last dimension), so activations
/// stay in range through deep trees; lookup tables ±0.1.
fn init_params(cell: &Cell, seed: u64, role: u64) -> Vec<Vec<f32>> {
    cell.values
        .iter()
        .enumerate()
        .map(|(vi, v)| {
            if !matches!(v.kind, ValueKind::Param) {
                return Vec::new();
            }
            let fan_in = *v.shape.last().unwrap_or(&1);
            let is_table = cell.ops.iter().any(|op| {
                op.kind == crate::cells::PrimOp::Lookup
                    && op.args.first().map(|a| a.0 as usize) == Some(vi)
            });
            let scale = if is_table {
                0.1
            } else {
                1.0 / (fan_in.max(1) as f32).sqrt()
            };
            let base = mix(seed ^ mix(role << 20 | vi as u64));
            (0..v.numel())
                .map(|i| uniform(mix(base ^ i as u64), scale))
                .collect()
        })
        .collect()
}
