use super::*;
use crate::sched::{AgendaPolicy, DepthPolicy, TypewisePolicy};
use crate::trace::Level;
use crate::workloads::{self, DataChoice, RecordOptions, WORKLOADS};

fn record(name: &str, batch: usize, hidden: usize) -> Trace {
    workloads::record(
        &RecordOptions {
            workload: workloads::workload(name).unwrap(),
            data: DataChoice::Default,
            batch,
            hidden,
            level: Level::Cell,
            seed: 3,
        },
        &CellLibrary::builtin().unwrap(),
    )
    .unwrap()
}

#[test]
fn batched_executors_match_the_reference_on_every_workload() {
    let cells = CellLibrary::builtin().unwrap();
    for w in WORKLOADS {
        let trace = record(w.name, 8, 32);
        let m = model(&trace, &cells, 11).unwrap();
        let reference = replay(&trace, &m, &cells, &mut Executor::Reference).unwrap();
        // The final loss is finite and non-zero: the numbers are real.
        let sink = *trace.graph.topo_order().last().unwrap();
        let loss = reference.store.node(sink)[0];
        assert!(loss.is_finite() && loss > 0.0, "{}: loss {loss}", w.name);
        for mut ex in [
            Executor::Cavs,
            Executor::Policy(Box::new(AgendaPolicy::updated())),
            Executor::Policy(Box::new(TypewisePolicy)),
            Executor::Dynet(Box::new(AgendaPolicy::updated())),
            Executor::Dynet(Box::new(DepthPolicy::default())),
        ] {
            let run = replay(&trace, &m, &cells, &mut ex).unwrap();
            let err = max_rel_error(&trace, &run.store, &reference.store);
            assert!(err < 1e-4, "{}: max relative error {err}", w.name);
            if !matches!(ex, Executor::Dynet(_)) {
                // Batching cells takes fewer steps than one node at a time (the
                // op-level executor batches ops, of which there are more).
                assert!(
                    run.counters.batches < reference.counters.batches,
                    "{}",
                    w.name
                );
            }
        }
    }
}

#[test]
fn other_seed_gives_other_numbers() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = record("tree-lstm", 2, 8);
    let a = replay(
        &trace,
        &model(&trace, &cells, 1).unwrap(),
        &cells,
        &mut Executor::Reference,
    )
    .unwrap();
    let b = replay(
        &trace,
        &model(&trace, &cells, 2).unwrap(),
        &cells,
        &mut Executor::Reference,
    )
    .unwrap();
    assert!(max_rel_error(&trace, &a.store, &b.store) > 1e-3);
}

#[test]
fn trace_without_cells_is_a_clear_error() {
    let cells = CellLibrary::builtin().unwrap();
    let mut trace = record("rvnn", 1, 8);
    trace.workload = "someone-elses-model".into();
    let e = model(&trace, &cells, 1).err().unwrap().to_string();
    assert!(e.contains("has no cell definitions"), "{e}");
}

#[test]
fn hidden_size_mismatch_is_a_clear_error() {
    let cells = CellLibrary::builtin().unwrap();
    let mut trace = record("rvnn", 1, 8);
    trace.meta.hidden = Some(16);
    let e = model(&trace, &cells, 1).err().unwrap().to_string();
    assert!(
        e.contains("does not have the trace's hidden size 16"),
        "{e}"
    );
}
