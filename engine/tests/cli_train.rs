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

/// `engine replay --train --json` judges the step against the reference's:
/// a batched executor agrees within 1e-4 (loss, outputs, gradients), and
/// `--no-check` leaves the field null; on the CPU there is no GPU time.
#[test]
fn replay_train_json_checks_the_step_against_the_reference() {
    let line = "replay --workload tree-lstm --batch 3 --hidden 8 --threads 1 --repeat 1 --train --json --executor";
    for executor in ["cavs", "dynet"] {
        let o = engine_line(line, &[executor]);
        assert!(o.status.success(), "{}", stderr(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let c = &r["check"];
        for f in [
            "loss_rel_error",
            "max_rel_error_outputs",
            "max_rel_error_gradients",
        ] {
            let e = c[f].as_f64().unwrap_or(f64::NAN);
            assert!(e < 1e-4, "{executor}: {f} = {e} in {r}");
        }
        assert!(r["device_s"].is_null(), "{r}");
    }
    let o = engine_line(line, &["cavs", "--no-check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r["check"].is_null(), "{r}");
}

/// Regression (bad input round two): `--lr NaN` wrote a NaN-weight
/// checkpoint with exit 0, `--lr inf` was caught only from the second
/// mini-batch, `--clip NaN` and `--max-batches 0` (which reported "train
/// loss 0.0000" after training nothing) were accepted: each is refused up
/// front, naming the flag, and nothing is written.
#[test]
fn meaningless_hyperparameters_are_refused_up_front() {
    let ck = tmp("hyper.ckpt");
    for (flag, value) in [
        ("--lr", "NaN"),
        ("--lr", "inf"),
        ("--lr", "0"),
        ("--clip", "NaN"),
        ("--clip=-1", ""),
        ("--max-batches", "0"),
    ] {
        let mut extra = vec![flag];
        if !value.is_empty() {
            extra.push(value);
        }
        extra.extend(["--checkpoint", ck.to_str().unwrap()]);
        let o = engine_line(
            "train --workload tree-lstm --epochs 1 --batch 4 --hidden 8 --threads 1 --dev none",
            &extra,
        );
        assert_ne!(o.status.code(), Some(0), "{flag} {value}");
        let e = stderr(&o);
        let name = flag.trim_end_matches("=-1");
        assert!(e.contains(name), "{flag} {value}: {e}");
        assert!(!ck.exists(), "{flag} {value} wrote a checkpoint");
    }
}
