//! Seeded random multi-type DAGs: the hard case for batching policies that no
//! workload of the zoo covers — many interleaved types, no repeating structure.
//!
//! Node i (in id order) gets a type drawn uniformly from `types`, and
//! 1..=`max_args` distinct arguments drawn uniformly from the `window` nodes
//! before it (fewer near the start; node 0 of each instance is a source). A
//! small window gives long dependency chains (a deep graph, a large lower
//! bound); a large one a wide, shallow graph. With `instances` > 1 the nodes
//! are split into that many independent DAGs of (almost) equal size, like the
//! samples of a mini-batch. Every type is batchable. The draws come from one
//! xoshiro256++ stream seeded with `seed`, in a fixed order, so the same
//! parameters give the same graph on every machine.

use engine::graph::{GraphBuilder, GraphError, NodeId};
use engine::trace::{Level, Trace, TraceMeta};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use thiserror::Error;

/// Workload name written into generated traces.
pub const WORKLOAD: &str = "random-dag";

/// Generator parameters (all recorded in the trace's `meta`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DagParams {
    /// Nodes in all.
    pub nodes: usize,
    /// Number of types (named `t0`, `t1`, ...).
    pub types: usize,
    /// Arguments are drawn from this many preceding nodes of the same instance.
    pub window: usize,
    /// Most arguments per node (at least 1 for every non-first node).
    pub max_args: usize,
    /// Independent DAGs the nodes are split into.
    pub instances: usize,
    /// Seed of the draws.
    pub seed: u64,
}

impl Default for DagParams {
    /// The acceptance graph of issue 16: 3000 nodes over 5 types.
    fn default() -> Self {
        DagParams {
            nodes: 3000,
            types: 5,
            window: 48,
            max_args: 2,
            instances: 1,
            seed: 1,
        }
    }
}

/// Parameters the generator refuses.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DagError {
    /// A parameter out of range.
    #[error("{field} must be {rule}, got {value}")]
    Param {
        /// Parameter name (as on the command line).
        field: &'static str,
        /// What it must be.
        rule: &'static str,
        /// The value given.
        value: usize,
    },
    /// The graph builder refused the graph (cannot happen for valid parameters).
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// Generates the DAG as a trace (workload [`WORKLOAD`], cell level).
pub fn random_dag(p: &DagParams) -> Result<Trace, DagError> {
    let check = |field, ok: bool, rule, value| {
        if ok {
            Ok(())
        } else {
            Err(DagError::Param { field, rule, value })
        }
    };
    check(
        "nodes",
        // Ten million nodes make a trace file of about a gigabyte.
        (1..=10_000_000).contains(&p.nodes),
        "in 1..=10000000",
        p.nodes,
    )?;
    check(
        "types",
        (1..=1000).contains(&p.types),
        "in 1..=1000",
        p.types,
    )?;
    check("window", p.window >= 1, "at least 1", p.window)?;
    check("max-args", p.max_args >= 1, "at least 1", p.max_args)?;
    check(
        "instances",
        (1..=p.nodes).contains(&p.instances),
        "between 1 and the node count",
        p.instances,
    )?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(p.seed);
    let mut b = GraphBuilder::new();
    let types: Vec<_> = (0..p.types)
        .map(|t| b.types_mut().push(&format!("t{t}"), true))
        .collect::<Result<_, _>>()?;
    b.reserve(p.nodes, p.nodes * p.max_args);
    let mut args: Vec<NodeId> = Vec::with_capacity(p.max_args);
    for inst in 0..p.instances {
        // Instance `inst` holds nodes [lo, hi): sizes differ by at most one.
        let lo = p.nodes * inst / p.instances;
        let hi = p.nodes * (inst + 1) / p.instances;
        for i in lo..hi {
            let ty = types[rng.random_range(0..p.types)];
            args.clear();
            let before = (i - lo).min(p.window);
            if before > 0 {
                let k = rng.random_range(1..=p.max_args.min(before));
                while args.len() < k {
                    let a = NodeId((i - 1 - rng.random_range(0..before)) as u32);
                    if !args.contains(&a) {
                        args.push(a);
                    }
                }
                args.sort_unstable();
            }
            b.add_node(ty, &args, Some(inst as u32));
        }
    }
    let graph = b.finish()?;
    let mut meta = TraceMeta {
        batch_size: Some(p.instances as u32),
        dataset: Some("synthetic".into()),
        seed: Some(p.seed),
        level: Some(Level::Cell),
        ..TraceMeta::default()
    };
    let params = serde_json::to_value(p).unwrap_or(serde_json::Value::Null);
    meta.extra.insert("random_dag".into(), params);
    Ok(Trace::new(WORKLOAD, meta, graph))
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::graph::lower_bound;

    #[test]
    fn same_parameters_same_graph_and_every_node_but_the_first_has_an_argument() {
        let p = DagParams {
            nodes: 500,
            instances: 2,
            ..DagParams::default()
        };
        let a = random_dag(&p).unwrap();
        assert_eq!(a, random_dag(&p).unwrap());
        let g = &a.graph;
        assert_eq!(g.len(), 500);
        let sources = g.nodes().filter(|&v| g.args(v).is_empty()).count();
        assert_eq!(sources, 2, "one source per instance");
        assert_eq!(g.num_instances(), 2);
        let other = random_dag(&DagParams { seed: 2, ..p }).unwrap();
        assert_ne!(a.graph, other.graph);
        assert!(lower_bound(g).total > 5);
    }

    #[test]
    fn bad_parameters_name_the_field() {
        let e = random_dag(&DagParams {
            types: 0,
            ..DagParams::default()
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "types must be in 1..=1000, got 0");
        let e = random_dag(&DagParams {
            instances: 0,
            ..DagParams::default()
        })
        .unwrap_err();
        assert!(e.to_string().starts_with("instances must be"), "{e}");
    }
}
