//! The replay engine's ED-Batch executors, driven by this crate's layouts: on
//! every workload, planned and DyNet-order layouts compute the reference's
//! numbers, and the planned layouts move fewer bytes.

use engine::cells::CellLibrary;
use engine::device::DeviceKind;
use engine::layout::LayoutFile;
use engine::replay::{self, Executor, Session, compile_layouts, device_present};
use engine::sched::TypewisePolicy;
use engine::trace::Level;
use engine::workloads::{self, DataChoice, RecordOptions, WORKLOADS};
use planner::layout_file::{baseline_file, planned_file};
use planner::{PlanOptions, plan_cell};

const HIDDEN: usize = 16;

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
    if !device_present(device).unwrap() {
        eprintln!("skipped: {device:?} is not available on this machine");
        return;
    }
    let cells = CellLibrary::builtin().unwrap();
    let (planned, baseline) = layouts(&cells);
    for w in WORKLOADS {
        let trace = workloads::record(
            &RecordOptions {
                workload: workloads::workload(w.name).unwrap(),
                data: DataChoice::Default,
                batch: 6,
                hidden: HIDDEN,
                level: Level::Cell,
                seed: 5,
            },
            &cells,
        )
        .unwrap();
        let m = replay::model(&trace, &cells, 3).unwrap();
        let reference = replay::replay(&trace, &m, &cells, &mut Executor::Reference).unwrap();
        let mut moved = Vec::new();
        for files in [&planned, &baseline] {
            let progs = compile_layouts(&m, files).unwrap();
            assert!(
                progs.iter().all(Option::is_some),
                "{}: every role has a layout",
                w.name
            );
            let mut ex = Executor::EdBatch(Box::new(TypewisePolicy), progs);
            let mut session = Session::open(device, &trace, &m, &cells, &ex).unwrap();
            let run = session.run(&trace, &m, &cells, &mut ex).unwrap();
            let err = replay::max_rel_error(&trace, &run.store, &reference.store);
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
fn edbatch_with_planned_and_baseline_layouts_matches_the_reference_on_cuda() {
    edbatch_matches_the_reference_on(DeviceKind::Cuda(0));
}

#[test]
fn lstm_planned_layout_removes_the_gate_weight_gathers() {
    let cells = CellLibrary::builtin().unwrap();
    let (planned, baseline) = layouts(&cells);
    let trace = workloads::record(
        &RecordOptions {
            workload: workloads::workload("fixed-lstm").unwrap(),
            data: DataChoice::Default,
            batch: 4,
            hidden: HIDDEN,
            level: Level::Cell,
            seed: 1,
        },
        &cells,
    )
    .unwrap();
    let m = replay::model(&trace, &cells, 1).unwrap();
    let run = |files: &Files| {
        let mut ex = Executor::EdBatch(
            Box::new(TypewisePolicy),
            compile_layouts(&m, files).unwrap(),
        );
        replay::replay(&trace, &m, &cells, &mut ex)
            .unwrap()
            .counters
    };
    let (p, b) = (run(&planned), run(&baseline));
    // Same batches; the baseline gathers the four gates' weights (2 × 4 × h² floats
    // per LSTM batch, 64 batches) on top of what both move at cell borders.
    assert_eq!(p.batches, b.batches);
    let weights = 64 * 2 * 4 * HIDDEN * HIDDEN * 4;
    assert!(
        b.bytes_gathered >= p.bytes_gathered + weights as u64,
        "{b:?} vs {p:?}"
    );
}

#[test]
fn a_layout_for_another_hidden_size_is_a_clear_error() {
    let cells = CellLibrary::builtin().unwrap();
    let trace = workloads::record(
        &RecordOptions {
            workload: workloads::workload("rvnn").unwrap(),
            data: DataChoice::Default,
            batch: 1,
            hidden: 8,
            level: Level::Cell,
            seed: 1,
        },
        &cells,
    )
    .unwrap();
    let m = replay::model(&trace, &cells, 1).unwrap();
    let cell = cells.instantiate("rvnn.leaf", 16).unwrap();
    let plan = plan_cell(&cell, 8, &PlanOptions::default()).unwrap();
    let files = vec![("rvnn.leaf.json".to_string(), planned_file(&cell, &plan))];
    let e = compile_layouts(&m, &files).err().unwrap().to_string();
    assert_eq!(
        e,
        "layout rvnn.leaf.json: is for cell rvnn.leaf at hidden 16, the trace needs rvnn.leaf at hidden 8"
    );
}
