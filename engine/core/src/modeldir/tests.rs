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
        let w = d.weights();
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

/// Regression (found while fuzzing, docs/fuzzing.md): the manifest's
/// duplicate role and type checks, and `open`'s feeder and trace-type
/// checks, scanned the roles once per role: a 5 MB manifest of 50,000 roles
/// took seconds to check. They are set look-ups now; a folder of many roles
/// opens, and a duplicate or an unknown feeder in its last role is still
/// named.
#[test]
fn quadratic_role_checks_a_manifest_of_many_roles_is_checked_whole() {
    const EXTRA: usize = 20_000;
    let d = copy("model-tree", "many-roles");
    let m = d.join(MANIFEST);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    let roles = v["roles"].as_array_mut().unwrap();
    let base = roles.len();
    let leaf = roles.iter().find(|r| r["role"] == "leaf").unwrap().clone();
    for i in 0..EXTRA {
        let mut r = leaf.clone();
        r["role"] = format!("extra{i}").into();
        r["type"] = format!("extra{i}[4]").into();
        roles.push(r);
    }
    let last = base + EXTRA - 1;
    let text = serde_json::to_string(&v).unwrap();
    std::fs::write(&m, &text).unwrap();
    let opened = ModelDir::open(&d).unwrap();
    assert_eq!(opened.workload.roles.len(), base + EXTRA);
    assert_eq!(
        opened.manifest.roles[last].role,
        format!("extra{}", EXTRA - 1)
    );

    let parse_err = |v: &serde_json::Value| {
        Manifest::parse(&serde_json::to_string(v).unwrap(), "model.json")
            .unwrap_err()
            .to_string()
    };
    let mut dup = v.clone();
    dup["roles"][last]["role"] = "extra0".into();
    assert_eq!(
        parse_err(&dup),
        format!("model.json: field `roles[{last}].role`: `extra0` listed twice")
    );
    let mut dup = v.clone();
    dup["roles"][last]["type"] = "extra0[4]".into();
    assert_eq!(
        parse_err(&dup),
        format!(
            "model.json: field `roles[{last}].type`: `extra0[4]` is the type of an earlier role too"
        )
    );
    // The first duplicate in role order is the one named.
    let mut dup = v.clone();
    dup["roles"][last]["role"] = "extra1".into();
    dup["roles"][base + 5]["role"] = "extra2".into();
    assert!(parse_err(&dup).contains(&format!("roles[{}].role", base + 5)));

    let mut unknown = v.clone();
    unknown["roles"][last]["ports"][0] = serde_json::json!(["leaf", "nobody"]);
    std::fs::write(&m, serde_json::to_string(&unknown).unwrap()).unwrap();
    let e = err(&d);
    assert!(
        e.contains(&format!("field `roles[{last}].ports[0]`"))
            && e.contains("`nobody` is not a role of the model"),
        "{e}"
    );
}

/// Regression (issue 45, class 3): a role's cell replaced by another with
/// other outputs opened, and `engine replay|train` then panicked at
/// `store.rs:61`, `engine script` at `vpps/compile.rs:478`, while
/// `inspect` and `schedule` ran as if nothing were wrong. `open` checks
/// every feeder against the port that lists it.
#[test]
fn panic_on_a_cell_that_does_not_fit_its_readers_it_is_refused_at_open() {
    let d = copy("model-tree", "misfit");
    edit(
        &d.join("cells/leaf.yaml"),
        "outputs: [\"mul_1\", \"mul\"]",
        "outputs: [\"mul_1\"]",
    );
    let e = err(&d);
    assert!(
        e.contains("model.json: field `roles[2].ports[0]`")
            && e.contains("role `leaf` feeds it")
            && e.contains("only 1 output")
            && e.contains("cells/node.yaml against cells/leaf.yaml"),
        "{e}"
    );
}

fn set_role_field(d: &Path, role: &str, field: &str, value: serde_json::Value) {
    let m = d.join(MANIFEST);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    let roles = v["roles"].as_array_mut().unwrap();
    let r = roles.iter_mut().find(|r| r["role"] == role).unwrap();
    r[field] = value;
    std::fs::write(&m, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// Regression (issue 45, class 3): a loss on a role whose cell is not one
/// scalar, or on a role another role reads (its loss counted twice), was
/// accepted and trained on silently.
#[test]
fn a_loss_that_is_not_one_scalar_or_is_read_is_refused() {
    let d = copy("model-tree", "loss-vector");
    set_role_field(&d, "leaf", "loss", true.into());
    let e = err(&d);
    assert!(
        e.contains("field `roles[1].loss`") && e.contains("2 output(s) of shape [4], [4]"),
        "{e}"
    );
    let d = copy("model-tree", "loss-twice");
    set_role_field(&d, "out", "loss", true.into());
    let e = err(&d);
    assert!(
        e.contains("field `roles[4].ports[0]`")
            && e.contains("reads loss role `out`")
            && e.contains("count twice"),
        "{e}"
    );
}

/// Regression (issue 45, class 3): the manifest's counts and batchability
/// were never compared with the trace, and a node's instance out of range
/// surfaced later as "has no loss".
#[test]
fn a_manifest_that_disagrees_with_its_trace_names_the_field() {
    let d = copy("model-tree", "nodes");
    edit(&d.join(MANIFEST), "\"nodes\": 183", "\"nodes\": 184");
    let e = err(&d);
    assert!(
        e.contains("field `nodes`: says 184 nodes") && e.contains("has 183"),
        "{e}"
    );
    let d = copy("model-tree", "instances");
    edit(&d.join(MANIFEST), "\"instances\": 2", "\"instances\": 3");
    let e = err(&d);
    assert!(
        e.contains("trace.json") && e.contains("field `meta.batch_size`: 2"),
        "{e}"
    );
    let d = copy("model-tree", "instance");
    edit(
        &d.join("trace.json"),
        "{\"type\": 1, \"args\": [89], \"instance\": 1}",
        "{\"type\": 1, \"args\": [89], \"instance\": 7}",
    );
    let e = err(&d);
    assert!(
        e.contains("node 90: field `instance`: 7 is out of range") && e.contains("2 samples"),
        "{e}"
    );
    let d = copy("model-tree", "batchable");
    set_role_field(&d, "leaf", "batchable", false.into());
    let e = err(&d);
    assert!(
        e.contains("field `roles[1].batchable`: false")
            && e.contains("type `leaf[4]` is batchable"),
        "{e}"
    );
}

/// Regression (issue 45, class 3): a node whose arguments fit none of its
/// cell's ports opened, and only the executors refused it.
#[test]
fn a_node_whose_arguments_fit_no_port_is_refused_at_open() {
    let d = copy("model-tree", "args");
    edit(
        &d.join("trace.json"),
        "{\"type\": 3, \"args\": [1], \"instance\": 0, \"data\": {\"label\": 3}}",
        "{\"type\": 3, \"args\": [0], \"instance\": 0, \"data\": {\"label\": 3}}",
    );
    let e = err(&d);
    assert!(
        e.contains("trace.json: node 2 (type `out[4;int]`): field `args`")
            && e.contains("embedding.embed"),
        "{e}"
    );
}

/// Regression (issue 45, class 3): `inspect`, `schedule` and `planner
/// layout` accepted a folder whose weights were missing, truncated or of
/// another shape than the cells; only the executors read them.
#[test]
fn missing_truncated_or_misshapen_weights_are_refused_at_open() {
    let d = copy("model-tree", "no-weights");
    std::fs::remove_file(d.join("weights.safetensors")).unwrap();
    let e = err(&d);
    assert!(e.contains("weights.safetensors"), "{e}");
    let d = copy("model-tree", "cut-weights");
    let bytes = std::fs::read(d.join("weights.safetensors")).unwrap();
    std::fs::write(d.join("weights.safetensors"), &bytes[..bytes.len() - 4]).unwrap();
    let e = err(&d);
    assert!(
        e.contains("weights.safetensors: not a readable safetensors file"),
        "{e}"
    );
    let d = copy("model-tree", "shape-weights");
    let mut w = Tensors::read(&d.join("weights.safetensors")).unwrap();
    w.insert("out.proj.bias", Tensor::new(vec![6], vec![0.0; 6]));
    w.write(&d.join("weights.safetensors"), &Default::default())
        .unwrap();
    let e = err(&d);
    assert!(
        e.contains("tensor `out.proj.bias` has shape [6]")
            && e.contains("cell `out` (cells/out.yaml)"),
        "{e}"
    );
}
