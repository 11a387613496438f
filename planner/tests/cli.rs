//! End-to-end tests of the `planner` binary: exit codes, messages, JSON fields.

use std::path::PathBuf;
use std::process::{Command, Output};

fn planner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_planner"))
        .args(args)
        .output()
        .expect("planner runs")
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("batchlab-planner-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Writes the LSTM layout at hidden 64, batch 8 and returns its path.
fn lstm_layout(name: &str) -> PathBuf {
    let out = tmp(name);
    let o = planner(&[
        "layout",
        "--cell",
        "lstm",
        "--hidden",
        "64",
        "--batch",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

#[test]
fn layout_json_reports_planned_and_baseline() {
    let out = tmp("gru.json");
    let base = tmp("gru-dynet.json");
    let r = json(&planner(&[
        "layout",
        "--cell",
        "gru",
        "--hidden",
        "64",
        "--batch",
        "8",
        "--json",
        "--out",
        out.to_str().unwrap(),
        "--baseline-out",
        base.to_str().unwrap(),
    ]));
    assert_eq!(r["cell"], "gru");
    assert_eq!(r["batches"], 8);
    assert_eq!(r["planned"]["copy_bytes"], 0);
    assert!(r["baseline"]["copy_bytes"].as_u64().unwrap() > 0);
    assert!(
        r["ratios"]["copy_bytes"].is_null(),
        "planned 0: no finite ratio"
    );
    assert!(r["compile_ms"].as_f64().unwrap() >= 0.0);
    for f in [&out, &base] {
        let c = json(&planner(&["check", f.to_str().unwrap(), "--json"]));
        assert_eq!(c["ok"], true);
        assert_eq!(c["batches"], 8);
    }
    let c = json(&planner(&["check", base.to_str().unwrap(), "--json"]));
    assert_eq!(c["allocation"], "dynet");
    assert!(c["copies"].as_u64().unwrap() > 0);
}

#[test]
fn layout_all_lists_every_builtin_cell() {
    let r = json(&planner(&[
        "layout", "--all", "--hidden", "8", "--batch", "2", "--json",
    ]));
    let rows = r.as_array().unwrap();
    assert_eq!(
        rows.len(),
        engine::cells::CellLibrary::builtin().unwrap().len()
    );
    assert!(rows.iter().any(|row| row["cell"] == "tree_lstm.internal"));
    let text = planner(&["layout", "--all", "--hidden", "8", "--batch", "2"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("all removed"));
}

/// Regression: `planner layout --out` into a missing folder failed with
/// ENOENT while every other tool creates the folder; `planner check` on a
/// policy file said "expected ident at line 1 column 2".
#[test]
fn layout_out_creates_its_folder_and_check_names_a_foreign_file() {
    let _ = std::fs::remove_dir_all(tmp("new"));
    let out = tmp("new/deeper/lstm.json").display().to_string();
    let line = format!("layout --cell lstm --hidden 16 --batch 4 --out {out}");
    let o = planner(&line.split_whitespace().collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&planner(&["check", &out, "--json"]))["ok"], true);
    let cases = [
        (
            "policy.yaml",
            "format: batchlab-policy\nversion: 2\n",
            "batchlab-policy file, not a layout",
        ),
        ("notes.txt", "hello\n", "a layout file is a JSON object"),
    ];
    for (name, text, want) in cases {
        let f = tmp(name);
        std::fs::write(&f, text).unwrap();
        let o = planner(&["check", f.to_str().unwrap()]);
        let e = stderr(&o);
        assert!(o.status.code() == Some(1) && e.contains(want), "{e}");
        assert!(
            e.contains("planner layout --out") && !e.contains("line 1"),
            "{e}"
        );
    }
}

#[test]
fn unknown_cell_lists_the_known_ones() {
    let o = planner(&["layout", "--cell", "nope", "--hidden", "64", "--batch", "8"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("unknown cell `nope`") && e.contains("lstm"),
        "{e}"
    );
}

#[test]
fn cell_file_with_a_dangling_operand_is_reported_with_its_line() {
    let f = tmp("dangling.yaml");
    std::fs::write(
        &f,
        "name: my\nports:\n  - name: x\n    arity: one\n    inputs:\n      - {name: x, shape: [h]}\nops:\n  - {out: y, op: tanh, args: [nope]}\noutputs: [y]\n",
    )
    .unwrap();
    let o = planner(&[
        "layout",
        "--cell",
        "my",
        "--hidden",
        "8",
        "--batch",
        "2",
        "--cells",
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("dangling.yaml:8") && e.contains("undefined operand `nope`"),
        "{e}"
    );
}

#[test]
fn corrupt_layout_file_reports_line_and_column() {
    let f = tmp("corrupt.json");
    std::fs::write(
        &f,
        "{\n  \"format\": \"batchlab-layout\",\n  \"version\": 1,\n  oops\n}\n",
    )
    .unwrap();
    let o = planner(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("corrupt.json:4:"), "{e}");
    let o = planner(&["check", tmp("missing.json").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("missing.json"));
}

#[test]
fn layout_edited_to_another_hidden_size_is_rejected_clearly() {
    let f = lstm_layout("lstm-h.json");
    let text = std::fs::read_to_string(&f).unwrap();
    let edited = tmp("lstm-h32.json");
    std::fs::write(
        &edited,
        text.replacen("\"hidden\": 64", "\"hidden\": 32", 1),
    )
    .unwrap();
    let o = planner(&["check", edited.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("hidden 32") && e.contains("another hidden size"),
        "{e}"
    );
    let o = planner(&["check", f.to_str().unwrap(), "--hidden", "32"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("for hidden size 64 but --hidden 32"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn wrong_format_field_is_rejected() {
    let f = lstm_layout("lstm-fmt.json");
    let text = std::fs::read_to_string(&f).unwrap();
    let edited = tmp("lstm-fmt2.json");
    std::fs::write(
        &edited,
        text.replacen("\"version\": 1", "\"version\": 7", 1),
    )
    .unwrap();
    let o = planner(&["check", edited.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("version 7"), "{}", stderr(&o));
}

#[test]
fn explain_prints_every_phase() {
    let o = planner(&["explain", "--cell", "lstm"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    for phase in [
        "after construction",
        "BROADCASTCONSTRAINT",
        "DECIDENODESORDER",
        "copy plan",
    ] {
        assert!(text.contains(phase), "missing {phase}");
    }
    let r = json(&planner(&["explain", "--cell", "tree_gru.leaf", "--json"]));
    assert_eq!(r["order"].as_array().unwrap().len(), 10);
    assert!(r["decided"].as_str().unwrap().starts_with('{'));
}

#[test]
fn every_subcommand_documents_json_in_help() {
    for sub in ["layout", "check", "explain"] {
        let o = planner(&[sub, "--help"]);
        assert!(o.status.success());
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("--json"),
            "{sub}"
        );
    }
    let o = planner(&["layout", "--hidden", "8", "--batch", "2"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "missing --cell/--all is a usage error"
    );
}

#[test]
fn layout_plans_every_cell_of_a_model_folder() {
    let folder =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../engine/core/tests/fixtures/model-tree");
    let out = tmp("model-layouts");
    let rows = json(&planner(&[
        "layout",
        "--model",
        folder.to_str().unwrap(),
        "--batch",
        "8",
        "--out-dir",
        out.to_str().unwrap(),
        "--json",
    ]));
    let cells: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cell"].as_str().unwrap())
        .collect();
    for c in ["leaf", "node", "out"] {
        assert!(cells.contains(&c), "{cells:?}");
        assert!(out.join(format!("{c}.json")).exists());
        assert!(out.join(format!("{c}.baseline.json")).exists());
    }
    // The folder's cells only: no built-in cell is planned beside them.
    assert!(!cells.contains(&"lstm"));
    let o = planner(&["layout", "--model", "/no/such/folder", "--batch", "8"]);
    assert!(
        !o.status.success() && stderr(&o).contains("no such folder"),
        "{}",
        stderr(&o)
    );
}

/// Regression (bad input round two): `--out` equal to a `--cells` file, or
/// to `--baseline-out`, overwrote it with exit 0; both are refused.
#[test]
fn out_equal_to_cells_or_baseline_out_is_refused() {
    let cells = tmp("same-path-cell.yaml");
    let text = "name: same_path\nports:\n  - {name: x, shape: [h]}\nparams:\n  - {name: W, shape: [h, h]}\nops:\n  - {out: y, op: matmul, args: [W, x]}\noutputs: [y]\n";
    std::fs::write(&cells, text).unwrap();
    let c = cells.to_str().unwrap();
    let o = planner(&[
        "layout",
        "--cell",
        "same_path",
        "--hidden",
        "4",
        "--batch",
        "2",
        "--cells",
        c,
        "--out",
        c,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the same file as --cells"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(&cells).unwrap(), text);
    let l = tmp("same-path-layout.json");
    let l = l.to_str().unwrap();
    let o = planner(&[
        "layout",
        "--cell",
        "lstm",
        "--hidden",
        "4",
        "--batch",
        "2",
        "--out",
        l,
        "--baseline-out",
        l,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("another output"), "{}", stderr(&o));
}

/// A copy of the committed model folder `model-tree` at `to`.
fn model_copy(to: &str) -> PathBuf {
    let src =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../engine/core/tests/fixtures/model-tree");
    let dst = tmp(to);
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(dst.join("cells")).unwrap();
    for sub in ["", "cells"] {
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, dst.join(sub).join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    dst
}

/// Regression (issue 45, class 4): `planner layout --out M/model.json`, and
/// `--out-dir M` when a cell is named `model`, wrote over the folder's
/// manifest. Both are refused before anything is written.
#[test]
fn layout_outputs_onto_the_model_folder_are_refused() {
    let dir = model_copy("clobber-model");
    let d = dir.to_str().unwrap();
    let manifest = std::fs::read(dir.join("model.json")).unwrap();
    let out = dir.join("model.json");
    let o = planner(&[
        "layout",
        "--model",
        d,
        "--batch",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the same file as --model"),
        "{}",
        stderr(&o)
    );
    // A cell named `model`: its planned layout would be M/model.json.
    let text = std::fs::read_to_string(dir.join("model.json")).unwrap();
    std::fs::write(
        dir.join("model.json"),
        text.replace("\"cell\": \"out\"", "\"cell\": \"model\""),
    )
    .unwrap();
    let cell = std::fs::read_to_string(dir.join("cells/out.yaml")).unwrap();
    std::fs::write(
        dir.join("cells/model.yaml"),
        cell.replace("name: \"out\"", "name: \"model\""),
    )
    .unwrap();
    let renamed = std::fs::read(dir.join("model.json")).unwrap();
    let o = planner(&["layout", "--model", d, "--batch", "4", "--out-dir", d]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--out-dir") && stderr(&o).contains("the same file as --model"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(dir.join("model.json")).unwrap(), renamed);
    assert_ne!(renamed, manifest);
    // Planning into a folder of its own is fine.
    let o = planner(&[
        "layout",
        "--model",
        d,
        "--batch",
        "4",
        "--out-dir",
        dir.join("layouts").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}
