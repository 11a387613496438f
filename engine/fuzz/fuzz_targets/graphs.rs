//! The graphs the policy and schedule targets run their input on: ED-Batch
//! Fig. 1 and the trace seeds (`seeds/trace/`), read once.

use std::sync::OnceLock;

use engine_core::graph::{Graph, ed_batch_fig1};
use engine_core::sched::SameTypeDag;
use engine_core::trace::Trace;

/// Each graph with its same-type DAG.
pub fn graphs() -> &'static [(Graph, SameTypeDag)] {
    static GRAPHS: OnceLock<Vec<(Graph, SameTypeDag)>> = OnceLock::new();
    GRAPHS.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/trace");
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        names.sort();
        let mut gs = vec![ed_batch_fig1()];
        gs.extend(
            names
                .iter()
                .filter_map(|p| Trace::read(p).ok())
                .map(|t| t.graph),
        );
        gs.into_iter()
            .map(|g| {
                let st = SameTypeDag::new(&g);
                (g, st)
            })
            .collect()
    })
}
