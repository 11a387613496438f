//! `engine train` refusals: each a clear error, non-zero exit, and nothing
//! overwritten (issue 14's bad inputs).

mod common;

use common::{engine_line, stderr, tmp};

/// Regression: without labels the loss read hashed labels and "trained".
#[test]
fn data_without_labels_is_refused_naming_the_data_set() {
    let o = engine_line(
        "train --workload lattice-lstm --epochs 1 --max-batches 1",
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("weibo-train") && e.contains("no labels"), "{e}");
}

#[test]
fn a_checkpoint_of_another_model_is_refused_and_kept() {
    let ck = tmp("gru.ckpt");
    let ck_s = ck.to_str().unwrap();
    let o = engine_line(
        "train --workload tree-gru --epochs 1 --max-batches 1 --batch 4 --hidden 8 --threads 1 --dev none --checkpoint",
        &[ck_s],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(&ck).unwrap();
    let o = engine_line(
        "train --workload tree-lstm --epochs 2 --max-batches 1 --batch 4 --hidden 8 --threads 1 --dev none --resume --checkpoint",
        &[ck_s],
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("gru.ckpt") && e.contains("tree-gru"), "{e}");
    assert_eq!(
        std::fs::read(&ck).unwrap(),
        before,
        "the checkpoint was touched"
    );
}

#[test]
fn a_diverging_loss_stops_naming_the_step_and_writes_nothing() {
    let ck = tmp("diverge.ckpt");
    std::fs::write(&ck, b"an earlier run's checkpoint").unwrap();
    let o = engine_line(
        "train --workload tree-lstm --epochs 1 --max-batches 4 --batch 4 --hidden 8 --optimizer sgd --lr 1e38 --clip 0 --threads 1 --dev none --checkpoint",
        &[ck.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("epoch 1, mini-batch") && e.contains("diverged"),
        "{e}"
    );
    assert_eq!(std::fs::read(&ck).unwrap(), b"an earlier run's checkpoint");
}
