//! Schedules: the sequence of batches a policy produced, and their validation.

use serde::Serialize;
use thiserror::Error;

use crate::graph::{Graph, NodeId, TypeId};

/// A sequence of batches in flat form: batch `i` is `nodes[starts[i]..starts[i+1]]`,
/// all of type `types[i]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    nodes: Vec<NodeId>,
    starts: Vec<u32>,
    types: Vec<TypeId>,
}

impl Schedule {
    /// An empty schedule.
    pub fn new() -> Self {
        Schedule {
            nodes: Vec::new(),
            starts: vec![0],
            types: Vec::new(),
        }
    }

    /// The node buffer batches are appended to (for [`Frontier::step`](super::Frontier::step)).
    pub(crate) fn buffer(&mut self) -> &mut Vec<NodeId> {
        &mut self.nodes
    }

    /// Closes the batch made of the nodes appended since the last close.
    pub(crate) fn close_batch(&mut self, ty: TypeId) {
        self.starts.push(self.nodes.len() as u32);
        self.types.push(ty);
    }

    /// The last batch's nodes, to reorder (a batch is a set: its order is
    /// only the order its rows run in).
    pub(crate) fn last_batch_mut(&mut self) -> &mut [NodeId] {
        let n = self.starts.len();
        let lo = if n >= 2 {
            self.starts[n - 2] as usize
        } else {
            0
        };
        &mut self.nodes[lo..]
    }

    /// Appends a batch (for tools building schedules by hand, and tests).
    pub fn push(&mut self, ty: TypeId, nodes: &[NodeId]) {
        self.nodes.extend_from_slice(nodes);
        self.close_batch(ty);
    }

    /// Number of batches.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// True when there is no batch.
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    /// Batch `i`: its type and nodes.
    pub fn batch(&self, i: usize) -> (TypeId, &[NodeId]) {
        let (lo, hi) = (self.starts[i] as usize, self.starts[i + 1] as usize);
        (self.types[i], &self.nodes[lo..hi])
    }

    /// All batches in order.
    pub fn batches(&self) -> impl Iterator<Item = (TypeId, &[NodeId])> {
        (0..self.len()).map(|i| self.batch(i))
    }
}

/// Why a schedule is invalid for a graph.
#[derive(Debug, Error, Clone, PartialEq, Eq, Serialize)]
pub enum ScheduleError {
    /// A node id is not in the graph.
    #[error("batch {batch}: node {node} is not in the graph")]
    UnknownNode {
        /// Batch index.
        batch: usize,
        /// Node id.
        node: u32,
    },
    /// A batch is empty.
    #[error("batch {batch} is empty")]
    EmptyBatch {
        /// Batch index.
        batch: usize,
    },
    /// A batch mixes types, or a node's type differs from the batch's.
    #[error("batch {batch}: node {node} has another type than the batch")]
    MixedTypes {
        /// Batch index.
        batch: usize,
        /// Node id.
        node: u32,
    },
    /// A non-batchable type's batch has several nodes.
    #[error("batch {batch}: {size} nodes of non-batchable type {ty}")]
    NotBatchable {
        /// Batch index.
        batch: usize,
        /// Batch size.
        size: usize,
        /// Type name.
        ty: String,
    },
    /// A node runs twice.
    #[error("batch {batch}: node {node} already ran in batch {first}")]
    Twice {
        /// Batch index.
        batch: usize,
        /// Node id.
        node: u32,
        /// Where it ran first.
        first: usize,
    },
    /// A node runs before (or with) one of its arguments.
    #[error("batch {batch}: node {node} runs before its argument {arg}")]
    TooEarly {
        /// Batch index.
        batch: usize,
        /// Node id.
        node: u32,
        /// The argument not yet computed.
        arg: u32,
    },
    /// Some nodes never run.
    #[error("{missing} nodes never run (first: node {first})")]
    Incomplete {
        /// How many.
        missing: usize,
        /// Smallest missing id.
        first: u32,
    },
}

/// Checks that `s` runs every node of `g` exactly once, after all its arguments
/// (in an earlier batch), one type per batch, and non-batchable types alone.
pub fn validate_schedule(g: &Graph, s: &Schedule) -> Result<(), ScheduleError> {
    const NOT_RUN: u32 = u32::MAX;
    let mut ran_in = vec![NOT_RUN; g.len()];
    for (b, (ty, nodes)) in s.batches().enumerate() {
        if nodes.is_empty() {
            return Err(ScheduleError::EmptyBatch { batch: b });
        }
        if !g.types().batchable(ty) && nodes.len() > 1 {
            return Err(ScheduleError::NotBatchable {
                batch: b,
                size: nodes.len(),
                ty: g.types().name(ty).to_string(),
            });
        }
        for &v in nodes {
            if v.index() >= g.len() {
                return Err(ScheduleError::UnknownNode {
                    batch: b,
                    node: v.0,
                });
            }
            if g.node_type(v) != ty {
                return Err(ScheduleError::MixedTypes {
                    batch: b,
                    node: v.0,
                });
            }
            if ran_in[v.index()] != NOT_RUN {
                return Err(ScheduleError::Twice {
                    batch: b,
                    node: v.0,
                    first: ran_in[v.index()] as usize,
                });
            }
            for &a in g.args(v) {
                // An argument must have run in a strictly earlier batch.
                if ran_in[a.index()] == NOT_RUN || ran_in[a.index()] as usize >= b {
                    return Err(ScheduleError::TooEarly {
                        batch: b,
                        node: v.0,
                        arg: a.0,
                    });
                }
            }
            // Marked at once, so a duplicate or an argument inside this same batch
            // is caught by the checks above.
            ran_in[v.index()] = b as u32;
        }
    }
    let missing: Vec<usize> = (0..g.len()).filter(|&v| ran_in[v] == NOT_RUN).collect();
    if let Some(&first) = missing.first() {
        return Err(ScheduleError::Incomplete {
            missing: missing.len(),
            first: first as u32,
        });
    }
    Ok(())
}
