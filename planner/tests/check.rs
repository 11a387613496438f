//! `check` rejects layout files whose claims are false, naming the culprit.

use std::collections::HashMap;

use engine::cells::{Cell, CellLibrary};
use planner::check::{CheckError, check_layout};
use planner::layout_file::PlanKind;
use planner::{LayoutFile, PlanOptions, plan_cell};

fn lstm() -> (Cell, LayoutFile) {
    let cell = CellLibrary::builtin()
        .unwrap()
        .instantiate("lstm", 16)
        .unwrap();
    let plan = plan_cell(&cell, 4, &PlanOptions::default()).unwrap();
    let file = planner::layout_file::planned_file(&cell, &plan);
    (cell, file)
}

/// Swaps variables `a` and `b` in memory and re-packs every offset in the
/// file consistently, leaving the copy plans as they were.
fn swap_variables(file: &mut LayoutFile, a: &str, b: &str) {
    let ia = file.variables.iter().position(|v| v.name == a).unwrap();
    let ib = file.variables.iter().position(|v| v.name == b).unwrap();
    file.variables.swap(ia, ib);
    let mut at = 0;
    let mut offset = HashMap::new();
    for v in &mut file.variables {
        v.offset = at;
        offset.insert(v.value, at);
        at += v.bytes;
    }
    for batch in &mut file.schedule {
        for o in batch.operands.iter_mut().chain([&mut batch.result]) {
            o.offsets = o.values.iter().map(|v| offset[v]).collect();
        }
    }
}

#[test]
fn the_planned_file_passes() {
    let (cell, file) = lstm();
    let r = check_layout(&file, &cell).unwrap();
    assert_eq!(r.batches, 7);
    assert_eq!(r.copies, 0);
}

/// Regression: `planner check` printed "of 11 batched operands 19
/// contiguous" (single-op operands were counted as contiguous).
#[test]
fn check_counts_add_up_to_the_batched_operands() {
    let lib = CellLibrary::builtin().unwrap();
    for name in ["lstm", "gru", "tree_lstm.internal", "mv.internal"] {
        let cell = lib.instantiate(name, 16).unwrap();
        let plan = plan_cell(&cell, 4, &PlanOptions::default()).unwrap();
        for file in [
            planner::layout_file::planned_file(&cell, &plan),
            planner::layout_file::baseline_file(&cell, &plan),
        ] {
            let r = check_layout(&file, &cell).unwrap();
            assert_eq!(
                r.contiguous + r.broadcasts + r.copies,
                r.operands,
                "{name}: {r:?}"
            );
        }
    }
}

#[test]
fn a_contiguous_claim_broken_by_reordering_names_batch_and_operand() {
    let (cell, mut file) = lstm();
    // The gate weights are one contiguous operand of batch 0; swapping two of
    // them breaks its order (they stay adjacent but misaligned).
    let w = file.schedule[0].operands[1].names.clone();
    assert_eq!(file.schedule[0].operands[1].plan, PlanKind::Contiguous);
    swap_variables(&mut file, &w[0], &w[1]);
    match check_layout(&file, &cell) {
        Err(CheckError::Operand {
            batch: 0,
            operand,
            reason,
            ..
        }) => {
            assert_eq!(operand, "arg 2");
            assert!(reason.contains("not contiguous and aligned"), "{reason}");
        }
        other => panic!("expected an operand error, got {other:?}"),
    }
}

#[test]
fn wrong_sizes_and_totals_are_caught() {
    let (cell, file) = lstm();
    let mut f = file.clone();
    f.variables[0].bytes += 4;
    assert!(matches!(
        check_layout(&f, &cell),
        Err(CheckError::Variable { .. })
    ));
    let mut f = file.clone();
    f.totals.copy_bytes = 1;
    assert!(matches!(
        check_layout(&f, &cell),
        Err(CheckError::Totals {
            field: "copy_bytes",
            ..
        })
    ));
    let mut f = file.clone();
    f.schedule[0].operands[1].plan = PlanKind::Gather;
    assert!(
        matches!(check_layout(&f, &cell), Err(CheckError::Operand { .. })),
        "gather must state its bytes"
    );
    let mut f = file;
    f.schedule.swap(0, 1);
    let e = check_layout(&f, &cell).unwrap_err().to_string();
    assert!(e.contains("before the batch computing it"), "{e}");
}
