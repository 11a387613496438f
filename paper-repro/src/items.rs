//! The figures and tables paper-repro regenerates ("items"), each backed by
//! one experiment spec, and the `--only` selection.

use crate::error::{ReproError, Result};

/// Which paper an item reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paper {
    /// ED-Batch (Chen et al.).
    EdBatch,
    /// Cavs (Xu, Zhang et al.).
    Cavs,
    /// VPPS (virtual persistent processor specialization).
    Vpps,
    /// None: batchlab beside the real systems (item `peers`).
    Workbench,
}

impl Paper {
    /// Short name, as in `published/<name>.yaml`.
    pub fn name(self) -> &'static str {
        match self {
            Paper::EdBatch => "ed-batch",
            Paper::Cavs => "cavs",
            Paper::Vpps => "vpps",
            Paper::Workbench => "batchlab",
        }
    }
}

/// One figure or table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    /// Name used by `--only` and as the output file stem.
    pub name: &'static str,
    /// Name of the spec (`<spec>.yaml`, rows `<spec>.json`).
    pub spec: &'static str,
    /// Paper reproduced.
    pub paper: Paper,
    /// Heading in REPORT.md.
    pub title: &'static str,
    /// Only measured on a CUDA device (`--device cuda`).
    pub cuda_only: bool,
    /// Runs the peer frameworks: needs the peers' Python environment
    /// (skipped, saying why, without it).
    pub peers: bool,
}

/// Every item, in report order.
pub const ITEMS: [Item; 19] = [
    item(
        "fig7",
        Paper::EdBatch,
        "ED-Batch Fig. 7: batches per policy, normalised to the lower bound",
    ),
    item(
        "fig7-gap",
        Paper::EdBatch,
        "Fig. 7 extended: best-known schedules, certified bounds and the FSM distilled from them",
    ),
    item(
        "table2",
        Paper::EdBatch,
        "ED-Batch Table 2: static-subgraph memory copies, DyNet order vs PQ-tree layout",
    ),
    item(
        "table4",
        Paper::EdBatch,
        "ED-Batch Table 4: RL training time and episodes",
    ),
    item(
        "table5",
        Paper::EdBatch,
        "ED-Batch Table 5: static-subgraph compile time",
    ),
    item(
        "fig6",
        Paper::EdBatch,
        "ED-Batch Fig. 6: inference throughput per workload, executor and hidden size",
    ),
    item(
        "fig9",
        Paper::EdBatch,
        "ED-Batch Fig. 9: time decomposition (construction, scheduling, execution)",
    ),
    item(
        "table6",
        Paper::EdBatch,
        "ED-Batch Table 6: TreeLSTM throughput against the unbatched reference",
    ),
    item(
        "cavs-fig8",
        Paper::Cavs,
        "Cavs Fig. 8 / Table 1 style: training throughput vs batch size",
    ),
    item(
        "cavs-fig10",
        Paper::Cavs,
        "Cavs Fig. 10: lazy batching and fusion, one at a time over a baseline (training)",
    ),
    item(
        "policies",
        Paper::EdBatch,
        "Learned FSMs (ED-Batch's trainer) against the heuristics, and on other batch sizes",
    ),
    item(
        "policies-exact",
        Paper::EdBatch,
        "Small graphs: the exact optimum against the lower bound, the heuristics and the FSMs",
    ),
    item(
        "policies-hard",
        Paper::EdBatch,
        "Hard graphs: certified bounds, best-known schedules and three FSM trainers",
    ),
    item(
        "policies-unseen",
        Paper::EdBatch,
        "Generalisation: an FSM distilled on one trace, run on unseen ones",
    ),
    Item {
        name: "optimise-scaling",
        spec: "optimise-scaling",
        paper: Paper::Workbench,
        title: "The offline optimiser on graphs of 1k-65k nodes: time, beam width, gap",
        cuda_only: false,
        peers: false,
    },
    Item {
        name: "vpps",
        spec: "vpps",
        paper: Paper::Vpps,
        title: "VPPS: the persistent kernel beside DyNet, Cavs and ED-Batch on the GPU (inference)",
        cuda_only: true,
        peers: false,
    },
    Item {
        name: "vpps-train",
        spec: "vpps-train",
        paper: Paper::Vpps,
        title: "VPPS Fig. 8/11/12: training throughput of the persistent kernel on the GPU",
        cuda_only: true,
        peers: false,
    },
    Item {
        name: "peers",
        spec: "peers",
        paper: Paper::Workbench,
        title: "Peers: the real DyNet and PyTorch beside batchlab's executors (same weights, same run)",
        cuda_only: false,
        peers: true,
    },
    Item {
        name: "peers-train",
        spec: "peers-train",
        paper: Paper::Workbench,
        title: "Peers, training: the real DyNet and PyTorch beside batchlab (same weights, same gradients)",
        cuda_only: false,
        peers: true,
    },
];

const fn item(name: &'static str, paper: Paper, title: &'static str) -> Item {
    Item {
        name,
        spec: name,
        paper,
        title,
        cuda_only: false,
        peers: false,
    }
}

/// The valid item names, comma separated (for messages).
pub fn names() -> String {
    ITEMS.iter().map(|i| i.name).collect::<Vec<_>>().join(", ")
}

/// The item called `name`.
pub fn find(name: &str) -> Option<&'static Item> {
    ITEMS.iter().find(|i| i.name == name)
}

/// The items `--only` selects, in report order (all when `only` is `None`).
/// `only` is a comma-separated list; unknown names are an error listing the
/// valid ones.
pub fn select(only: Option<&str>) -> Result<Vec<&'static Item>> {
    let Some(only) = only else {
        return Ok(ITEMS.iter().collect());
    };
    let mut wanted = Vec::new();
    for name in only.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let item = find(name).ok_or_else(|| ReproError::UnknownItem {
            name: name.to_string(),
            valid: names(),
        })?;
        wanted.push(item.name);
    }
    if wanted.is_empty() {
        return Err(ReproError::EmptyOnly { valid: names() });
    }
    Ok(ITEMS.iter().filter(|i| wanted.contains(&i.name)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_keeps_report_order_and_rejects_unknown_names() {
        let s = select(Some("table2, fig7")).unwrap();
        assert_eq!(
            s.iter().map(|i| i.name).collect::<Vec<_>>(),
            ["fig7", "table2"]
        );
        assert_eq!(select(None).unwrap().len(), ITEMS.len());
        let e = select(Some("fig7,fig8")).unwrap_err().to_string();
        assert!(e.contains("\"fig8\"") && e.contains("cavs-fig8"), "{e}");
        assert!(select(Some(" , ")).is_err());
    }

    #[test]
    fn names_are_unique() {
        let mut n: Vec<_> = ITEMS.iter().map(|i| i.name).collect();
        n.sort();
        n.dedup();
        assert_eq!(n.len(), ITEMS.len());
    }
}
