//! Model folders: the committed fixtures (recorded by batchlab_torch from
//! its Tree-LSTM and DAG-RNN examples; `engine/torch/tests/test_fixtures.py`
//! keeps them current) open, and every way a folder can be wrong is an error
//! naming the file and what is wrong.

use std::path::{Path, PathBuf};

use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A temporary folder, removed when dropped.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A writable copy of fixture `name` in a fresh temporary folder.
fn copy(name: &str, tag: &str) -> Scratch {
    let dst = std::env::temp_dir().join(format!("batchlab-modeldir-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    let dst = Scratch(dst);
    std::fs::create_dir_all(dst.join("cells")).unwrap();
    let src = fixture(name);
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

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{}: no {from:?}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

fn err(dir: &Path) -> String {
    ModelDir::open(dir).unwrap_err().to_string()
}

#[test]
fn both_fixtures_open_and_define_their_workload() {
    for name in ["model-tree", "model-dag"] {
        let d = ModelDir::open(&fixture(name)).unwrap();
        assert!(d.workload.imported);
        assert_eq!(d.cells.workload(&d.manifest.name), Some(d.workload.clone()));
        for (_, t) in d.trace.graph.types().iter() {
            assert!(
                d.workload.type_role(&t.name, 0).is_ok(),
                "{name}: {}",
                t.name
            );
        }
        assert!(
            d.workload.roles.iter().any(|r| r.loss),
            "{name} has a loss role"
        );
        let w = d.weights().unwrap();
        assert!(!w.is_empty());
        assert!(d.expected().unwrap().unwrap().get("loss").is_some());
    }
}

#[test]
fn a_manifest_with_an_unknown_field_names_it_with_its_line() {
    let d = copy("model-tree", "unknown");
    edit(
        &d.join(MANIFEST),
        "\"hidden\":",
        "\"hiden\": 1, \"hidden\":",
    );
    let e = err(&d);
    assert!(e.contains("model.json:") && e.contains("hiden"), "{e}");
}

#[test]
fn format_and_version_are_checked_first() {
    let d = copy("model-tree", "version");
    edit(&d.join(MANIFEST), "\"version\": 1", "\"version\": 7");
    assert!(err(&d).contains("field `version`: unsupported version 7"));
    let d = copy("model-tree", "format");
    edit(&d.join(MANIFEST), "batchlab-model", "batchlab-trace");
    assert!(err(&d).contains("field `format`"));
}

#[test]
fn a_zoo_workload_name_is_refused() {
    let d = copy("model-tree", "zoo");
    edit(
        &d.join(MANIFEST),
        "\"name\": \"torch-tree-lstm\"",
        "\"name\": \"tree-lstm\"",
    );
    assert!(err(&d).contains("built-in workload"));
}

#[test]
fn a_missing_or_misnamed_cell_file_is_named() {
    let d = copy("model-tree", "missing");
    std::fs::remove_file(d.join("cells/node.yaml")).unwrap();
    let e = err(&d);
    assert!(e.contains("cells/node.yaml") && e.contains(".cell"), "{e}");
    let d = copy("model-tree", "misnamed");
    std::fs::copy(d.join("cells/leaf.yaml"), d.join("cells/node.yaml")).unwrap();
    let e = err(&d);
    assert!(
        e.contains("node.yaml") && e.contains("defines cell `leaf`"),
        "{e}"
    );
}

#[test]
fn ports_that_disagree_with_the_cell_are_named() {
    let d = copy("model-tree", "ports");
    let m = d.join(MANIFEST);
    let text = std::fs::read_to_string(&m).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let roles = v["roles"].as_array_mut().unwrap();
    let node = roles.iter_mut().find(|r| r["role"] == "node").unwrap();
    node["ports"].as_array_mut().unwrap().pop();
    std::fs::write(&m, serde_json::to_string(&v).unwrap()).unwrap();
    let e = err(&d);
    assert!(
        e.contains("ports") && e.contains("cell `node` has 2"),
        "{e}"
    );
}

#[test]
fn a_trace_that_disagrees_with_the_manifest_is_a_mismatch() {
    let d = copy("model-tree", "trace-name");
    edit(
        &d.join("trace.json"),
        "\"torch-tree-lstm\"",
        "\"someone-else\"",
    );
    let e = err(&d);
    assert!(
        e.contains("trace.json") && e.contains("someone-else"),
        "{e}"
    );
    let d = copy("model-tree", "trace-type");
    edit(&d.join("trace.json"), "\"leaf[4]\"", "\"leaf[5]\"");
    let e = err(&d);
    assert!(e.contains("trace.json") && e.contains("leaf[5]"), "{e}");
}

#[test]
fn a_file_name_with_a_path_is_refused() {
    let d = copy("model-tree", "path");
    edit(&d.join(MANIFEST), "\"trace.json\"", "\"../trace.json\"");
    assert!(err(&d).contains("field `files.trace`"));
}

#[test]
fn not_a_folder_says_how_to_make_one() {
    let e = ModelDir::open(Path::new("/no/such/folder"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no such folder") && e.contains("batchlab_torch"),
        "{e}"
    );
}
