//! The committed model folders (recorded from PyTorch by batchlab_torch,
//! `engine/core/tests/fixtures`) replay with every CPU executor to the
//! numbers PyTorch computed — outputs, loss and, training, every gradient —
//! and a folder whose weights lack a tensor is an error naming it.

use std::path::{Path, PathBuf};

use engine_core::modeldir::ModelDir;
use engine_core::sched::{AgendaPolicy, heuristic};
use engine_replay::executor::{Executor, compile_layouts};
use engine_replay::expected;
use engine_replay::model;
use engine_replay::run::{BackwardSchedule, TrainOptions};
use engine_replay::session::{self, Session};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../core/tests/fixtures")
        .join(name)
}

fn executors() -> Vec<(&'static str, Executor)> {
    vec![
        ("reference", Executor::Reference),
        ("cavs", Executor::Cavs),
        ("policy", Executor::Policy(heuristic("agenda").unwrap())),
        ("dynet", Executor::Dynet(Box::new(AgendaPolicy::fixed()))),
    ]
}

#[test]
fn model_folders_replay_to_pytorchs_numbers_on_every_cpu_executor() {
    for name in ["model-tree", "model-dag"] {
        let dir = ModelDir::open(&fixture(name)).unwrap();
        let exp = dir.expected().unwrap().unwrap();
        let mut model = model::model(&dir.trace, &dir.cells, 7).unwrap();
        model.load_weights(dir.weights()).unwrap();
        for (label, mut ex) in executors() {
            let (_, store) = session::replay(&dir.trace, &model, &dir.cells, &mut ex).unwrap();
            let c = expected::check_outputs(&dir.trace, &model, &store, &exp).unwrap();
            assert!(c.passed, "{name} {label}: {c:?}");
            assert!(
                c.loss_rel_error.unwrap() <= expected::TOLERANCE,
                "{name} {label}"
            );
        }
    }
}

#[test]
fn model_folders_train_to_pytorchs_gradients() {
    for name in ["model-tree", "model-dag"] {
        let dir = ModelDir::open(&fixture(name)).unwrap();
        let exp = dir.expected().unwrap().unwrap();
        let mut model = model::model(&dir.trace, &dir.cells, 7).unwrap();
        model.load_weights(dir.weights()).unwrap();
        for (label, mut ex) in executors().into_iter().filter(|(l, _)| *l != "dynet") {
            let mut s = Session::open(
                engine_replay::device::DeviceKind::Cpu,
                &dir.trace,
                &model,
                &dir.cells,
                &mut ex,
            )
            .unwrap();
            let run = s
                .train(
                    BackwardSchedule::ReverseForward,
                    &TrainOptions { lazy: true },
                )
                .unwrap();
            assert!(run.loss.is_finite());
            let grads = s.gradients().unwrap();
            let (err, param) = expected::check_gradients(&model, &grads, &exp)
                .unwrap()
                .unwrap();
            assert!(err <= expected::TOLERANCE, "{name} {label}: {param} {err}");
        }
    }
}

#[test]
fn a_probe_agrees_op_by_op_with_pytorch() {
    let dir = ModelDir::open(&fixture("model-tree")).unwrap();
    let exp = dir.expected().unwrap().unwrap();
    let mut model = model::model(&dir.trace, &dir.cells, 7).unwrap();
    model.load_weights(dir.weights()).unwrap();
    for r in 0..model.roles.len() {
        if let Some(p) = expected::probe(&model, &exp, r) {
            assert_eq!(
                p,
                expected::ProbeResult::Agrees,
                "role {}",
                model.roles[r].role.role
            );
        }
    }
    // A wrong weight makes the probe name the first op that reads it.
    let node = model
        .roles
        .iter()
        .position(|r| r.role.role == "node")
        .unwrap();
    let w = model.roles[node]
        .cell
        .values
        .iter()
        .position(|v| v.name == "node.U_l.weight")
        .unwrap();
    model.roles[node].params[w][0] += 1.0;
    match expected::probe(&model, &exp, node) {
        Some(expected::ProbeResult::Differs { op, .. }) => assert_eq!(op, "affine"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn missing_and_misshapen_weights_are_named_with_their_file() {
    let dir = ModelDir::open(&fixture("model-tree")).unwrap();
    let mut w = dir.weights().clone();
    let mut model = model::model(&dir.trace, &dir.cells, 7).unwrap();
    let mut t = w.get("out.proj.bias").unwrap().clone();
    t.shape = vec![t.data.len() - 1];
    t.data.pop();
    w.insert("out.proj.bias", t);
    let e = model.load_weights(&w).unwrap_err().to_string();
    assert!(
        e.contains("weights.safetensors") && e.contains("out.proj.bias"),
        "{e}"
    );
}

/// The recorded `Linear(h).chunk(5)` reads its five slices in place on the
/// CPU (no copy, the gradient added into the affine's); the planner's
/// layout, which put the slices elsewhere, must still train to PyTorch's
/// gradients.
#[test]
fn sliced_affines_read_in_place_train_to_pytorchs_gradients_under_a_planned_layout() {
    let dir = ModelDir::open(&fixture("model-tree")).unwrap();
    let exp = dir.expected().unwrap().unwrap();
    let mut model = model::model(&dir.trace, &dir.cells, 7).unwrap();
    model.load_weights(dir.weights()).unwrap();
    let layouts = fixture("model-tree-layouts");
    let files: Vec<(String, engine_core::layout::LayoutFile)> = ["leaf", "node", "out"]
        .iter()
        .map(|c| {
            let p = layouts.join(format!("{c}.json"));
            let f = engine_core::layout::LayoutFile::read(&p).unwrap();
            (p.display().to_string(), f)
        })
        .collect();
    let progs = compile_layouts(&model, &files).unwrap();
    let mut ex = Executor::EdBatch(Box::new(AgendaPolicy::fixed()), progs);
    let mut s = Session::open(
        engine_replay::device::DeviceKind::Cpu,
        &dir.trace,
        &model,
        &dir.cells,
        &mut ex,
    )
    .unwrap();
    s.train(
        BackwardSchedule::ReverseForward,
        &TrainOptions { lazy: true },
    )
    .unwrap();
    let c = expected::check_outputs(&dir.trace, &model, s.outputs(), &exp).unwrap();
    assert!(c.passed, "{c:?}");
    let grads = s.gradients().unwrap();
    let (err, param) = expected::check_gradients(&model, &grads, &exp)
        .unwrap()
        .unwrap();
    assert!(err <= expected::TOLERANCE, "{param} {err}");
}
