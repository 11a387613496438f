//! Expansion of a cell-level graph into primitive ops (DyNet without static
//! subgraphs). Each cell invocation becomes one node per op of its cell, typed by
//! the op's DyNet-style signature; ports with several producers (`many`) get one
//! explicit `port_sum` node per input, as the gather-and-sum Cavs performs.

use thiserror::Error;

use super::binding::{BindError, bind_ports};
use super::defined::{Role, Workload};
use crate::cells::{Cell, CellError, CellLibrary, ValueKind};
use crate::graph::{Graph, GraphBuilder, GraphError, NodeId, TypeId};

/// Expansion errors.
#[derive(Debug, Error)]
pub enum ExpandError {
    /// A node's type names a role the workload does not have.
    #[error("node {node}: type {type_name:?} is not a role of workload {workload}")]
    UnknownRole {
        /// Node index.
        node: u32,
        /// Its type name.
        type_name: String,
        /// Workload name.
        workload: String,
    },
    /// A node's arguments do not fit its cell's ports.
    #[error("node {node}: {source}")]
    Bind {
        /// Node index.
        node: u32,
        /// Cause.
        source: BindError,
    },
    /// A producer's outputs do not fit the port it feeds.
    #[error("node {node}: {source}")]
    Cell {
        /// Node index.
        node: u32,
        /// Cause.
        source: CellError,
    },
    /// The expanded graph is invalid.
    #[error("expanded graph is invalid: {0}")]
    Graph(#[from] GraphError),
}

/// Where an operand of an op node comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgSrc {
    /// A parameter of the node's role (value id in its cell).
    Param(u32),
    /// Another op node's result.
    Node(NodeId),
    /// An absent optional input: zeros.
    Zero,
}

/// What an op node computes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpOrigin {
    /// Op `op` of the cell of role `role`, run for cell-level node `node`;
    /// `args` gives every operand, in the op's argument order.
    CellOp {
        /// Cell-level node.
        node: NodeId,
        /// Role index in the workload.
        role: u32,
        /// Op index in the cell.
        op: u32,
        /// Operand sources.
        args: Vec<ArgSrc>,
    },
    /// Sum of several producers feeding one input of a `many` port of `node`.
    PortSum {
        /// Cell-level node.
        node: NodeId,
        /// Elements per instance.
        numel: u32,
    },
}

/// An op-level graph with, per op node, what it computes (for executors).
pub struct OpProgram {
    /// The op-level graph.
    pub graph: Graph,
    /// Per op node, its origin.
    pub origins: Vec<OpOrigin>,
    /// Per cell-level node, the op node holding each cell output.
    pub cell_outputs: Vec<Vec<Option<NodeId>>>,
}

/// Cell instance and role index per role of the workload, instantiated once.
struct RoleCells {
    cells: Vec<Cell>,
}

/// Expands `g` (cell level, recorded for `w`) to primitive ops.
pub fn to_op_level(
    w: &Workload,
    g: &Graph,
    lib: &CellLibrary,
    hidden: usize,
) -> Result<Graph, ExpandError> {
    expand(w, g, lib, hidden).map(|p| p.graph)
}

/// [`to_op_level`], keeping what every op node computes.
pub fn expand(
    w: &Workload,
    g: &Graph,
    lib: &CellLibrary,
    hidden: usize,
) -> Result<OpProgram, ExpandError> {
    let roles = RoleCells {
        cells: w
            .roles
            .iter()
            .map(|r| lib.instantiate(&r.cell, hidden))
            .collect::<Result<_, _>>()
            .map_err(|source| ExpandError::Cell { node: 0, source })?,
    };
    // Role index of every cell-level type.
    let mut type_role = Vec::with_capacity(g.types().len());
    for (_, op) in g.types().iter() {
        type_role.push(w.type_role_any(&op.name));
    }
    let mut out = GraphBuilder::new();
    // Op types per role, interned on the role's first node: signature strings are
    // built once per role, not once per node.
    let mut op_types: Vec<Option<Vec<TypeId>>> = vec![None; w.roles.len()];
    // For each cell-level node, the op node holding each of its cell's outputs.
    let mut outputs: Vec<Vec<Option<NodeId>>> = Vec::with_capacity(g.len());
    let mut origins: Vec<OpOrigin> = Vec::new();
    for v in g.nodes() {
        let role_idx =
            type_role[g.node_type(v).index()].ok_or_else(|| ExpandError::UnknownRole {
                node: v.0,
                type_name: g.types().name(g.node_type(v)).to_string(),
                workload: w.name.to_string(),
            })?;
        let role = &w.roles[role_idx];
        let cell = &roles.cells[role_idx];
        let arg_roles: Vec<&str> = g
            .args(v)
            .iter()
            .map(|a| match type_role[g.node_type(*a).index()] {
                Some(i) => w.roles[i].role.as_str(),
                None => "",
            })
            .collect();
        let bound = bind_ports(role, cell, &arg_roles)
            .map_err(|source| ExpandError::Bind { node: v.0, source })?;
        let instance = g.instance(v);
        // Value id -> op node for this invocation (inputs bound, params absent).
        let mut value_node: Vec<Option<NodeId>> = vec![None; cell.values.len()];
        for (p, port) in cell.ports.iter().enumerate() {
            let producers: Vec<NodeId> = bound[p].iter().map(|&pos| g.args(v)[pos]).collect();
            for &u in &producers {
                let producer_cell = &roles.cells[type_role[g.node_type(u).index()].unwrap_or(0)];
                cell.check_binding(p, producer_cell)
                    .map_err(|source| ExpandError::Cell { node: v.0, source })?;
            }
            for (j, &input) in port.inputs.iter().enumerate() {
                let feeds: Vec<NodeId> = producers
                    .iter()
                    .filter_map(|u| outputs[u.index()].get(j).copied().flatten())
                    .collect();
                value_node[input.0 as usize] = match feeds.len() {
                    0 => None,
                    1 => Some(feeds[0]),
                    _ => {
                        let dims = dims(&cell.values[input.0 as usize].shape);
                        let ty = out.types_mut().intern(&format!("port_sum[{dims}]"), true)?;
                        origins.push(OpOrigin::PortSum {
                            node: v,
                            numel: cell.values[input.0 as usize].numel() as u32,
                        });
                        Some(out.add_node(ty, &feeds, instance))
                    }
                };
            }
        }
        if op_types[role_idx].is_none() {
            op_types[role_idx] = Some(intern_op_types(&mut out, cell, role)?);
        }
        let tys = op_types[role_idx].as_deref().unwrap_or(&[]);
        let mut args: Vec<NodeId> = Vec::new();
        for (k, (op, &ty)) in cell.ops.iter().zip(tys).enumerate() {
            origins.push(OpOrigin::CellOp {
                node: v,
                role: role_idx as u32,
                op: k as u32,
                args: op
                    .args
                    .iter()
                    .map(|a| match cell.values[a.0 as usize].kind {
                        ValueKind::Param => ArgSrc::Param(a.0),
                        _ => value_node[a.0 as usize].map_or(ArgSrc::Zero, ArgSrc::Node),
                    })
                    .collect(),
            });
            args.clear();
            args.extend(
                op.args
                    .iter()
                    .filter(|a| !matches!(cell.values[a.0 as usize].kind, ValueKind::Param))
                    .filter_map(|a| value_node[a.0 as usize]),
            );
            value_node[op.out.0 as usize] = Some(out.add_node(ty, &args, instance));
        }
        outputs.push(
            cell.outputs
                .iter()
                .map(|o| value_node[o.0 as usize])
                .collect(),
        );
    }
    Ok(OpProgram {
        graph: out.finish()?,
        origins,
        cell_outputs: outputs,
    })
}

fn intern_op_types(
    out: &mut GraphBuilder,
    cell: &Cell,
    role: &Role,
) -> Result<Vec<TypeId>, GraphError> {
    (0..cell.ops.len())
        .map(|k| {
            let mut sig = cell.op_signature(k, &role.role);
            if !role.batchable {
                // Keep non-batchable ops apart from batchable ops of equal signature.
                sig = format!("{}/{sig}", role.role);
            }
            out.types_mut().intern(&sig, role.batchable)
        })
        .collect()
}

fn dims(shape: &[usize]) -> String {
    shape
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join("x")
}
