//! End-to-end tests of the `search` binary: exit codes, messages, JSON fields.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use engine::cells::CellLibrary;
use engine::graph::{GraphBuilder, NodeId, TypeId};
use engine::trace::{Level, Trace, TraceMeta};
use engine::workloads::{self, DataChoice, RecordOptions};
use serde_json::Value;

fn search(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_search"))
        .args(args)
        .output()
        .expect("search runs")
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("batchlab-search-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn path(name: &str) -> String {
    dir().join(name).display().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn json(o: &Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn fails_with(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
    assert!(
        stderr(o).contains(needle),
        "{needle:?} not in {}",
        stderr(o)
    );
}

/// Records `workload` (batch, seed) to a file named after them; returns its path.
fn trace(workload: &str, batch: usize, seed: u64) -> String {
    trace_of(workload, DataChoice::Default, batch, seed)
}

fn trace_of(workload: &str, data: DataChoice, batch: usize, seed: u64) -> String {
    let tag = if data == DataChoice::Synthetic {
        "-syn"
    } else {
        ""
    };
    let p = path(&format!("{workload}{tag}-b{batch}-s{seed}.json"));
    if !Path::new(&p).exists() {
        let t = workloads::record(
            &RecordOptions {
                workload: workloads::workload(workload).unwrap(),
                data,
                batch,
                hidden: 16,
                level: Level::Cell,
                seed,
            },
            &CellLibrary::builtin().unwrap(),
        )
        .unwrap();
        t.write(Path::new(&p)).unwrap();
    }
    p
}

/// ED-Batch Fig. 1 as a trace file: optimum 6.
fn fig1_trace() -> String {
    let mut b = GraphBuilder::new();
    for (n, batchable) in [("X", true), ("I", true), ("O", true), ("R", false)] {
        b.types_mut().push(n, batchable).unwrap();
    }
    let mut add = |t: u32, args: &[u32]| {
        let args: Vec<NodeId> = args.iter().map(|&a| NodeId(a)).collect();
        b.add_node(TypeId(t), &args, Some(0));
    };
    for _ in 0..4 {
        add(0, &[]);
    }
    add(1, &[0, 1]);
    add(1, &[4, 2]);
    add(1, &[5, 3]);
    for src in 0..7 {
        add(2, &[src]);
    }
    add(3, &(7..14).collect::<Vec<_>>());
    let t = Trace::new("fig1", TraceMeta::default(), b.finish().unwrap());
    let p = path("fig1.json");
    t.write(Path::new(&p)).unwrap();
    p
}

#[test]
fn train_then_eval_replays_the_trained_batches() {
    let t = trace("lattice-lstm", 6, 2);
    let out = path("lattice.yaml");
    let r = json(&search(&[
        "train",
        "--trace",
        &t,
        "--encoding",
        "sort-cond",
        "--seed",
        "3",
        "--out",
        &out,
        "--json",
    ]));
    assert_eq!(r["encoding"], "sort-cond");
    assert_eq!(r["runs"].as_array().unwrap().len(), 1);
    let batches = r["best_batches"].as_u64().unwrap();
    let lb = r["lower_bound"].as_u64().unwrap();
    assert!(batches >= lb);
    assert!((r["ratio"].as_f64().unwrap() - batches as f64 / lb as f64).abs() < 1e-12);
    let e = json(&search(&[
        "eval", "--trace", &t, "--policy", &out, "--json",
    ]));
    assert_eq!(e["batches"].as_u64(), Some(batches));
    assert_eq!(e["decisions"].as_u64(), Some(batches));
    let misses = e["misses"].as_f64().unwrap();
    assert!((e["miss_rate"].as_f64().unwrap() - misses / batches as f64).abs() < 1e-12);
}

#[test]
fn train_all_keeps_the_fewest_batches_earliest_on_ties() {
    let t = trace("tree-lstm-2type", 6, 4);
    let out = path("all.yaml");
    let r = json(&search(&[
        "train",
        "--trace",
        &t,
        "--encoding",
        "all",
        "--episodes",
        "200",
        "--out",
        &out,
        "--json",
    ]));
    let runs = r["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|x| x["encoding"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "base",
            "max",
            "sort",
            "sort-cond",
            "sort-phase",
            "sort-crit",
            "sort-crit-ratio"
        ]
    );
    let min = runs
        .iter()
        .map(|x| x["best_batches"].as_u64().unwrap())
        .min();
    let first = runs
        .iter()
        .find(|x| x["best_batches"].as_u64() == min)
        .unwrap();
    assert_eq!(r["encoding"], first["encoding"]);
    let text = std::fs::read_to_string(&out).unwrap();
    let enc = first["encoding"].as_str().unwrap();
    assert!(text.contains(&format!("encoding: {enc}")), "{text}");
}

#[test]
fn same_seed_writes_identical_policy_files() {
    let t = trace("tree-gru", 5, 1);
    let (a, b) = (path("same-a.yaml"), path("same-b.yaml"));
    for out in [&a, &b] {
        let o = search(&[
            "train",
            "--trace",
            &t,
            "--encoding",
            "all",
            "--seed",
            "5",
            "--out",
            out,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn eval_and_compare_cover_heuristics_and_policy_files() {
    let t = fig1_trace();
    let e = json(&search(&[
        "eval",
        "--trace",
        &t,
        "--policy",
        "agenda-updated",
        "--json",
    ]));
    assert_eq!(e["batches"], 7);
    assert_eq!(e["lower_bound"], 6);
    assert_eq!(e["misses"], 0);
    // Per type: the rows add up to the schedule and to the trace, and no
    // type runs in fewer batches than its term of the bound.
    let rows = e["by_type"].as_array().unwrap();
    let sum = |k: &str| rows.iter().map(|r| r[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("batches"), 7);
    assert_eq!(sum("lower_bound"), 6);
    assert_eq!(sum("nodes"), e["nodes"].as_u64().unwrap());
    for r in rows {
        assert!(r["batches"].as_u64() >= r["lower_bound"].as_u64(), "{r}");
        assert!(r["largest"].as_u64() <= r["nodes"].as_u64(), "{r}");
    }
    let out = path("fig1.yaml");
    json(&search(&["train", "--trace", &t, "--out", &out, "--json"]));
    let c = json(&search(&[
        "compare", "--trace", &t, "--policy", &out, "--json",
    ]));
    let rows = c["rows"].as_array().unwrap();
    let got: Vec<(&str, u64)> = rows
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["batches"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        got[..5],
        [
            ("depth", 9),
            ("agenda", 9),
            ("agenda-updated", 7),
            ("cavs", 7),
            ("typewise", 6)
        ]
    );
    assert!(got[5].0.starts_with("fsm(sort) "));
    assert_eq!(got[5].1, 6);
}

#[test]
fn policy_errors_name_the_problem_and_exit_1() {
    let t = trace("tree-lstm", 3, 1);
    fails_with(
        &search(&["eval", "--trace", &t, "--policy", "greedy"]),
        "unknown policy \"greedy\"",
    );
    let missing = path("missing.yaml");
    fails_with(
        &search(&["eval", "--trace", &t, "--policy", &missing]),
        &missing,
    );
    let bad = path("bad.yaml");
    std::fs::write(&bad, "format: batchlab-policy\nversion: 1\nencoding: [\n").unwrap();
    fails_with(
        &search(&["eval", "--trace", &t, "--policy", &bad]),
        &format!("{bad}:"),
    );
    let no_trace = path("no-trace.json");
    fails_with(
        &search(&["eval", "--trace", &no_trace, "--policy", "depth"]),
        &no_trace,
    );
    // A tree-lstm policy on a tree-gru trace: refused unless allowed.
    let pol = path("tree.yaml");
    json(&search(&["train", "--trace", &t, "--out", &pol, "--json"]));
    let other = trace("tree-gru", 3, 1);
    fails_with(
        &search(&["eval", "--trace", &other, "--policy", &pol]),
        "trained on workload \"tree-lstm\"",
    );
    let o = search(&[
        "eval",
        "--trace",
        &other,
        "--policy",
        &pol,
        "--allow-other-workload",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Outside its range: a usage error (2) naming the flag and the range.
    let o = search(&[
        "train",
        "--trace",
        &t,
        "--learning-rate",
        "0",
        "--out",
        &pol,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--learning-rate") && stderr(&o).contains("above 0 to 1"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn optimal_solves_fig1_and_refuses_large_traces() {
    let t = fig1_trace();
    let r = json(&search(&["optimal", "--trace", &t, "--json"]));
    assert_eq!(r["batches"], 6);
    assert_eq!(r["proved"], true);
    assert_eq!(r["schedule"].as_array().unwrap().len(), 6);
    let big = trace("tree-lstm", 4, 1);
    fails_with(
        &search(&["optimal", "--trace", &big]),
        "more than the limit of 64",
    );
}

/// Trains a sort-phase policy on `trace` into `out`.
fn train_sort_phase(trace: &str, out: &str) {
    json(&search(&[
        "train",
        "--trace",
        trace,
        "--encoding",
        "sort-phase",
        "--out",
        out,
        "--json",
    ]));
}

#[test]
fn show_prints_states_and_dot_edges_from_the_training_trace() {
    // One synthetic tree of tree-lstm-2type where learning beats the typewise
    // start (an untrained table would be empty: nothing to show).
    let t = trace_of("tree-lstm-2type", DataChoice::Synthetic, 1, 22);
    let pol = path("show.yaml");
    train_sort_phase(&t, &pol);
    let s = json(&search(&["show", "--policy", &pol, "--json"]));
    let states = s["states"].as_array().unwrap();
    assert!(!states.is_empty());
    assert_eq!(states[0]["id"], "S0");
    let o = search(&["show", "--policy", &pol, "--dot"]);
    let dot = String::from_utf8(o.stdout).unwrap();
    assert!(dot.contains("// edges: transitions observed"), "{dot}");
    assert!(dot.contains("digraph fsm {"));
    assert!(dot.contains("\"start\" -> "));
    assert!(dot.contains("\"S0\" [label=\"S0: [phase:0"), "{dot}");
    // Without the training trace, states only (and says so).
    let text = std::fs::read_to_string(&pol)
        .unwrap()
        .replace(&t, "gone.json");
    let moved = path("moved.yaml");
    std::fs::write(&moved, text).unwrap();
    let o = search(&["show", "--policy", &moved, "--dot"]);
    let dot = String::from_utf8(o.stdout).unwrap();
    assert!(dot.contains("// states only"), "{dot}");
    assert!(!dot.contains("->"));
}

#[test]
fn every_subcommand_documents_json_and_train_help_states_the_real_defaults() {
    for cmd in [
        "train",
        "eval",
        "compare",
        "optimal",
        "optimise",
        "random-dag",
        "show",
        "bench",
    ] {
        let o = search(&[cmd, "--help"]);
        assert!(o.status.success());
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("--json"),
            "{cmd}"
        );
    }
    let help = String::from_utf8(search(&["train", "--help"]).stdout).unwrap();
    let h = search::trainer::default_hyperparameters();
    for (flag, v) in [
        ("--learning-rate", h.learning_rate),
        ("--gamma", h.gamma),
        ("--epsilon ", h.epsilon_start),
        ("--epsilon-decay", h.epsilon_decay),
        ("--epsilon-floor", h.epsilon_floor),
        ("--n-step", f64::from(h.n_step)),
        ("--episodes", f64::from(h.max_episodes)),
        ("--rollout-every", f64::from(h.rollout_every)),
        ("--alpha", h.alpha),
        ("--stop-ratio", h.stop_ratio),
    ] {
        // clap puts the help text on the flag's line or, in its long layout,
        // on the next one.
        let lines: Vec<&str> = help.lines().collect();
        let i = lines
            .iter()
            .position(|l| l.trim_start().starts_with(flag))
            .unwrap_or_else(|| panic!("no help line for {flag}"));
        let both = format!("{} {}", lines[i], lines.get(i + 1).unwrap_or(&""));
        let line = both.as_str();
        let stated: f64 = line
            .split("[default: ")
            .nth(1)
            .and_then(|d| d.split(']').next())
            .and_then(|d| d.parse().ok())
            .unwrap_or_else(|| panic!("{flag}: no default in {line:?}"));
        assert_eq!(stated, v, "{flag}: help says {stated}, trainer uses {v}");
    }
}

#[test]
fn bench_reports_the_training_time_of_each_workload() {
    let r = json(&search(&[
        "bench",
        "--workload",
        "rvnn",
        "--batch",
        "2",
        "--repeat",
        "1",
        "--json",
    ]));
    assert!(
        r.get("env_step").is_none(),
        "criterion's, not search bench's"
    );
    let t = r["training"].as_array().unwrap();
    assert!(t[0]["seconds_1000_episodes"].as_f64().unwrap() > 0.0);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["workload"], "rvnn");
}

#[test]
fn optimise_writes_a_schedule_that_train_distils_and_eval_replays() {
    let dag = path("dag.json");
    let r = json(&search(&[
        "random-dag",
        "--nodes",
        "300",
        "--seed",
        "2",
        "--out",
        &dag,
        "--json",
    ]));
    assert_eq!(r["nodes"], 300);
    assert_eq!(r["params"]["types"], 5);
    let sched = path("dag.sched.json");
    // Passes up to width 64 (a fraction of a second), within a budget far
    // above that: the schedule must not depend on the machine's speed. With
    // `--budget 3s` a loaded machine once left the beam no time after the
    // bound's share, and the best schedule was the heuristic's.
    let o = json(&search(&[
        "optimise",
        "--trace",
        &dag,
        "--budget",
        "30s",
        "--bound-share",
        "0.1",
        "--max-width",
        "64",
        "--out",
        &sched,
        "--json",
    ]));
    assert_eq!(o["stop"], "max-width", "{o}");
    let best = o["best_known"].as_u64().unwrap();
    let bound = o["certified_bound"].as_u64().unwrap();
    assert!(best < o["heuristic_batches"].as_u64().unwrap());
    assert!(o["lower_bound"].as_u64().unwrap() <= bound && bound <= best);
    assert_eq!(o["schedule"].as_array().unwrap().len() as u64, best);
    assert_eq!(o["gap"].as_f64().unwrap(), best as f64 / bound as f64);
    assert!(!o["passes"].as_array().unwrap().is_empty());
    let pol = path("dag.yaml");
    let t = json(&search(&[
        "train",
        "--trace",
        &dag,
        "--encoding",
        "sort-crit-ratio",
        "--teacher",
        &sched,
        "--episodes",
        "60",
        "--out",
        &pol,
        "--json",
    ]));
    assert_eq!(t["teacher"]["batches"].as_u64(), Some(best));
    assert_eq!(t["teacher"]["certified_bound"].as_u64(), Some(bound));
    let fsm = t["best_batches"].as_u64().unwrap();
    assert!(fsm < t["prior_batches"].as_u64().unwrap());
    let curve = t["curve"].as_array().unwrap();
    assert_eq!(curve[0]["episode"], 0);
    assert_eq!(curve[0]["best"], t["prior_batches"]);
    let e = json(&search(&[
        "eval", "--trace", &dag, "--policy", &pol, "--json",
    ]));
    assert_eq!(e["batches"].as_u64(), Some(fsm));
    // `show --dot` follows the sort-crit-ratio keys as the runtime does: a
    // decision goes through `unseen` exactly when the FSM missed.
    let o = search(&["show", "--policy", &pol, "--dot"]);
    let dot = String::from_utf8(o.stdout).unwrap();
    let misses = e["misses"].as_u64().unwrap();
    assert!(
        dot.contains(&format!("({fsm} decisions, {misses} misses)")),
        "{dot}"
    );
    assert_eq!(dot.contains("unseen"), misses > 0, "{dot}");
    // A schedule of another trace is refused, naming the file.
    let other = path("dag-other.json");
    json(&search(&[
        "random-dag",
        "--nodes",
        "200",
        "--out",
        &other,
        "--json",
    ]));
    fails_with(
        &search(&[
            "train",
            "--trace",
            &other,
            "--teacher",
            &sched,
            "--out",
            &path("x.yaml"),
        ]),
        "written for a trace of 300 nodes, this one has 200",
    );
    fails_with(
        &search(&[
            "train",
            "--trace",
            &dag,
            "--teacher",
            &path("none.json"),
            "--out",
            &pol,
        ]),
        "none.json",
    );
    let o = search(&["optimise", "--trace", &dag, "--budget", "soon"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("invalid duration"), "{}", stderr(&o));
    let o = search(&["random-dag", "--types", "0", "--out", &path("z.json")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("0 is outside 1 to 1000"),
        "{}",
        stderr(&o)
    );
}

/// Regression (bad input round two): `--out` naming the input trace (however
/// spelled) overwrote it with exit 0; it is refused and the trace is kept.
#[test]
fn out_equal_to_the_trace_is_refused_and_the_trace_kept() {
    let t = trace("tree-lstm", 2, 41);
    let before = std::fs::read(&t).unwrap();
    let spelled = Path::new(&t)
        .parent()
        .unwrap()
        .join(".")
        .join(Path::new(&t).file_name().unwrap());
    for cmd in ["train", "optimise"] {
        let o = search(&[cmd, "--trace", &t, "--out", spelled.to_str().unwrap()]);
        fails_with(&o, "the same file as --trace");
        assert_eq!(
            std::fs::read(&t).unwrap(),
            before,
            "{cmd} changed the trace"
        );
    }
}

/// `search show --dot` drew a policy's transitions on whatever trace its
/// `provenance.trace` named, even another one, as if trained on it.
#[test]
fn dot_of_a_policy_whose_training_trace_was_replaced_is_refused() {
    let t = trace_of("tree-lstm-2type", DataChoice::Synthetic, 1, 23);
    let pol = path("replaced.yaml");
    train_sort_phase(&t, &pol);
    let other = trace_of("tree-lstm-2type", DataChoice::Synthetic, 2, 24);
    std::fs::copy(&other, &t).unwrap();
    let o = search(&["show", "--policy", &pol, "--dot"]);
    fails_with(&o, "field `provenance.trace` names");
    let err = stderr(&o);
    assert!(err.contains(&pol), "{err}");
    assert!(err.contains("provenance.nodes"), "{err}");
}

/// A teacher schedule claiming a bound above its own batch count made
/// `search train` stop early, "at the optimum".
#[test]
fn teacher_whose_bound_exceeds_its_batches_is_refused() {
    let t = trace("tree-lstm", 2, 43);
    let sched = path("bound.json");
    json(&search(&[
        "optimise", "--trace", &t, "--budget", "200ms", "--out", &sched, "--json",
    ]));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&sched).unwrap()).unwrap();
    v["certified_bound"] = Value::from(v["batches"].as_u64().unwrap() + 3);
    std::fs::write(&sched, v.to_string()).unwrap();
    let o = search(&[
        "train",
        "--trace",
        &t,
        "--teacher",
        &sched,
        "--episodes",
        "5",
        "--out",
        &path("b.yaml"),
    ]);
    fails_with(&o, "field `certified_bound`");
    assert!(stderr(&o).contains(&sched), "{}", stderr(&o));
}

/// An interrupt during `search random-dag --nodes 3000000 --out F` left the
/// 81 MB temporary file of the atomic write behind (the target itself was
/// never partial). SIGTERM here: a test run as a background job may have
/// SIGINT ignored, and both take the same path.
#[cfg(unix)]
#[test]
fn interrupted_write_leaves_no_temporary_file() {
    use std::os::unix::process::ExitStatusExt;
    let dir = PathBuf::from(path("interrupted"));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("big.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_search"))
        .args(["random-dag", "--nodes", "1000000", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let temps = || -> Vec<PathBuf> {
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".tmp"))
            .collect()
    };
    let started = std::time::Instant::now();
    loop {
        if !temps().is_empty() {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the write ended before the test saw its temporary file"
        );
        assert!(
            started.elapsed().as_secs() < 300,
            "no temporary file in 300 s"
        );
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(temps(), Vec::<PathBuf>::new(), "temporary files left");
    if status.signal() == Some(15) {
        assert!(!out.exists(), "an interrupted write produced its target");
    } else {
        // The rename won the race: then the target is whole.
        assert!(status.success());
        assert!(std::fs::read_to_string(&out).unwrap().ends_with("}\n"));
    }
}

/// Regression (issue 45, class 4): `search train --trace M/trace.json --out
/// M/model.json` wrote the policy over the model folder's manifest. The
/// trace's folder is an input too when it is a model folder.
#[test]
fn a_policy_onto_the_traces_model_folder_is_refused() {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/core/tests/fixtures/model-tree");
    let dst = dir().join("clobber-model");
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
    let manifest = std::fs::read(dst.join("model.json")).unwrap();
    let trace = dst.join("trace.json");
    for out in ["model.json", "weights.safetensors", "cells/leaf.yaml"] {
        let o = search(&[
            "train",
            "--trace",
            trace.to_str().unwrap(),
            "--out",
            dst.join(out).to_str().unwrap(),
        ]);
        fails_with(&o, "refusing to overwrite an input");
    }
    assert_eq!(std::fs::read(dst.join("model.json")).unwrap(), manifest);
    // Beside the recording, a policy is the user's own file: allowed.
    let o = search(&[
        "train",
        "--trace",
        trace.to_str().unwrap(),
        "--episodes",
        "2",
        "--out",
        dst.join("policy.yaml").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}
