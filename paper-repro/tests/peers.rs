//! The peers: the harness's unit tests (Python, no DyNet needed), the item
//! skipping visibly without its environment, the batchlab worker's errors,
//! and — where the peers' environment with DyNet exists — the real DyNet
//! against batchlab on all six workloads of the issue (same loss, DyNet's
//! batch count explained exactly, same ops) and one quick `peers` sweep.

mod common;

use common::harness::{Outcome, skip};

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run, texts, tmp};
use engine::cells::CellLibrary;
use engine::trace::Level;
use engine::workloads::{DataChoice, RecordOptions, record, workload};
use experiments::Row;
use experiments::config::RunConfig;
use experiments::rows::Metrics;

const WORKLOADS: [&str; 6] = [
    "tree-lstm",
    "tree-gru",
    "bilstm-tagger",
    "lstm-nmt",
    "lattice-lstm",
    "lattice-gru",
];

fn harness_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers")
}

/// Exports of small traces of the six workloads into `dir`.
fn exports(dir: &Path) {
    let cells = CellLibrary::builtin().unwrap();
    for w in WORKLOADS {
        let t = record(
            &RecordOptions {
                workload: workload(w).unwrap(),
                data: DataChoice::Default,
                batch: 2,
                hidden: 8,
                level: Level::Cell,
                seed: 7,
            },
            &cells,
        )
        .unwrap();
        engine::export::export(&t, &cells, 7, engine::export::Reference::Gradients)
            .unwrap()
            .write(&dir.join(format!("{w}.safetensors")))
            .unwrap();
        // The batched PyTorch peers read which sample each node is of.
        t.write(&dir.join(format!("{w}.json"))).unwrap();
    }
}

/// Runs the harness's unittest suite with `python`; the suite's output.
fn unit_tests(python: &Path, exports: &Path) -> String {
    unit_tests_with(python, exports, &[])
}

/// [`unit_tests`] with extra environment variables.
fn unit_tests_with(python: &Path, exports: &Path, env: &[(String, PathBuf)]) -> String {
    let o = Command::new(python)
        .args(["-m", "unittest", "discover", "-v", "-s", "tests", "-t", "."])
        .current_dir(harness_dir())
        .env(
            "PYTHONPATH",
            std::env::join_paths([
                harness_dir(),
                paper_repro::peers_env::batchlab_torch_source(),
            ])
            .unwrap(),
        )
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("OMP_NUM_THREADS", "1")
        .env("BATCHLAB_TEST_EXPORTS", exports)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("python starts");
    let (out, err) = texts(&o);
    assert!(
        o.status.success(),
        "harness unit tests failed:\n{out}\n{err}"
    );
    err
}

/// Whether unittest's verbose log says `test` ran and passed (not skipped).
fn passed(log: &str, test: &str) -> bool {
    log.lines()
        .any(|l| l.starts_with(test) && l.trim_end().ends_with("... ok"))
}

fn python3() -> Option<PathBuf> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| PathBuf::from("python3"))
}

/// The peers' environment's Python, if it has DyNet.
fn peers_python() -> Option<PathBuf> {
    let dir = paper_repro::peers_env::default_dir(None);
    let env = paper_repro::peers_env::open(&dir).ok()?;
    env.frameworks
        .get("dynet")
        .is_some_and(Result::is_ok)
        .then_some(env.python)
}

fn harness_unit_tests_pass_without_dynet() -> Outcome {
    let Some(py) = python3() else {
        return skip("python3", "no python3 on PATH");
    };
    let dir = tmp("peers-exports");
    exports(&dir);
    let log = unit_tests(&py, &dir);
    assert!(
        passed(&log, "test_real_traces_reach_batchlabs_agenda_count"),
        "{log}"
    );
    Outcome::Passed
}

fn real_dynet_matches_batchlab_on_the_six_workloads() -> Outcome {
    let Some(py) = peers_python() else {
        return skip(
            "dynet",
            "no peers environment with DyNet (install it with `paper-repro peers --install`)",
        );
    };
    let dir = tmp("peers-exports-dynet");
    exports(&dir);
    let log = unit_tests(&py, &dir);
    assert!(
        passed(&log, "test_same_weights_same_loss_and_batches"),
        "{log}"
    );
    Outcome::Passed
}

/// The peers' environment's Python, if it has PyTorch.
fn torch_python() -> Option<PathBuf> {
    let dir = paper_repro::peers_env::default_dir(None);
    let env = paper_repro::peers_env::open(&dir).ok()?;
    env.frameworks
        .get("torch")
        .is_some_and(Result::is_ok)
        .then_some(env.python)
}

fn pytorch_batched_by_depth_agenda_and_fsm_matches_batchlab_on_the_six_workloads() -> Outcome {
    let Some(py) = torch_python() else {
        return skip(
            "torch",
            "no peers environment with PyTorch (install it with `paper-repro peers --install --peers torch`)",
        );
    };
    // The schedules and the FSM come from the binaries this `cargo test` built.
    let bins = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.to_path_buf()));
    let mut env = Vec::new();
    for tool in ["engine", "search"] {
        match bins.as_ref().map(|d| d.join(tool)).filter(|p| p.is_file()) {
            Some(p) => env.push((format!("BATCHLAB_{}", tool.to_uppercase()), p)),
            None => {
                return skip(
                    "binaries",
                    format!("`{tool}` not built beside this test (run `cargo test --workspace`)"),
                );
            }
        }
    }
    let dir = tmp("peers-exports-torch");
    exports(&dir);
    let log = unit_tests_with(&py, &dir, &env);
    for test in [
        "test_batched_peers_equal_the_reference",
        "test_torch_levels_equals_the_reference",
        "test_torch_levels_state_in_lists_or_buffers_gives_the_same_numbers",
        "test_torch_fsm_without_its_training_trace_is_an_error",
        "test_device_cuda_runs_pytorch_there_and_refuses_what_cannot",
    ] {
        assert!(passed(&log, test), "{test}: {log}");
    }
    Outcome::Passed
}

fn dgl_matches_batchlab_on_the_six_workloads() -> Outcome {
    let dir = paper_repro::peers_env::default_dir(None);
    let py = paper_repro::peers_env::open(&dir)
        .ok()
        .filter(|e| e.frameworks.get("dgl").is_some_and(Result::is_ok))
        .and_then(|e| e.dgl_python);
    let Some(py) = py else {
        return skip(
            "dgl",
            "no DGL environment (install it with `paper-repro peers --install --peers dgl`)",
        );
    };
    let out = tmp("peers-exports-dgl");
    exports(&out);
    let log = unit_tests(&py, &out);
    assert!(passed(&log, "test_dgl_equals_the_reference"), "{log}");
    Outcome::Passed
}

fn peers_item_skips_visibly_without_its_environment() -> Outcome {
    let out = tmp("peers-skip");
    let o = run(&[
        "--quick",
        "--only",
        "peers",
        "--peers-env",
        out.join("no-env").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let (stdout, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let item = &s["items"][0];
    assert_eq!(item["name"], "peers");
    assert_eq!(item["status"], "skipped", "{item}");
    assert!(
        item["reason"]
            .as_str()
            .unwrap()
            .contains("paper-repro peers --install"),
        "{item}"
    );
    let report = std::fs::read_to_string(out.join("REPORT.md")).unwrap();
    assert!(report.contains("paper-repro peers --install"));
    assert!(!out.join("no-env").exists(), "nothing may be created");
    Outcome::Passed
}

fn peers_status_says_how_to_install() -> Outcome {
    let dir = tmp("peers-status");
    let o = run(&[
        "peers",
        "--peers-env",
        dir.join("none").to_str().unwrap(),
        "--json",
    ]);
    let (stdout, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .contains("paper-repro peers --install")
    );
    let o = run(&["peers", "--install", "--peers", "dynet,tensorflow"]);
    let (_, err) = texts(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("unknown peer framework \"tensorflow\""),
        "{err}"
    );
    Outcome::Passed
}

fn worker_rejects_bad_flags_with_a_message() -> Outcome {
    let o = run(&["worker", "--trace", "/no/such/trace.json"]);
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("missing --seed"), "{err}");
    let o = run(&[
        "worker",
        "--trace",
        "/no/such/trace.json",
        "--seed",
        "1",
        "--system",
        "cavs",
        "--repeats",
        "1",
        "--threads",
        "1",
        "--result",
        "/tmp/x.json",
    ]);
    let (_, err) = texts(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("/no/such/trace.json"), "{err}");
    Outcome::Passed
}

fn quick_peers_sweep_with_dynet() -> Outcome {
    if peers_python().is_none() {
        return skip(
            "dynet",
            "no peers environment with DyNet (install it with `paper-repro peers --install`)",
        );
    }
    let out = tmp("peers-sweep");
    let specs = out.join("specs");
    std::fs::create_dir_all(&specs).unwrap();
    std::fs::write(
        specs.join("peers.yaml"),
        "kind: peers\nname: peers\nworkloads: [tree-gru]\nbatches: [2]\nhiddens: [8]\n\
         systems: [dynet-agenda, reference, edbatch]\nrepeats: 1\nrounds: 2\nfsm: { episodes: 20 }\n",
    )
    .unwrap();
    let o = run(&[
        "--only",
        "peers",
        "--specs",
        specs.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let (stdout, err) = texts(&o);
    assert!(o.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(s["items"][0]["status"], "ok", "{}", s["items"][0]);
    let rows: Vec<Row> =
        serde_json::from_str(&std::fs::read_to_string(out.join("rows/peers.json")).unwrap())
            .unwrap();
    for r in &rows {
        let (RunConfig::Peers(c), Some(Metrics::Peers(m))) = (&r.config, &r.metrics) else {
            panic!("not a measured peers row: {r:?}")
        };
        assert!(m.loss_rel_err.unwrap() <= 1e-4, "{r:?}");
        assert_eq!(m.rounds_ok, 2, "{r:?}");
        assert!(m.cpu_s > 0.0, "{r:?}");
        if c.system == "dynet-agenda" {
            // The simulated chain starts at DyNet's count and ends at
            // batchlab's agenda count.
            let step = |k: &str| m.attribution.as_ref().and_then(|a| a[k].as_u64());
            assert_eq!(m.batches, step("dynet"), "{r:?}");
            assert_eq!(m.agenda_batches, step("+ties"), "{r:?}");
            assert_eq!(m.program_ops, Some(m.expected_ops), "{r:?}");
            assert!(m.version.starts_with("2."), "{r:?}");
        }
    }
    for f in ["peers.png", "peers.svg", "peers.csv", "peers-checks.csv"] {
        common::check_file(&out.join(f));
    }
    Outcome::Passed
}

fn main() -> std::process::ExitCode {
    common::harness::main(tests![
        harness_unit_tests_pass_without_dynet,
        real_dynet_matches_batchlab_on_the_six_workloads,
        pytorch_batched_by_depth_agenda_and_fsm_matches_batchlab_on_the_six_workloads,
        dgl_matches_batchlab_on_the_six_workloads,
        peers_item_skips_visibly_without_its_environment,
        peers_status_says_how_to_install,
        worker_rejects_bad_flags_with_a_message,
        quick_peers_sweep_with_dynet,
    ])
}
