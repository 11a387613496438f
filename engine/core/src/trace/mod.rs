//! Trace file format v2: the operator-typed dataflow graph of one mini-batch.
//!
//! ```json
//! {"format": "batchlab-trace", "version": 2,
//!  "workload": "tree-lstm",
//!  "meta": {"batch_size": 32, "hidden": 64, "dataset": "sst-train", "seed": 7, "level": "cell"},
//!  "types": [{"name": "embed.word[h=64]", "batchable": true}],
//!  "nodes": [{"type": 0, "args": [], "instance": 0, "data": {"id": 17}}]}
//! ```
//!
//! Type id = index in `types`, node id = index in `nodes`. `meta`, `instance`,
//! `batchable` (default true) and `data` (version 2: the token id a lookup
//! reads, the label a loss reads) are optional so traces made by other tools
//! are accepted; unknown fields anywhere else are rejected. Version 1 (no
//! `data`) is still read, and the writer emits version 1 when no node has data,
//! so such traces keep their bytes. The full specification is
//! `docs/trace-format.md`. The writer is canonical (fixed key order, one node
//! per line), so write → read → write reproduces the bytes.

mod read;
mod write;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::graph::{Graph, GraphError, NodeId};

/// The value of the `format` field.
pub const FORMAT: &str = "batchlab-trace";
/// The newest version this build reads and writes (it reads every version
/// from 1); traces without node data are written as version 1.
pub const VERSION: u32 = 2;

/// Granularity of a trace's nodes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// One node per cell invocation (static subgraph) or free-standing op.
    Cell,
    /// One node per primitive op: cells expanded (DyNet without static subgraphs).
    Op,
}

impl Level {
    /// The name used in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Level::Cell => "cell",
            Level::Op => "op",
        }
    }
}

/// Optional provenance of a trace. Unknown keys are kept (sorted) in `extra`, so
/// other tools may record what they like.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceMeta {
    /// Number of input samples in the mini-batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// Hidden size of the cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<u32>,
    /// Data source name (e.g. `sst-train`, `synthetic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// Seed that chose the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Node granularity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
    /// Any other keys, in sorted order.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The run-time data of one node as recorded from real inputs (the `data`
/// field of version 2): what its cell reads besides its arguments. Absent
/// values are derived from the replay seed instead (`engine_replay::model::Model::node_data`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeData {
    /// Token id (word or character) read by the node's lookups: a frequency
    /// rank, see `data/README.md`.
    pub id: Option<u32>,
    /// Gold class read by the node's loss.
    pub label: Option<u32>,
}

impl NodeData {
    /// True when neither value is present.
    pub fn is_empty(&self) -> bool {
        self.id.is_none() && self.label.is_none()
    }
}

/// A trace: workload name, provenance, the graph and the nodes' recorded data.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Workload that produced it (the engine knows the cells of its own workloads).
    pub workload: String,
    /// Provenance.
    pub meta: TraceMeta,
    /// The dataflow graph.
    pub graph: Graph,
    /// Recorded data per node, indexed by node id; empty when no node has any
    /// (synthetic data, version-1 traces), otherwise one entry per node.
    pub data: Vec<NodeData>,
}

/// Errors reading or writing a trace. Every variant names the file.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The file could not be read or written.
    #[error("{file}: {source}")]
    Io {
        /// File name.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Not JSON, or JSON not of the trace's shape (unknown field, wrong type...).
    #[error("{file}:{line}:{column}: {message}")]
    Json {
        /// File name.
        file: String,
        /// 1-based line (0 when unknown).
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// `format` is not `batchlab-trace`.
    #[error("{file}: field `format`: expected \"{FORMAT}\", found {found:?}")]
    Format {
        /// File name.
        file: String,
        /// The value found.
        found: String,
    },
    /// `version` is not one this build reads.
    #[error(
        "{file}: field `version`: unsupported version {found} (this build reads versions 1 to {VERSION})"
    )]
    Version {
        /// File name.
        file: String,
        /// The value found.
        found: u64,
    },
    /// The graph is structurally invalid.
    #[error("{file}: {source}")]
    Graph {
        /// File name.
        file: String,
        /// Cause.
        source: GraphError,
    },
    /// A node reads a later node: a trace lists every node after its
    /// arguments (the executors and the export walk nodes in id order).
    #[error(
        "{file}: node {node}: argument #{position} = {arg} is not an earlier node (a trace lists every node after its arguments)"
    )]
    ForwardArgument {
        /// The trace file.
        file: String,
        /// The node.
        node: u32,
        /// The argument's position in its list.
        position: usize,
        /// The later node it reads.
        arg: u32,
    },
    /// A `meta` size of 0 (a hidden size or a batch holds at least one).
    #[error("{file}: field `meta.{field}`: 0; a trace's {field} is at least 1")]
    ZeroSize {
        /// File name.
        file: String,
        /// `hidden` or `batch_size`.
        field: &'static str,
    },
    /// A node's `data` field is not allowed or malformed.
    #[error("{file}: node {node}: field `data`: {message}")]
    Data {
        /// File name.
        file: String,
        /// The node.
        node: u32,
        /// What is wrong.
        message: String,
    },
}

impl Trace {
    /// A trace without recorded node data.
    pub fn new(workload: impl Into<String>, meta: TraceMeta, graph: Graph) -> Trace {
        Trace {
            workload: workload.into(),
            meta,
            graph,
            data: Vec::new(),
        }
    }

    /// The recorded data of node `v` (empty when it has none).
    pub fn node_data(&self, v: crate::graph::NodeId) -> NodeData {
        self.data.get(v.index()).copied().unwrap_or_default()
    }

    /// Numbers of nodes with a recorded token id and with a recorded label.
    pub fn data_counts(&self) -> (u64, u64) {
        let ids = self.data.iter().filter(|d| d.id.is_some()).count();
        let labels = self.data.iter().filter(|d| d.label.is_some()).count();
        (ids as u64, labels as u64)
    }

    /// True when some node has recorded data.
    pub fn has_data(&self) -> bool {
        self.data
            .iter()
            .take(self.graph.len())
            .any(|d| !d.is_empty())
    }

    /// Parses a trace from JSON text; `file` names the source in errors.
    pub fn from_json(text: &str, file: &str) -> Result<Trace, TraceError> {
        read::parse(text, file)
    }

    /// Reads and validates a trace file.
    pub fn read(path: &Path) -> Result<Trace, TraceError> {
        let file = path.display().to_string();
        let text = crate::io::read_to_string(path).map_err(|source| TraceError::Io {
            file: file.clone(),
            source,
        })?;
        Self::from_json(&text, &file)
    }

    /// The instances (samples) the trace holds, in increasing order.
    pub fn instances(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .graph
            .nodes()
            .filter_map(|v| self.graph.instance(v))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The part of the trace made by the samples `keep` (renumbered 0.. in
    /// the order given): their nodes, and every node of no sample that
    /// reads one of them, with its other arguments dropped (a sum of the
    /// batch's losses becomes the sum of these samples' losses). Node
    /// order and data are kept. How `engine train` cuts a recorded model's
    /// trace into mini-batches.
    pub fn select_instances(&self, keep: &[u32]) -> Result<Trace, TraceError> {
        let g = &self.graph;
        let rank: std::collections::HashMap<u32, u32> = keep
            .iter()
            .enumerate()
            .map(|(r, &i)| (i, r as u32))
            .collect();
        let mut new_id: Vec<Option<NodeId>> = vec![None; g.len()];
        let mut b = crate::graph::GraphBuilder::with_types(g.types().clone());
        let mut data = Vec::new();
        let mut args = Vec::new();
        for v in g.nodes() {
            let inst = g.instance(v);
            let keep_it = match inst {
                Some(i) => rank.contains_key(&i),
                None => g.args(v).iter().any(|a| new_id[a.index()].is_some()),
            };
            if !keep_it {
                continue;
            }
            args.clear();
            args.extend(g.args(v).iter().filter_map(|a| new_id[a.index()]));
            new_id[v.index()] = Some(b.add_node(
                g.node_type(v),
                &args,
                inst.and_then(|i| rank.get(&i).copied()),
            ));
            if !self.data.is_empty() {
                data.push(self.node_data(v));
            }
        }
        let graph = b.finish().map_err(|source| TraceError::Graph {
            file: "<selected samples>".into(),
            source,
        })?;
        let mut meta = self.meta.clone();
        meta.batch_size = Some(keep.len() as u32);
        Ok(Trace {
            workload: self.workload.clone(),
            meta,
            graph,
            data,
        })
    }

    /// The canonical JSON text of this trace.
    pub fn to_json(&self) -> String {
        write::to_json(self)
    }

    /// Writes the canonical JSON atomically.
    pub fn write(&self, path: &Path) -> Result<(), TraceError> {
        crate::io::write_atomic(path, self.to_json().as_bytes()).map_err(|source| TraceError::Io {
            file: path.display().to_string(),
            source,
        })
    }
}

#[cfg(test)]
mod tests;
