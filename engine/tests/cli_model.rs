//! The `engine` commands on a model folder (recorded from PyTorch,
//! `engine/core/tests/fixtures`): inspect, replay --check on every CPU
//! executor and training, train, export-model, schedule and its service,
//! and `--check` failing on a tampered folder with the node, role and cell
//! named.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{engine, stderr, tmp};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("core/tests/fixtures")
        .join(name)
}

/// A copy of fixture folder `name` in a fresh temporary folder `to`.
fn copy_of(name: &str, to: &str) -> PathBuf {
    let dir = tmp(to);
    let src = fixture(name);
    std::fs::create_dir_all(dir.join("cells")).unwrap();
    for sub in ["", "cells"] {
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, dir.join(sub).join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    dir
}

/// Rewrites `file` of folder `dir` through `edit` (its metadata kept).
fn edit_tensors(
    dir: &Path,
    file: &str,
    edit: impl FnOnce(&engine::modeldir::Tensors) -> engine::modeldir::Tensors,
) {
    let path = dir.join(file);
    let old = engine::modeldir::Tensors::read(&path).unwrap();
    let new = edit(&old);
    new.write(&path, &old.metadata).unwrap();
}

/// `engine replay --model dir --executor cavs --check` (with `--train`
/// when `train`): its exit code and standard error.
fn check_run(dir: &Path, train: bool) -> (Option<i32>, String) {
    let d = dir.to_str().unwrap();
    let mut args = vec!["replay", "--model", d, "--executor", "cavs", "--check"];
    if train {
        args.push("--train");
    }
    let o = engine(&args);
    (o.status.code(), stderr(&o))
}

fn json(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn inspect_lists_the_roles_of_a_model_folder() {
    let d = fixture("model-tree");
    let v = json(&engine(&[
        "inspect",
        "--model",
        d.to_str().unwrap(),
        "--json",
    ]));
    let roles = v["roles"].as_array().unwrap();
    assert!(
        roles
            .iter()
            .any(|r| r["role"] == "node" && r["ops"].as_u64() > Some(5))
    );
    assert!(roles.iter().any(|r| r["loss"] == true));
    let total: u64 = roles.iter().map(|r| r["nodes"].as_u64().unwrap()).sum();
    assert_eq!(Some(total), v["nodes"].as_u64());
    // The folder where a trace file goes names the flag that takes it.
    let o = engine(&["inspect", d.to_str().unwrap()]);
    assert!(
        !o.status.success() && stderr(&o).contains("--model"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn replay_check_passes_on_every_cpu_executor_and_training() {
    for name in ["model-tree", "model-dag"] {
        let d = fixture(name);
        let d = d.to_str().unwrap();
        for ex in [
            ["reference", ""],
            ["dynet", "agenda"],
            ["cavs", ""],
            ["policy", "agenda"],
        ] {
            let mut args = vec![
                "replay",
                "--model",
                d,
                "--executor",
                ex[0],
                "--check",
                "--json",
            ];
            if !ex[1].is_empty() {
                args.extend(["--policy", ex[1]]);
            }
            let v = json(&engine(&args));
            assert_eq!(v["expected"]["passed"], true, "{name} {}: {v}", ex[0]);
        }
        let v = json(&engine(&[
            "replay",
            "--model",
            d,
            "--executor",
            "cavs",
            "--train",
            "--check",
            "--json",
        ]));
        assert_eq!(v["expected"]["passed"], true);
        assert!(v["expected_gradients"][0].as_f64().unwrap() <= 1e-4, "{v}");
    }
}

#[test]
fn replay_check_names_the_node_role_and_cell_that_differ() {
    let dir = copy_of("model-tree", "tampered");
    // One weight of the internal node's cell off by one: its nodes differ.
    let wpath = dir.join("weights.safetensors");
    let mut w = engine::modeldir::Tensors::read(&wpath).unwrap();
    let mut t = w.get("node.U_l.weight").unwrap().clone();
    t.data[0] += 1.0;
    w.insert("node.U_l.weight", t);
    w.write(&wpath, &Default::default()).unwrap();
    let o = engine(&[
        "replay",
        "--model",
        dir.to_str().unwrap(),
        "--executor",
        "cavs",
        "--check",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("role node")
            && e.contains("cell node")
            && e.contains("differs from the recording"),
        "{e}"
    );
    assert!(e.contains("cell op") && e.contains("(affine)"), "{e}");
}

#[test]
fn train_on_a_model_folder_lowers_its_loss() {
    let d = fixture("model-dag");
    let v = json(&engine(&[
        "train",
        "--model",
        d.to_str().unwrap(),
        "--epochs",
        "6",
        "--batch",
        "1",
        "--lr",
        "0.05",
        "--threads",
        "1",
        "--json",
    ]));
    let losses: Vec<f64> = v["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["train_loss"].as_f64().unwrap())
        .collect();
    assert!(losses.last() < losses.first(), "{losses:?}");
    assert_eq!(v["dev"], serde_json::Value::Null);
}

#[test]
fn export_and_schedule_read_a_model_folder() {
    let d = fixture("model-tree");
    let out = tmp("tree.safetensors");
    let v = json(&engine(&[
        "export-model",
        "--model",
        d.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]));
    let want = engine::modeldir::ModelDir::open(&d)
        .unwrap()
        .expected()
        .unwrap()
        .unwrap();
    let loss = f64::from(want.get("loss").unwrap().data[0]);
    let got = v["reference_loss"].as_f64().unwrap();
    assert!((got - loss).abs() <= 1e-4 * loss.abs(), "{got} vs {loss}");
    // The export carries the folder's weights, not seeded ones.
    let export = engine::export::Export::read(&out).unwrap();
    let folder = engine::modeldir::ModelDir::open(&d).unwrap();
    let w = folder.weights().get("leaf.iou.weight").unwrap();
    assert_eq!(export.param("leaf", "leaf.iou.weight"), Some(w));
    let s = tmp("tree.schedule.json");
    let v = json(&engine(&[
        "schedule",
        "--model",
        d.to_str().unwrap(),
        "--policy",
        "agenda",
        "--out",
        s.to_str().unwrap(),
        "--json",
    ]));
    assert!(v["batches"].as_u64() >= v["lower_bound"].as_u64());
    assert!(s.exists());
}

#[test]
fn the_schedule_service_answers_each_line_and_survives_a_bad_one() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_engine"))
        .args(["schedule", "--serve", "--policy", "depth"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let trace = std::fs::read_to_string(fixture("model-tree").join("trace.json")).unwrap();
    let one_line: serde_json::Value = serde_json::from_str(&trace).unwrap();
    {
        let stdin = child.stdin.as_mut().unwrap();
        writeln!(stdin, "{}", serde_json::to_string(&one_line).unwrap()).unwrap();
        writeln!(stdin, "{{\"not\": \"a graph\"}}").unwrap();
        writeln!(
            stdin,
            "{{\"workload\":\"w\",\"types\":[\"a\",\"b\"],\"type_of\":[0,0,1],\"arg_ptr\":[0,0,1,3],\"args\":[0,0,1],\"instance\":[0,0,0]}}"
        )
        .unwrap();
        writeln!(
            stdin,
            "{{\"workload\":\"w\",\"types\":[\"a\"],\"type_of\":[0,0],\"arg_ptr\":[0,1,2],\"args\":[1,0]}}"
        )
        .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    let n = one_line["nodes"].as_array().unwrap().len();
    let scheduled: usize = lines[0]["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_array().unwrap().len())
        .sum();
    assert_eq!(scheduled, n);
    assert!(lines[1]["error"].as_str().unwrap().contains("request 2"));
    assert_eq!(lines[2]["batches"], serde_json::json!([[0], [1], [2]]));
    assert!(
        lines[3]["error"].as_str().unwrap().contains("cycle"),
        "{}",
        lines[3]
    );
}

#[test]
fn the_schedule_service_speaks_binary_frames() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_engine"))
        .args(["schedule", "--serve", "--policy", "depth"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Three nodes: 0 and 1 of type a, 2 of type b reading both.
    let words: [u32; 3 + 4 + 2 + 3] = [0, 0, 1, 0, 0, 0, 2, 0, 1, 0, 0, 0];
    let frame = |n: usize, m: usize, words: &[u32]| {
        let mut v = format!(
            "B {{\"workload\":\"w\",\"types\":[\"a\",\"b\"],\"nodes\":{n},\"args\":{m}}}\n"
        )
        .into_bytes();
        for w in words {
            v.extend(w.to_le_bytes());
        }
        v
    };
    {
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all(&frame(3, 2, &words)).unwrap();
        // A frame whose body stops short: an error line, then the input ends.
        stdin.write_all(&frame(3, 2, &words[..5])).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = out.stdout;
    let nl = text.iter().position(|&b| b == b'\n').unwrap();
    let head: serde_json::Value = serde_json::from_slice(&text[..nl]).unwrap();
    assert_eq!(head["batch_sizes"], serde_json::json!([2, 1]));
    let nodes: Vec<u32> = text[nl + 1..nl + 1 + 12]
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(nodes, [0, 1, 2]);
    let rest = String::from_utf8_lossy(&text[nl + 13..]).to_string();
    assert!(
        rest.contains("error") && rest.contains("ends after 5 of its 12 words"),
        "{rest}"
    );

    // Regression: a header refused for an unknown field left its words in
    // the stream, so the next, valid request failed. They are skipped.
    let mut child = Command::new(env!("CARGO_BIN_EXE_engine"))
        .args(["schedule", "--serve", "--policy", "depth"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let stdin = child.stdin.as_mut().unwrap();
        let mut bad =
            b"B {\"workload\":\"w\",\"types\":[\"a\",\"b\"],\"nodes\":3,\"args\":2,\"colour\":1}\n"
                .to_vec();
        for w in words {
            bad.extend(w.to_le_bytes());
        }
        stdin.write_all(&bad).unwrap();
        stdin.write_all(&frame(3, 2, &words)).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let text = out.stdout;
    let nl = text.iter().position(|&b| b == b'\n').unwrap();
    let first = String::from_utf8_lossy(&text[..nl]).to_string();
    assert!(
        first.contains("error") && first.contains("colour"),
        "{first}"
    );
    let rest = &text[nl + 1..];
    let nl = rest.iter().position(|&b| b == b'\n').unwrap();
    let head: serde_json::Value = serde_json::from_slice(&rest[..nl]).unwrap();
    assert_eq!(head["batch_sizes"], serde_json::json!([2, 1]), "{head}");
}

/// A layouts folder whose `leaf.json` held another cell's layout ran with
/// the leaf role unplanned, silently: files are found by name, and the name
/// must agree with the file's `cell` field.
#[test]
fn layout_file_holding_another_cells_layout_is_refused() {
    let model = fixture("model-tree");
    let src = fixture("model-tree-layouts");
    let dir = tmp("swapped-layouts");
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    let replay = || {
        engine(&[
            "replay",
            "--model",
            model.to_str().unwrap(),
            "--executor",
            "edbatch",
            "--policy",
            "typewise",
            "--layouts",
            dir.to_str().unwrap(),
            "--check",
            "--json",
        ])
    };
    assert_eq!(json(&replay())["expected"]["passed"], true);
    std::fs::copy(src.join("node.json"), dir.join("leaf.json")).unwrap();
    let o = replay();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{}: field `cell` is \"node\"",
            dir.join("leaf.json").display()
        )),
        "{err}"
    );
}

/// Regression: `--check` printed "loss NaN ... DIFFERS" and exited 0 when a
/// weight was NaN (a maximum folded with `f32::max` drops a NaN), and an
/// `expected.safetensors` whose outputs were all NaN passed. A NaN or an
/// infinity on either side fails the check, forward and training.
#[test]
fn a_nan_in_the_weights_or_the_recording_fails_the_check() {
    let dir = copy_of("model-tree", "nan-weight");
    edit_tensors(&dir, "weights.safetensors", |w| {
        let mut w = w.clone();
        let mut t = w.get("node.U_l.weight").unwrap().clone();
        t.data[0] = f32::NAN;
        w.insert("node.U_l.weight", t);
        w
    });
    for train in [false, true] {
        let (code, e) = check_run(&dir, train);
        assert_eq!(code, Some(1), "train {train}: {e}");
        assert!(e.contains("NaN or an infinity"), "train {train}: {e}");
    }
    let dir = copy_of("model-tree", "nan-expected");
    edit_tensors(&dir, "expected.safetensors", |x| {
        let mut x = x.clone();
        let names: Vec<String> = x.names().map(String::from).collect();
        for n in names
            .iter()
            .filter(|n| n.starts_with("out/") || n.starts_with("grad/"))
        {
            let mut t = x.get(n).unwrap().clone();
            t.data.iter_mut().for_each(|v| *v = f32::NAN);
            x.insert(n.clone(), t);
        }
        x
    });
    for train in [false, true] {
        let (code, e) = check_run(&dir, train);
        assert_eq!(code, Some(1), "train {train}: {e}");
        assert!(e.contains("NaN or an infinity"), "train {train}: {e}");
    }
}

/// Regression: an `expected.safetensors` without `loss` skipped the loss,
/// and one without gradients skipped them under `--train --check`. A
/// tensor the check needs is an error naming it.
#[test]
fn a_recording_missing_its_loss_or_a_gradient_is_an_error() {
    let without = |dir: &Path, drop: &dyn Fn(&str) -> bool| {
        edit_tensors(dir, "expected.safetensors", |x| {
            let mut out = engine::modeldir::Tensors::default();
            for n in x.names().filter(|n| !drop(n)) {
                out.insert(n, x.get(n).unwrap().clone());
            }
            out
        });
    };
    let dir = copy_of("model-tree", "no-loss");
    without(&dir, &|n| n == "loss");
    let (code, e) = check_run(&dir, false);
    assert_ne!(code, Some(0), "{e}");
    assert!(
        e.contains("`loss`") && e.contains("expected.safetensors"),
        "{e}"
    );
    let dir = copy_of("model-tree", "no-grads");
    without(&dir, &|n| n.starts_with("grad/"));
    let (code, e) = check_run(&dir, true);
    assert_ne!(code, Some(0), "{e}");
    assert!(
        e.contains("`grad/") && e.contains("expected.safetensors"),
        "{e}"
    );
}

/// Regression: `replay --model M --hidden 8`, `export-model --model M
/// --hidden 8` and `replay --executor reference --policy P` ran as if the
/// flag were absent. A flag the command would not read is a usage error
/// (exit 2) naming it.
#[test]
fn a_flag_the_command_would_not_read_is_refused() {
    let d = fixture("model-tree");
    let d = d.to_str().unwrap();
    let out = tmp("unread-flags");
    let out = out.to_str().unwrap();
    for (args, flag) in [
        (
            vec![
                "replay",
                "--model",
                d,
                "--executor",
                "cavs",
                "--hidden",
                "8",
            ],
            "--hidden 8",
        ),
        (
            vec!["replay", "--model", d, "--executor", "cavs", "--batch", "4"],
            "--batch 4",
        ),
        (
            vec!["export-model", "--model", d, "--hidden", "8", "--out", out],
            "--hidden 8",
        ),
        (vec!["script", "--model", d, "--batch", "4"], "--batch 4"),
        (
            vec![
                "replay",
                "--model",
                d,
                "--executor",
                "reference",
                "--policy",
                "agenda",
            ],
            "--policy agenda",
        ),
        (
            vec![
                "replay",
                "--model",
                d,
                "--executor",
                "cavs",
                "--layouts",
                out,
            ],
            "--layouts",
        ),
    ] {
        let o = engine(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(flag) && e.contains("drop"), "{args:?}: {e}");
    }
}

/// Regression: for a model folder, the layouts' errors suggested `planner
/// layout --all`, which plans zoo workloads, not the folder's cells.
#[test]
fn a_model_folders_layout_errors_suggest_planning_that_folder() {
    let d = fixture("model-tree");
    let d = d.to_str().unwrap();
    let missing = tmp("no-layouts");
    for extra in [vec![], vec!["--layouts", missing.to_str().unwrap()]] {
        let mut args = vec!["replay", "--model", d, "--executor", "edbatch:agenda"];
        args.extend(extra);
        let e = stderr(&engine(&args));
        assert!(e.contains(&format!("planner layout --model {d}")), "{e}");
        assert!(!e.contains("--all"), "{e}");
    }
}

/// Regression: `export-model` of a trace without a loss node wrote an
/// export whose reference loss read 0 and exited 0.
#[test]
fn exporting_a_model_without_a_loss_is_refused() {
    let dir = copy_of("model-tree", "no-loss-role");
    let manifest = dir.join("model.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    for r in m["roles"].as_array_mut().unwrap() {
        r["loss"] = serde_json::Value::Bool(false);
    }
    std::fs::write(&manifest, serde_json::to_string(&m).unwrap()).unwrap();
    let out = tmp("no-loss.safetensors");
    let o = engine(&[
        "export-model",
        "--model",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("no loss node") && e.contains("would read 0"),
        "{e}"
    );
    assert!(!out.exists());
}

/// Regression (issue 45, class 3): a folder whose `leaf` cell was replaced
/// by one with fewer outputs made `replay` and `train` panic at
/// `store.rs:61` and `script` at `vpps/compile.rs:478`, while `inspect`
/// and `schedule` exited 0. Every command now refuses it when it opens the
/// folder, with the same message, exit 1, no panic.
#[test]
fn panic_on_a_misfit_cell_every_command_refuses_the_folder_alike() {
    let dir = copy_of("model-tree", "misfit-cell");
    let leaf = dir.join("cells/leaf.yaml");
    let text = std::fs::read_to_string(&leaf).unwrap();
    std::fs::write(
        &leaf,
        text.replace("outputs: [\"mul_1\", \"mul\"]", "outputs: [\"mul_1\"]"),
    )
    .unwrap();
    let d = dir.to_str().unwrap();
    let out = tmp("misfit-out");
    let out = out.to_str().unwrap();
    for args in [
        vec!["replay", "--model", d, "--executor", "cavs"],
        vec!["replay", "--model", d, "--executor", "cavs", "--train"],
        vec!["train", "--model", d, "--epochs", "1"],
        vec!["script", "--model", d],
        vec!["inspect", "--model", d],
        vec!["schedule", "--model", d],
        vec!["export-model", "--model", d, "--out", out],
    ] {
        let o = engine(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{args:?}: {e}");
        assert!(
            e.contains("field `roles[2].ports[0]`: role `leaf` feeds it")
                && e.contains("only 1 output(s)"),
            "{args:?}: {e}"
        );
    }
}

/// Regression (issue 45, class 4): an output path that is a file of the
/// input model folder, or another input of the command, was written over
/// (the recording destroyed, exit 0). Each is refused before anything is
/// written, naming both flags, and the folder is left byte for byte.
#[test]
fn outputs_onto_the_input_folder_are_refused_and_destroy_nothing() {
    let dir = copy_of("model-tree", "clobber");
    let d = dir.to_str().unwrap();
    let before: Vec<(PathBuf, Vec<u8>)> = [
        "model.json",
        "trace.json",
        "weights.safetensors",
        "cells/leaf.yaml",
    ]
    .iter()
    .map(|f| (dir.join(f), std::fs::read(dir.join(f)).unwrap()))
    .collect();
    let policy = tmp("clobber-policy.yaml");
    std::fs::write(&policy, "not read: refused first\n").unwrap();
    let p = policy.to_str().unwrap();
    let at = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let (weights, leaf, new_cell, manifest) = (
        at("weights.safetensors"),
        at("cells/leaf.yaml"),
        at("cells/export.bin"),
        at("model.json"),
    );
    for (args, said) in [
        (
            vec![
                "train",
                "--model",
                d,
                "--epochs",
                "1",
                "--checkpoint",
                &weights,
            ],
            "--checkpoint",
        ),
        (
            vec![
                "schedule", "--model", d, "--policy", "depth", "--out", &leaf,
            ],
            "inside --model",
        ),
        (
            vec!["export-model", "--model", d, "--out", &new_cell],
            "inside --model",
        ),
        (
            vec![
                "export-model",
                "--trace",
                &at("trace.json"),
                "--out",
                &manifest,
            ],
            "the same file as --trace",
        ),
        (
            vec![
                "train",
                "--model",
                d,
                "--epochs",
                "1",
                "--policy",
                p,
                "--checkpoint",
                p,
            ],
            "the same file as --policy",
        ),
    ] {
        let o = engine(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(
            e.contains(said) && e.contains("refusing to overwrite"),
            "{args:?}: {e}"
        );
    }
    for (f, bytes) in before {
        assert_eq!(std::fs::read(&f).unwrap(), bytes, "{} changed", f.display());
    }
    assert!(!dir.join("cells/export.bin").exists());
    assert_eq!(
        std::fs::read_to_string(&policy).unwrap(),
        "not read: refused first\n"
    );
}
