//! The sweep runner: rows, resuming, error rows, determinism. Tiny sizes, no
//! timing assertions.

use std::path::PathBuf;

use experiments::{RunOptions, RunReport, parse_spec, run_spec};
use serde_json::Value;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("batchlab-exp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(yaml: &str, dir: &PathBuf) -> RunReport {
    let spec = parse_spec(yaml, "t.yaml", false).unwrap();
    let mut opts = RunOptions::new(dir);
    opts.quiet = true;
    run_spec(&spec, &opts).unwrap()
}

fn rows(path: &PathBuf) -> Vec<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

const POLICIES: &str = "kind: policies
name: pol
workloads: [tree-lstm, lattice-lstm]
batches: [2]
hiddens: [8]
seeds: [3]
policies: [depth, agenda, typewise, fsm-sort, fsm-best]
fsm: { episodes: 50 }
";

#[test]
fn resume_after_an_interrupted_sweep_runs_only_the_missing_rows() {
    let dir = tmp("resume");
    let first = run(POLICIES, &dir);
    assert_eq!((first.total, first.ran, first.failed), (10, 10, 0));
    // Cut the row file in the middle of its sixth line, as a kill would.
    // (Not at the file's middle byte: the ten rows are of nearly equal
    // length, so that byte often fell just before the fifth line's newline,
    // leaving a complete row without its line end, which is rightly kept.)
    let text = std::fs::read_to_string(&first.jsonl).unwrap();
    let kept = 5;
    let start: usize = text.split_inclusive('\n').take(kept).map(str::len).sum();
    let line = text[start..].split('\n').next().unwrap();
    let mut cut = start + line.len() / 2;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    std::fs::write(&first.jsonl, &text[..cut]).unwrap();
    assert_eq!(text[..cut].matches('\n').count(), kept);
    let second = run(POLICIES, &dir);
    assert_eq!(second.skipped, kept);
    assert_eq!(second.ran, 10 - kept);
    assert_eq!(second.warnings.len(), 1, "{:?}", second.warnings);
    assert!(
        second.warnings[0].contains("truncated"),
        "{:?}",
        second.warnings
    );
    // Complete again: nothing runs; the table has every run once, in order.
    let third = run(POLICIES, &dir);
    assert_eq!((third.ran, third.skipped), (0, 10));
    let table = rows(&third.json);
    assert_eq!(table.len(), 10);
    let order: Vec<u64> = table
        .iter()
        .map(|r| r["provenance"]["run"].as_u64().unwrap())
        .collect();
    assert_eq!(order, (0..10).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn policy_rows_carry_batches_ratios_and_fsm_fields() {
    let dir = tmp("policy-rows");
    let r = run(POLICIES, &dir);
    for row in rows(&r.json) {
        let m = &row["metrics"];
        let batches = m["batches"].as_u64().unwrap();
        let lb = m["lower_bound"].as_u64().unwrap();
        assert!(batches >= lb && lb > 0, "{row}");
        let ratio = m["ratio"].as_f64().unwrap();
        assert!((ratio - batches as f64 / lb as f64).abs() < 1e-12);
        let fsm = row["config"]["policy"]
            .as_str()
            .unwrap()
            .starts_with("fsm-");
        assert_eq!(m["encoding"].is_string(), fsm, "{row}");
        assert_eq!(m["train_s"].is_number(), fsm, "{row}");
        assert_eq!(row["provenance"]["seed"], 3);
        assert!(row["error"].is_null());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

const REPLAY: &str = "kind: replay
name: rep
workloads: [tree-lstm]
batches: [2]
hiddens: [8]
repeats: 1
devices: [cpu, 'cuda:9']
executors: [cavs, edbatch, reference]
fsm: { batch: 2, hidden: 8, episodes: 50, encodings: [sort] }
";

#[test]
fn a_failing_run_is_an_error_row_and_is_retried_on_resume() {
    let dir = tmp("errors");
    let first = run(REPLAY, &dir);
    // No machine has a ninth GPU: without CUDA libcuda is missing, with it
    // opening device 9 fails — either way an error row, not an abort.
    assert_eq!((first.total, first.ran, first.failed), (6, 6, 3));
    let table = rows(&first.json);
    for row in &table {
        let cuda = row["config"]["device"] == "cuda:9";
        assert_eq!(row["error"].is_string(), cuda, "{row}");
        assert_eq!(row["metrics"].is_null(), cuda, "{row}");
        if cuda {
            assert!(row["error"].as_str().unwrap().starts_with("CUDA"), "{row}");
        } else {
            let m = &row["metrics"];
            assert_eq!(
                m["max_rel_error"].as_f64().map(|e| e < 1e-4),
                Some(true),
                "{row}"
            );
            assert_eq!(row["samples"].as_array().unwrap().len(), 1);
        }
    }
    let edbatch = &table[1]["metrics"];
    assert_eq!(table[1]["config"]["executor"], "edbatch");
    assert_eq!(edbatch["policy"], "fsm(sort)");
    let second = run(REPLAY, &dir);
    assert_eq!(
        (second.skipped, second.ran, second.retried, second.failed),
        (3, 3, 3, 3)
    );
    // The CSV: a header and one line per run.
    let csv = std::fs::read_to_string(&second.csv).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 6);
    assert!(lines[0].starts_with("provenance."), "{}", lines[0]);
    assert!(
        lines[0].contains("metrics.instances_per_s") && lines[0].contains(",error,"),
        "{}",
        lines[0]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The fields that must not depend on timing (times, and the page faults a
/// run took, which depend on the allocator's state).
fn deterministic(row: &Value) -> Value {
    let mut m = row["metrics"].clone();
    if let Some(obj) = m.as_object_mut() {
        obj.retain(|k, _| !(k.ends_with("_s") || k.ends_with("_per_s") || k == "page_faults"));
    }
    serde_json::json!({"config": row["config"], "hash": row["provenance"]["config_hash"], "metrics": m, "error": row["error"]})
}

#[test]
fn same_seed_same_rows_except_timing() {
    let planner = "kind: planner-memory\nname: mem\ncells: [lstm, tree_lstm.internal, gru]\nhiddens: [8, 16]\nfixed_inputs: [false, true]\n";
    for yaml in [POLICIES, REPLAY, planner] {
        let (a, b) = (tmp("det-a"), tmp("det-b"));
        let (ra, rb) = (run(yaml, &a), run(yaml, &b));
        let (ta, tb) = (rows(&ra.json), rows(&rb.json));
        assert_eq!(ta.len(), tb.len());
        for (x, y) in ta.iter().zip(&tb) {
            assert_eq!(deterministic(x), deterministic(y));
        }
        std::fs::remove_dir_all(&a).unwrap();
        std::fs::remove_dir_all(&b).unwrap();
    }
}

#[test]
fn planner_and_training_rows() {
    let dir = tmp("planner");
    let mem = run(
        "kind: planner-memory\nname: mem\ncells: [lstm]\nhiddens: [64]\n",
        &dir,
    );
    let row = &rows(&mem.json)[0];
    assert_eq!(row["metrics"]["planned"]["copy_bytes"], 0);
    assert!(row["metrics"]["baseline"]["copy_bytes"].as_u64().unwrap() > 128 * 1024);
    assert_eq!(row["metrics"]["batches"], 7);
    let comp = run(
        "kind: planner-compile\nname: comp\ncells: [lstm]\nhiddens: [8]\nrepeats: 2\n",
        &dir,
    );
    let row = &rows(&comp.json)[0];
    assert_eq!(row["samples"].as_array().unwrap().len(), 2);
    assert_eq!(row["metrics"]["batches"], 7);
    let tr = run(
        "kind: training\nname: tr\nworkloads: [rvnn]\nbatches: [2]\nhiddens: [8]\nencodings: [sort]\nrepeats: 2\nfsm: { episodes: 50 }\n",
        &dir,
    );
    let row = &rows(&tr.json)[0];
    assert_eq!(row["samples"].as_array().unwrap().len(), 2);
    // The key scheme stops before the budget only at the bound.
    let episodes = row["metrics"]["episodes"].as_u64().unwrap();
    assert!(episodes == 50 || row["metrics"]["stop_reason"] == "lower-bound");
    assert!(row["metrics"]["stop_reason"].is_string());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_observer_sees_every_run_and_the_warnings() {
    use std::sync::{Arc, Mutex};
    let dir = tmp("observer");
    let yaml = "kind: planner-memory\nname: obs\ncells: [lstm, gru]\nhiddens: [8]\n";
    let first = run(yaml, &dir);
    std::fs::write(&first.jsonl, {
        let text = std::fs::read_to_string(&first.jsonl).unwrap();
        text[..text.len() - 5].to_string()
    })
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let mut opts = RunOptions::new(&dir);
    opts.observer = Some(Arc::new(move |e: &experiments::Event| {
        let line = match e {
            experiments::Event::Start { total, todo, .. } => format!("start {total} {todo}"),
            experiments::Event::RunStarted(_) => "started".into(),
            experiments::Event::RunFinished { error, .. } => {
                format!("finished {}", error.is_some())
            }
            experiments::Event::Warning(_) => "warning".into(),
            experiments::Event::Done => "done".into(),
        };
        log.lock().unwrap().push(line);
    }));
    let spec = parse_spec(yaml, "t.yaml", false).unwrap();
    let report = run_spec(&spec, &opts).unwrap();
    assert_eq!(report.ran, 1);
    assert_eq!(
        *seen.lock().unwrap(),
        ["warning", "start 2 1", "started", "finished false", "done"]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `fresh` re-measures every run; the tables then hold only the new rows,
/// and the earlier ones stay in the JSON-lines file (nothing is lost).
#[test]
fn fresh_remeasures_everything_and_keeps_the_history() {
    let dir = tmp("fresh");
    let yaml = "kind: policies\nname: fr\nworkloads: [tree-lstm]\nbatches: [2]\nhiddens: [8]\nseeds: [3]\npolicies: [depth, agenda]\n";
    let first = run(yaml, &dir);
    assert_eq!((first.ran, first.skipped), (2, 0));
    let again = run(yaml, &dir);
    assert_eq!((again.ran, again.skipped), (0, 2));
    let spec = parse_spec(yaml, "t.yaml", false).unwrap();
    let mut opts = RunOptions::new(&dir);
    opts.quiet = true;
    opts.fresh = true;
    let fresh = run_spec(&spec, &opts).unwrap();
    assert_eq!((fresh.ran, fresh.skipped), (2, 0));
    let table = rows(&fresh.json);
    assert_eq!(table.len(), 2);
    let lines = std::fs::read_to_string(&fresh.jsonl)
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines, 4, "the first sweep's rows are kept");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Regression: `run_spec --help` printed the usage line and exited 2.
#[test]
fn run_spec_help_exits_0() {
    // Examples are built beside the test binaries (`target/<profile>/examples`).
    let exe = std::env::current_exe().unwrap();
    // `cargo test --test runner` alone does not rebuild it: skip (visibly) a
    // missing or stale one rather than test old code.
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/run_spec.rs");
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(example) = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|p| p.join("examples/run_spec"))
        .filter(|p| modified(p) >= modified(&source))
    else {
        eprintln!(
            "SKIPPED run_spec_help_exits_0: the run_spec example is not built or older than its source (`cargo test` builds it)"
        );
        return;
    };
    let o = std::process::Command::new(&example)
        .arg("--help")
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("usage: run_spec") && out.contains("--fresh"),
        "{out}"
    );
    let o = std::process::Command::new(&example).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "no arguments is a usage error");
}

/// Without a terminal (a log, CI) a sweep still shows it is moving: a line
/// per interval with runs done and failed (fig6's minutes were silent).
#[test]
fn a_sweep_logs_progress_lines_without_a_terminal() {
    let dir = tmp("log-lines");
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let mut opts = RunOptions::new(&dir);
    opts.observer = Some(experiments::progress::log_lines_to(
        std::time::Duration::ZERO,
        std::sync::Arc::new(move |l: String| sink.lock().unwrap().push(l)),
    ));
    let yaml = "kind: policies\nname: ll\nworkloads: [tree-lstm]\nbatches: [2]\nhiddens: [8]\nseeds: [3]\npolicies: [depth, agenda]\n";
    let spec = parse_spec(yaml, "t.yaml", false).unwrap();
    run_spec(&spec, &opts).unwrap();
    let lines = lines.lock().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("ll: 2/2 runs done (0 failed)")),
        "{lines:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
