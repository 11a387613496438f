use super::*;
use crate::device::DeviceKind;
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

/// The body shared by the CPU test and its CUDA twin: the reference runs on
/// the CPU (the oracle); every executor `device` supports runs there.
fn batched_executors_match_the_reference_on(device: DeviceKind) {
    // The CUDA twin runs only when asked for (BATCHLAB_CUDA_TESTS=1): then a
    // missing device is a failure, never a silent pass.
    assert!(
        device_present(device).unwrap(),
        "{device:?} is not available on this machine, but its tests were asked for"
    );
    let cells = CellLibrary::builtin().unwrap();
    for w in WORKLOADS {
        let trace = record(w.name, 8, 32);
        let m = model(&trace, &cells, 11).unwrap();
        let (reference, ref_out) = replay(&trace, &m, &cells, &mut Executor::Reference).unwrap();
        // The final loss is finite and non-zero: the numbers are real.
        let sink = *trace.graph.topo_order().last().unwrap();
        let loss = ref_out.node(sink)[0];
        assert!(loss.is_finite() && loss > 0.0, "{}: loss {loss}", w.name);
        let mut executors = vec![
            Executor::Cavs,
            Executor::Policy(Box::new(AgendaPolicy::updated())),
            Executor::Policy(Box::new(TypewisePolicy)),
            Executor::Dynet(Box::new(AgendaPolicy::updated())),
            Executor::Dynet(Box::new(DepthPolicy::default())),
        ];
        if device != DeviceKind::Cpu {
            // The oracle itself on the device.
            executors.push(Executor::Reference);
        }
        for mut ex in executors {
            let mut session = Session::open(device, &trace, &m, &cells, &ex).unwrap();
            let run = session.run(&trace, &m, &cells, &mut ex).unwrap();
            let err = max_rel_error(&trace, session.outputs(), &ref_out);
            assert!(
                err < 1e-4,
                "{} on {device:?}: max relative error {err}",
                w.name
            );
            if matches!(ex, Executor::Reference) {
                assert_eq!(run.counters.batches, reference.counters.batches);
                continue;
            }
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
fn batched_executors_match_the_reference_on_every_workload() {
    batched_executors_match_the_reference_on(DeviceKind::Cpu);
}

#[test]
#[cfg_attr(
    not(batchlab_cuda_tests),
    ignore = "needs a CUDA GPU: BATCHLAB_CUDA_TESTS=1 cargo test runs it"
)]
fn batched_executors_match_the_reference_on_every_workload_on_cuda() {
    batched_executors_match_the_reference_on(DeviceKind::Cuda(0));
}

#[test]
fn other_seed_gives_other_numbers() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = record("tree-lstm", 2, 8);
    let (_, a) = replay(
        &trace,
        &model(&trace, &cells, 1).unwrap(),
        &cells,
        &mut Executor::Reference,
    )
    .unwrap();
    let (_, b) = replay(
        &trace,
        &model(&trace, &cells, 2).unwrap(),
        &cells,
        &mut Executor::Reference,
    )
    .unwrap();
    assert!(max_rel_error(&trace, &a, &b) > 1e-3);
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
