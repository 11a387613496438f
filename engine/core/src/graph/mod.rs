//! The instance-level dataflow graph: typed nodes with argument lists.
//!
//! The hot representation is compressed sparse rows (CSR): one flat vector of
//! arguments and one of users, each with an offset vector, so `args(v)` and
//! `users(v)` are O(1) slices and a frontier update touches contiguous memory.
//! Graphs are built with [`GraphBuilder`], which validates everything a trace file
//! could get wrong (indices out of range, self-loops, cycles) and computes a
//! deterministic topological order once.

mod analysis;
mod examples;
mod ids;
mod topo;
mod types;

pub use analysis::{GraphStats, LowerBound, TypeStats, depths, lower_bound, nodes_of_type, stats};
pub use examples::{ed_batch_fig1, ed_batch_fig1_named, from_rows};
pub use ids::{NodeId, TypeId};
pub use types::{OpType, TypeTable};

use thiserror::Error;

/// Sentinel stored for nodes that belong to no input sample (e.g. the final loss sum).
const NO_INSTANCE: u32 = u32::MAX;

/// Structural errors. Each names the offending node or type by index.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GraphError {
    /// A node's type index is not in the type table.
    #[error("node {node}: type {ty} out of range (the trace has {types} types)")]
    TypeOutOfRange {
        /// Offending node.
        node: u32,
        /// The bad type index.
        ty: u32,
        /// Number of types.
        types: u32,
    },
    /// A node's argument index is not a node.
    #[error("node {node}: argument #{position} = {arg} out of range (the trace has {nodes} nodes)")]
    ArgOutOfRange {
        /// Offending node.
        node: u32,
        /// Position in the node's argument list.
        position: u32,
        /// The bad node index.
        arg: u32,
        /// Number of nodes.
        nodes: u32,
    },
    /// A node lists itself as an argument.
    #[error("node {node}: lists itself as an argument (self-loop)")]
    SelfLoop {
        /// Offending node.
        node: u32,
    },
    /// The graph has a cycle; `nodes` walks it in dataflow order and repeats the first.
    #[error("cycle through nodes {}", fmt_cycle(.nodes))]
    Cycle {
        /// The nodes on one cycle, in dataflow order, first node repeated at the end.
        nodes: Vec<u32>,
    },
    /// The same type name appears twice in the type list.
    #[error("type {second}: duplicate type name {name:?} (first defined as type {first})")]
    DuplicateType {
        /// The repeated name.
        name: String,
        /// Index of its first definition.
        first: u32,
        /// Index of the repeat.
        second: u32,
    },
    /// A type was interned twice with different `batchable` flags.
    #[error("type {name:?} interned as both batchable and non-batchable")]
    ConflictingBatchable {
        /// The type name.
        name: String,
    },
    /// A node's instance id collides with the reserved "no instance" value.
    #[error("node {node}: instance {instance} out of range (max {})", u32::MAX - 1)]
    InstanceOutOfRange {
        /// Offending node.
        node: u32,
        /// The bad instance id.
        instance: u32,
    },
    /// More than `u32::MAX - 1` nodes, edges or types.
    #[error("graph too large: more than 2^32 - 2 nodes, edges or types")]
    TooLarge,
}

fn fmt_cycle(nodes: &[u32]) -> String {
    nodes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// A validated, acyclic, typed dataflow graph in CSR form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    types: TypeTable,
    node_type: Vec<TypeId>,
    instance: Vec<u32>,
    arg_start: Vec<u32>,
    args: Vec<NodeId>,
    user_start: Vec<u32>,
    users: Vec<NodeId>,
    topo: Vec<NodeId>,
    /// Every node's arguments have smaller ids, so id order is a topological
    /// order (graphs built node by node after their arguments, as recorded
    /// traces are): per-run analyses then walk ids instead of `topo`.
    ids_topological: bool,
}

/// True when every argument's id is below its user's.
fn ids_topological(arg_start: &[u32], args: &[NodeId]) -> bool {
    arg_start.windows(2).enumerate().all(|(v, w)| {
        args[w[0] as usize..w[1] as usize]
            .iter()
            .all(|a| a.index() < v)
    })
}

impl Graph {
    /// A graph without nodes.
    pub fn empty() -> Graph {
        Graph {
            types: TypeTable::default(),
            node_type: Vec::new(),
            instance: Vec::new(),
            arg_start: vec![0],
            args: Vec::new(),
            user_start: vec![0],
            users: Vec::new(),
            topo: Vec::new(),
            ids_topological: true,
        }
    }

    /// The type table.
    pub fn types(&self) -> &TypeTable {
        &self.types
    }

    /// The same nodes and types with every edge reversed: a node's arguments
    /// are its users. The reverse of the topological order is topological
    /// here. Batching the backward pass is a batching problem on this graph
    /// (a node's gradient is complete once all its users have run).
    pub fn reversed(&self) -> Graph {
        Graph {
            types: self.types.clone(),
            node_type: self.node_type.clone(),
            instance: self.instance.clone(),
            arg_start: self.user_start.clone(),
            args: self.users.clone(),
            user_start: self.arg_start.clone(),
            users: self.args.clone(),
            topo: self.topo.iter().rev().copied().collect(),
            ids_topological: ids_topological(&self.user_start, &self.users),
        }
    }

    /// Whether id order is a topological order (every argument's id is below
    /// its user's), known since the graph was built.
    #[inline]
    pub fn ids_topological(&self) -> bool {
        self.ids_topological
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.node_type.len()
    }

    /// True for a graph without nodes.
    pub fn is_empty(&self) -> bool {
        self.node_type.is_empty()
    }

    /// Number of argument edges (a node using the same argument twice counts twice).
    pub fn num_edges(&self) -> usize {
        self.args.len()
    }

    /// Type of node `v`.
    #[inline]
    pub fn node_type(&self, v: NodeId) -> TypeId {
        self.node_type[v.index()]
    }

    /// All node types, indexed by node.
    pub fn node_types(&self) -> &[TypeId] {
        &self.node_type
    }

    /// The input sample node `v` came from, if any.
    #[inline]
    pub fn instance(&self, v: NodeId) -> Option<u32> {
        let i = self.instance[v.index()];
        (i != NO_INSTANCE).then_some(i)
    }

    /// Arguments of `v`, in order (an argument may repeat).
    #[inline]
    pub fn args(&self, v: NodeId) -> &[NodeId] {
        let i = v.index();
        &self.args[self.arg_start[i] as usize..self.arg_start[i + 1] as usize]
    }

    /// Users of `v`: every node listing `v` as an argument, once per listing,
    /// in increasing node order.
    #[inline]
    pub fn users(&self, v: NodeId) -> &[NodeId] {
        let i = v.index();
        &self.users[self.user_start[i] as usize..self.user_start[i + 1] as usize]
    }

    /// Node ids `0..len` in order.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = NodeId> + use<> {
        (0..self.node_type.len() as u32).map(NodeId)
    }

    /// A topological order: Kahn's algorithm seeded with source nodes in id order,
    /// first-in first-out, so it is unique for a given graph.
    pub fn topo_order(&self) -> &[NodeId] {
        &self.topo
    }

    /// Number of distinct instance ids.
    pub fn num_instances(&self) -> usize {
        let mut ids: Vec<u32> = self
            .instance
            .iter()
            .copied()
            .filter(|&i| i != NO_INSTANCE)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    }
}

/// Builds a [`Graph`] node by node; [`GraphBuilder::finish`] validates it.
#[derive(Clone, Debug, Default)]
pub struct GraphBuilder {
    types: TypeTable,
    node_type: Vec<TypeId>,
    instance: Vec<u32>,
    arg_start: Vec<u32>,
    args: Vec<NodeId>,
}

impl GraphBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            arg_start: vec![0],
            ..Self::default()
        }
    }

    /// An empty builder over an existing type table.
    pub fn with_types(types: TypeTable) -> Self {
        Self {
            types,
            arg_start: vec![0],
            ..Self::default()
        }
    }

    /// Reserves room for `nodes` nodes and `edges` argument edges.
    pub fn reserve(&mut self, nodes: usize, edges: usize) {
        self.node_type.reserve(nodes);
        self.instance.reserve(nodes);
        self.arg_start.reserve(nodes);
        self.args.reserve(edges);
    }

    /// The type table, to intern types while building.
    pub fn types_mut(&mut self) -> &mut TypeTable {
        &mut self.types
    }

    /// The type table.
    pub fn types(&self) -> &TypeTable {
        &self.types
    }

    /// Number of nodes added so far.
    pub fn len(&self) -> usize {
        self.node_type.len()
    }

    /// True before the first node.
    pub fn is_empty(&self) -> bool {
        self.node_type.is_empty()
    }

    /// Adds a node. Arguments may name nodes not yet added (a trace may list nodes
    /// in any order); everything is checked in [`finish`](Self::finish).
    pub fn add_node(&mut self, ty: TypeId, args: &[NodeId], instance: Option<u32>) -> NodeId {
        let id = NodeId(self.node_type.len() as u32);
        self.node_type.push(ty);
        self.instance.push(instance.unwrap_or(NO_INSTANCE));
        self.args.extend_from_slice(args);
        self.arg_start.push(self.args.len() as u32);
        id
    }

    /// Reader support: appends one argument of the node being read.
    pub(crate) fn push_raw_arg(&mut self, arg: u32) {
        self.args.push(NodeId(arg));
    }

    /// Reader support: closes the node whose arguments were pushed since the last
    /// close. `instance` is the raw value (`u32::MAX` = none).
    pub(crate) fn close_raw_node(&mut self, ty: u32, instance: u32) {
        self.node_type.push(TypeId(ty));
        self.instance.push(instance);
        self.arg_start.push(self.args.len() as u32);
    }

    /// Reader support: the type list is read independently of the nodes.
    pub(crate) fn replace_types(&mut self, types: TypeTable) {
        self.types = types;
    }

    /// Validates and freezes the graph: type and argument indices in range, no
    /// self-loops, no cycles (the error names the nodes on one), then builds the
    /// user lists and the topological order.
    pub fn finish(self) -> Result<Graph, GraphError> {
        let n = self.node_type.len();
        if n >= NO_INSTANCE as usize || self.args.len() >= u32::MAX as usize {
            return Err(GraphError::TooLarge);
        }
        let num_types = self.types.len() as u32;
        for (v, &ty) in self.node_type.iter().enumerate() {
            if ty.0 >= num_types {
                return Err(GraphError::TypeOutOfRange {
                    node: v as u32,
                    ty: ty.0,
                    types: num_types,
                });
            }
            let (lo, hi) = (self.arg_start[v] as usize, self.arg_start[v + 1] as usize);
            for (position, &a) in self.args[lo..hi].iter().enumerate() {
                if a.index() >= n {
                    return Err(GraphError::ArgOutOfRange {
                        node: v as u32,
                        position: position as u32,
                        arg: a.0,
                        nodes: n as u32,
                    });
                }
                if a.index() == v {
                    return Err(GraphError::SelfLoop { node: v as u32 });
                }
            }
        }
        let (user_start, users) = topo::users_csr(n, &self.arg_start, &self.args);
        let topo = topo::kahn(n, &self.arg_start, &self.args, &user_start, &users)?;
        let ids_topological = ids_topological(&self.arg_start, &self.args);
        Ok(Graph {
            types: self.types,
            node_type: self.node_type,
            instance: self.instance,
            arg_start: self.arg_start,
            args: self.args,
            user_start,
            users,
            topo,
            ids_topological,
        })
    }
}

#[cfg(test)]
mod tests;
