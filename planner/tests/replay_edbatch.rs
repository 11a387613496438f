//! The replay engine's ED-Batch executors, driven by this crate's layouts: on
//! every workload, planned and DyNet-order layouts compute the reference's
//! numbers, and the planned layouts move fewer bytes.

use engine::cells::CellLibrary;
use engine::layout::LayoutFile;
use engine::sched::TypewisePolicy;
use engine::trace::Level;
use engine::workloads::{self, DataChoice, RecordOptions, WORKLOADS};
use engine_replay::compare;
use engine_replay::device::DeviceKind;
use engine_replay::executor::{Executor, compile_layouts};
use engine_replay::model;
use engine_replay::session::{self, Session, device_present};
use planner::layout_file::{baseline_file, planned_file};
use planner::{PlanOptions, plan_cell};

const HIDDEN: usize = 16;

/// A cell-level trace of `workload` on its default data at [`HIDDEN`].
fn record(cells: &CellLibrary, workload: &str, batch: usize, seed: u64) -> engine::trace::Trace {
    let opts = RecordOptions {
        workload: workloads::workload(workload).unwrap(),
        data: DataChoice::Default,
        batch,
        hidden: HIDDEN,
        level: Level::Cell,
        seed,
    };
    workloads::record(&opts, cells).unwrap()
}

/// Layout files with the names they would have on disk.
type Files = Vec<(String, LayoutFile)>;

/// Planned and baseline layout files of every built-in cell.
fn layouts(cells: &CellLibrary) -> (Files, Files) {
    let (mut planned, mut baseline) = (Vec::new(), Vec::new());
    for name in cells.names() {
        let cell = cells.instantiate(name, HIDDEN).unwrap();
        let plan = plan_cell(&cell, 8, &PlanOptions::default()).unwrap();
        planned.push((format!("{name}.json"), planned_file(&cell, &plan)));
        baseline.push((format!("{name}.baseline.json"), baseline_file(&cell, &plan)));
    }
    (planned, baseline)
}

/// The body shared by the CPU test and its CUDA twin: the reference runs on
/// the CPU (the oracle), ED-Batch on `device`.
fn edbatch_matches_the_reference_on(device: DeviceKind) {
    // The CUDA twin runs only when asked for (BATCHLAB_CUDA_TESTS=1).
    assert!(
        device_present(device).unwrap(),
        "{device:?} asked for but absent"
    );
    let cells = CellLibrary::builtin().unwrap();
    let (planned, baseline) = layouts(&cells);
    for w in WORKLOADS {
        let trace = record(&cells, w.name, 6, 5);
        let m = model::model(&trace, &cells, 3).unwrap();
        let (_, reference) = session::replay(&trace, &m, &cells, &mut Executor::Reference).unwrap();
        let mut moved = Vec::new();
        for files in [&planned, &baseline] {
            let progs = compile_layouts(&m, files).unwrap();
            assert!(
                progs.iter().all(Option::is_some),
                "{}: every role has a layout",
                w.name
            );
            let mut ex = Executor::EdBatch(Box::new(TypewisePolicy), progs);
            let mut session = Session::open(device, &trace, &m, &cells, &mut ex).unwrap();
            let run = session.run().unwrap();
            let err = compare::max_rel_error(&trace, session.outputs(), &reference);
            assert!(
                err < 1e-4,
                "{} on {device:?}: max relative error {err}",
                w.name
            );
            moved.push(run.counters.bytes_gathered + run.counters.bytes_scattered);
        }
        assert!(
            moved[0] <= moved[1],
            "{}: planned {} > baseline {}",
            w.name,
            moved[0],
            moved[1]
        );
    }
}

#[test]
fn edbatch_with_planned_and_baseline_layouts_matches_the_reference() {
    edbatch_matches_the_reference_on(DeviceKind::Cpu);
}

#[test]
#[cfg_attr(
    not(batchlab_cuda_tests),
    ignore = "needs a CUDA GPU: BATCHLAB_CUDA_TESTS=1 cargo test runs it"
)]
fn edbatch_with_planned_and_baseline_layouts_matches_the_reference_on_cuda() {
    edbatch_matches_the_reference_on(DeviceKind::Cuda(0));
}

#[test]
fn lstm_planned_layout_removes_the_gate_weight_gathers() {
    let cells = CellLibrary::builtin().unwrap();
    let (planned, baseline) = layouts(&cells);
    let trace = record(&cells, "fixed-lstm", 4, 1);
    let m = model::model(&trace, &cells, 1).unwrap();
    let role = m.roles.iter().position(|r| r.cell.name == "lstm").unwrap();
    let cell = &m.roles[role].cell;
    let gathers = |files: &Files| {
        compile_layouts(&m, files).unwrap()[role]
            .as_ref()
            .unwrap()
            .gathers(cell)
    };
    // The four gates' affines batch into one; in DyNet's declaration order
    // their W and U weights are not consecutive and must be gathered in every
    // run of a batch (the GPU does; the CPU packs weights once per session, so
    // there only activation gathers cost per batch), while the planned layout
    // stacks them.
    let (p, b) = (gathers(&planned), gathers(&baseline));
    assert_eq!(p.0, 0, "planned layout gathers weights: {p:?}");
    assert!(b.0 >= 2, "baseline layout gathers no weights: {b:?}");
    assert!(p.1 <= b.1, "planned {p:?} vs baseline {b:?}");
}

/// Regression: the lattice LSTM's planned char cell batches its five gate
/// affines into one in-cell batch whose second input is `[h_prev ×4, c_w]`,
/// not consecutive in any layout. The CPU used to gather `h_prev` and `c_w`
/// into a temporary per instance before the GEMMs, so ED-Batch moved ~33 %
/// more bytes than Cavs on lattices. Its GEMMs read each group's inputs where
/// they live, so the planned layout now gathers exactly what Cavs gathers
/// (the cell-entry sums of the `many` port) and no more.
#[test]
fn lattice_char_gates_read_h_prev_and_c_w_in_place_on_the_cpu() {
    let cells = CellLibrary::builtin().unwrap();
    let (planned, _) = layouts(&cells);
    for w in ["lattice-lstm", "lattice-gru"] {
        let trace = record(&cells, w, 6, 5);
        let m = model::model(&trace, &cells, 3).unwrap();
        let mut gathered = Vec::new();
        let progs = compile_layouts(&m, &planned).unwrap();
        for mut ex in [
            Executor::Cavs,
            Executor::EdBatch(Box::new(TypewisePolicy), progs),
        ] {
            let mut session = Session::open(DeviceKind::Cpu, &trace, &m, &cells, &mut ex).unwrap();
            let run = session.run().unwrap();
            gathered.push(run.counters.bytes_gathered);
        }
        assert_eq!(
            gathered[1], gathered[0],
            "{w}: edbatch (planned) gathers {} bytes, cavs {}",
            gathered[1], gathered[0]
        );
    }
}

/// Training through the planned layouts: the backward reads every forward
/// value where the forward plan left it (in the record, or in place in its
/// producer's slot now that products no longer pin their operands), so on
/// every workload the loss and the gradients equal the unbatched reference's.
#[test]
fn edbatch_training_with_planned_layouts_matches_the_reference_gradients() {
    use engine_replay::run::{BackwardSchedule, TrainOptions};
    let cells = CellLibrary::builtin().unwrap();
    let (planned, _) = layouts(&cells);
    type Grads = Vec<Vec<Vec<f32>>>;
    fn step(
        trace: &engine::trace::Trace,
        m: &engine_replay::model::Model,
        cells: &CellLibrary,
        mut ex: Executor,
    ) -> (f64, Grads) {
        let mut s = Session::open(DeviceKind::Cpu, trace, m, cells, &mut ex).unwrap();
        let run = s
            .train(
                BackwardSchedule::ReverseForward,
                &TrainOptions { lazy: true },
            )
            .unwrap();
        (run.loss, s.gradients().unwrap())
    }
    for w in WORKLOADS {
        let trace = record(&cells, w.name, 5, 9);
        let m = model::model(&trace, &cells, 4).unwrap();
        let (want_loss, want) = step(&trace, &m, &cells, Executor::Reference);
        let progs = compile_layouts(&m, &planned).unwrap();
        let (loss, got) = step(
            &trace,
            &m,
            &cells,
            Executor::EdBatch(Box::new(TypewisePolicy), progs),
        );
        assert!(
            ((loss - want_loss) / want_loss).abs() < 1e-5,
            "{}: loss {loss} vs {want_loss}",
            w.name
        );
        let (err, role, v) = compare::worst_gradient(&got, &want);
        assert!(err < 1e-4, "{} role {role} value {v}: {err:.2e}", w.name);
    }
}
