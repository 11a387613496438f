//! The model behind a trace: for each role of its workload, the cell and its
//! seeded parameters; for each node, the per-node data a cell needs at run time
//! (the lookup row and the loss label): the trace's recorded values where it has
//! them, otherwise derived from the seed and the node id, so every executor sees
//! the same numbers.

use crate::cells::{Cell, CellLibrary, PrimOp, ValueKind};
use crate::error::ReplayError;
use crate::graph::{Graph, NodeId};
use crate::trace::Trace;
use crate::workloads::{BindError, Role, TypeMismatch, Workload, bind_ports, check_feeders};

/// One role: its cell and parameter tensors (indexed by value id; empty for
/// values that are not parameters).
pub struct RoleModel {
    /// The role (from the zoo's table or a model folder's manifest).
    pub role: Role,
    /// The cell at the trace's hidden size.
    pub cell: Cell,
    /// Parameter data per value id.
    pub params: Vec<Vec<f32>>,
}

/// Per node, per port of its cell, the argument nodes bound to it (in
/// argument order), in one flat table: every executor reads a batch's
/// bindings row by row, and a table per node and per port (three pointer
/// hops, each a cache miss on a large batch) was a third of the CPU cell
/// entry's time.
#[derive(Clone, Debug)]
pub struct Bindings {
    /// Per node, its first port's entry in `port_start` (nodes + 1).
    node_start: Vec<u32>,
    /// Per port, its first argument's entry in `args` (ports + 1).
    port_start: Vec<u32>,
    args: Vec<NodeId>,
}

impl Bindings {
    fn with_capacity(nodes: usize, args: usize) -> Self {
        let mut node_start = Vec::with_capacity(nodes + 1);
        node_start.push(0);
        Bindings {
            node_start,
            port_start: vec![0],
            args: Vec::with_capacity(args),
        }
    }

    /// Appends the next node's ports, each its bound arguments.
    fn push<P: IntoIterator<Item = NodeId>>(&mut self, ports: impl IntoIterator<Item = P>) {
        for p in ports {
            self.args.extend(p);
            self.port_start.push(self.args.len() as u32);
        }
        self.node_start.push(self.port_start.len() as u32 - 1);
    }

    /// The arguments of `v` bound to port `p` of its cell.
    #[inline]
    pub fn port(&self, v: NodeId, p: usize) -> &[NodeId] {
        let at = self.node_start[v.index()] as usize + p;
        debug_assert!(
            at < self.node_start[v.index() + 1] as usize,
            "port {p} of node {v:?}"
        );
        self.entry(at)
    }

    /// Every port of `v`'s cell, each its bound arguments.
    pub fn ports(&self, v: NodeId) -> impl ExactSizeIterator<Item = &[NodeId]> + '_ {
        let (lo, hi) = (
            self.node_start[v.index()] as usize,
            self.node_start[v.index() + 1] as usize,
        );
        (lo..hi).map(|at| self.entry(at))
    }

    /// The arguments of port entry `at` (a node's first port's entry plus the port).
    #[inline]
    fn entry(&self, at: usize) -> &[NodeId] {
        &self.args[self.port_start[at] as usize..self.port_start[at + 1] as usize]
    }
}

/// Cells, parameters and port bindings of a trace.
pub struct Model {
    /// The workload.
    pub workload: Workload,
    /// Hidden size.
    pub hidden: usize,
    /// Roles, in the workload's order.
    pub roles: Vec<RoleModel>,
    /// Role index of every trace type.
    pub type_role: Vec<usize>,
    /// Per node, per port of its cell, the argument nodes bound to it.
    pub bindings: Bindings,
    seed: u64,
    /// `(row, label)` of every node when the trace has recorded data (the
    /// recorded values, the seeded ones where a node has none); empty otherwise.
    data: Vec<(u32, u32)>,
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

/// Builds the model of `trace` (cells and seeded weights).
pub fn model(trace: &Trace, cells: &CellLibrary, seed: u64) -> Result<Model, ReplayError> {
    Model::new(trace, cells, seed)
}

impl Model {
    /// Builds the model of `trace`: its workload must be one of the zoo (that is
    /// where the cells behind its types come from), every type a role of it,
    /// every node's arguments bindable to its cell's ports.
    pub fn new(trace: &Trace, cells: &CellLibrary, seed: u64) -> Result<Model, ReplayError> {
        let w = cells
            .workload(&trace.workload)
            .ok_or_else(|| ReplayError::NoCells(trace.workload.clone()))?;
        let g = &trace.graph;
        let hidden = match trace.meta.hidden {
            Some(h) => h as usize,
            None => hidden_from_names(g).ok_or(ReplayError::NoHidden)?,
        };
        let mut roles = Vec::with_capacity(w.roles.len());
        for (ri, r) in w.roles.iter().enumerate() {
            let cell = cells.instantiate(&r.cell, hidden)?;
            let params = init_params(&cell, seed, ri as u64);
            roles.push(RoleModel {
                role: r.clone(),
                cell,
                params,
            });
        }
        // Every feeder's cell can feed the port that lists it (a model
        // folder's `open` checked this already; a cell library given with a
        // zoo trace has not been): the executors index outputs by it.
        let table: Vec<(&str, &[Vec<String>], &Cell)> = roles
            .iter()
            .map(|r| (r.role.role.as_str(), r.role.ports.as_slice(), &r.cell))
            .collect();
        check_feeders(&table).map_err(|m| m.source)?;
        let mut type_role = Vec::with_capacity(g.types().len());
        for (_, op) in g.types().iter() {
            let name = &op.name;
            match w.type_role(name, hidden) {
                Ok(i) => type_role.push(i),
                Err(TypeMismatch::Hidden) => {
                    return Err(ReplayError::HiddenMismatch {
                        type_name: name.clone(),
                        hidden,
                    });
                }
                Err(TypeMismatch::Unknown) => {
                    return Err(ReplayError::UnknownType {
                        type_name: name.clone(),
                        workload: w.name.clone(),
                    });
                }
            }
        }
        let mut bindings = Bindings::with_capacity(g.len(), g.num_edges());
        for v in g.nodes() {
            let r = &roles[type_role[g.node_type(v).index()]];
            let arg_roles: Vec<&str> = g
                .args(v)
                .iter()
                .map(|a| w.roles[type_role[g.node_type(*a).index()]].role.as_str())
                .collect();
            let b = bind_ports(&r.role, &r.cell, &arg_roles)
                .map_err(|source: BindError| ReplayError::Bind { node: v.0, source })?;
            bindings.push(b.iter().map(|ps| ps.iter().map(|&p| g.args(v)[p])));
        }
        let mut model = Model {
            workload: w,
            hidden,
            roles,
            type_role,
            bindings,
            seed,
            data: Vec::new(),
        };
        if trace.has_data() {
            model.data = g
                .nodes()
                .map(|v| model.recorded_data(trace, v))
                .collect::<Result<_, _>>()?;
        }
        Ok(model)
    }

    /// Node `v`'s `(row, label)` from the trace's recorded data, checked against
    /// its cell: a token id needs a lookup and becomes the row `min(id, rows -
    /// 1)` (ids are frequency ranks, so every id past the table shares its last
    /// row, the unknown-word row); a label needs a loss and must be one of its
    /// classes. Values not recorded are the seeded ones.
    fn recorded_data(&self, trace: &Trace, v: NodeId) -> Result<(u32, u32), ReplayError> {
        let (seeded_row, seeded_label) = self.seeded_data(v);
        let d = trace.node_data(v);
        let cell = &self.role_of(&trace.graph, v).cell;
        // First dimension of the first operand of the cell's `kind` ops
        // (lookup: table rows, pick_loss: classes); the smallest if several.
        let dim = |kind: PrimOp| {
            cell.ops
                .iter()
                .filter(|op| op.kind == kind)
                .filter_map(|op| cell.values[op.args.first()?.index()].shape.first().copied())
                .min()
        };
        let err = |message: String| ReplayError::NodeData { node: v.0, message };
        let row = match d.id {
            None => seeded_row,
            Some(id) => {
                let rows = dim(PrimOp::Lookup).ok_or_else(|| {
                    err(format!(
                        "has a token id ({id}) but its cell {} has no lookup",
                        cell.name
                    ))
                })?;
                id.min(u32::try_from(rows.max(1) - 1).unwrap_or(u32::MAX))
            }
        };
        let label = match d.label {
            None => seeded_label,
            Some(label) => {
                let classes = dim(PrimOp::PickLoss).ok_or_else(|| {
                    err(format!(
                        "has a label ({label}) but its cell {} has no loss",
                        cell.name
                    ))
                })?;
                if label as usize >= classes {
                    return Err(err(format!(
                        "label {label} is not a class of its cell {} ({classes} classes)",
                        cell.name
                    )));
                }
                label
            }
        };
        Ok((row, label))
    }

    /// Replaces the seeded parameters with `weights` (a model folder's
    /// `weights.safetensors`), found by each cell parameter's name; a
    /// missing or misshapen tensor is an error naming it and the file.
    /// Parameters of the same name in several roles read the same tensor
    /// (a weight the model shares; training keeps them equal, see
    /// [`Model::tied_params`]).
    pub fn load_weights(&mut self, weights: &crate::modeldir::Tensors) -> Result<(), ReplayError> {
        for rm in &mut self.roles {
            for (vi, v) in rm.cell.values.iter().enumerate() {
                if !matches!(v.kind, ValueKind::Param) {
                    continue;
                }
                let why = format!(
                    "parameter `{}` of cell `{}` (role {})",
                    v.name, rm.cell.name, rm.role.role
                );
                let t = weights.require(&v.name, &v.shape, &why)?;
                rm.params[vi] = t.data.clone();
            }
        }
        Ok(())
    }

    /// Groups of `(role, value id)` holding a parameter of the same name in
    /// several roles (model folders share a weight this way), sorted; empty
    /// for the zoo, whose roles each own their parameters.
    pub fn tied_params(&self) -> Vec<Vec<(usize, usize)>> {
        if !self.workload.imported {
            return Vec::new();
        }
        let mut by_name: std::collections::BTreeMap<&str, Vec<(usize, usize)>> =
            std::collections::BTreeMap::new();
        for (ri, rm) in self.roles.iter().enumerate() {
            for (vi, v) in rm.cell.values.iter().enumerate() {
                if matches!(v.kind, ValueKind::Param) {
                    by_name.entry(&v.name).or_default().push((ri, vi));
                }
            }
        }
        by_name.into_values().filter(|g| g.len() > 1).collect()
    }

    /// Role of node `v`.
    pub fn role_of(&self, g: &Graph, v: NodeId) -> &RoleModel {
        &self.roles[self.type_role[g.node_type(v).index()]]
    }

    /// The lookup row and loss label of node `v`: the trace's recorded values
    /// (the row as `min(id, rows - 1)`), else derived from the seed. The
    /// kernels take the row modulo the table's rows and the label modulo the
    /// classes.
    pub fn node_data(&self, v: NodeId) -> (u32, u32) {
        match self.data.get(v.index()) {
            Some(&d) => d,
            None => self.seeded_data(v),
        }
    }

    /// The seeded lookup row and loss label of node `v`.
    fn seeded_data(&self, v: NodeId) -> (u32, u32) {
        let h = mix(self.seed ^ mix(u64::from(v.0) + 1));
        ((h & 0xFFFF_FFFF) as u32, (h >> 32) as u32)
    }
}

pub(crate) fn hidden_from_names(g: &Graph) -> Option<usize> {
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
