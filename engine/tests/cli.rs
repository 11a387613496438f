//! End-to-end tests of the `engine` binary: exit codes, messages and JSON fields.

mod common;

use common::{engine, engine_line, stderr, tmp};

#[test]
fn record_then_inspect_reports_the_same_graph() {
    let out = tmp("nested/dir/tree.json");
    let o = engine(&[
        "record",
        "--workload",
        "tree-lstm",
        "--batch",
        "32",
        "--hidden",
        "64",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rec: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let o = engine(&["inspect", out.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ins: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rec["nodes"], ins["nodes"]);
    assert_eq!(rec["lower_bound"], ins["lower_bound"]);
    assert_eq!(ins["instances"], 32);
    assert_eq!(ins["meta"]["dataset"], "sst-train");
    // SST is annotated: a word id per leaf lookup, a label per node's loss.
    assert_eq!(rec["data_ids"], ins["data_ids"]);
    assert_eq!(rec["data_labels"], ins["data_labels"]);
    let labels = ins["data_labels"].as_u64().unwrap();
    assert!(labels > 32 && ins["data_ids"].as_u64().unwrap() * 2 > labels);
    let types = ins["types"].as_array().unwrap();
    let total: u64 = types.iter().map(|t| t["nodes"].as_u64().unwrap()).sum();
    assert_eq!(Some(total), ins["nodes"].as_u64());
    let lb: u64 = types
        .iter()
        .map(|t| t["lower_bound"].as_u64().unwrap())
        .sum();
    assert_eq!(Some(lb), ins["lower_bound"].as_u64());
}

#[test]
fn same_seed_gives_identical_files() {
    let a = tmp("a.json");
    let b = tmp("b.json");
    for p in [&a, &b] {
        let o = engine(&[
            "record",
            "--workload",
            "lattice-gru",
            "--batch",
            "8",
            "--hidden",
            "32",
            "--seed",
            "3",
            "--level",
            "op",
            "--out",
            p.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn bad_inputs_fail_with_a_clear_message() {
    let o = engine(&["inspect", "/nonexistent/trace.json"]);
    assert!(!o.status.success());
    assert_eq!(
        stderr(&o).trim(),
        "error: /nonexistent/trace.json: No such file or directory (os error 2)"
    );

    let cyclic = tmp("cyclic.json");
    std::fs::write(
        &cyclic,
        r#"{"format":"batchlab-trace","version":1,"workload":"w","types":[{"name":"a"}],
            "nodes":[{"type":0,"args":[1]},{"type":0,"args":[0]}]}"#,
    )
    .unwrap();
    let o = engine(&["inspect", cyclic.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("cycle through nodes 0 -> 1 -> 0"),
        "{}",
        stderr(&o)
    );

    let o = engine(&[
        "record",
        "--workload",
        "nope",
        "--batch",
        "1",
        "--hidden",
        "4",
        "--out",
        "/tmp/x",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unknown workload \"nope\"; known workloads: bilstm-tagger"));

    let bad = tmp("bad.trees");
    std::fs::write(&bad, "# batchlab fixture v1 trees\n((xx)x\n").unwrap();
    let o = engine(&[
        "record",
        "--workload",
        "tree-lstm",
        "--data",
        bad.to_str().unwrap(),
        "--batch",
        "1",
        "--hidden",
        "4",
        "--out",
        tmp("never.json").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("bad.trees:2: expected ')'"),
        "{}",
        stderr(&o)
    );
    assert!(!tmp("never.json").exists(), "no output on failure");
}

/// `engine replay --batch 0` said "batch must be at least 1", and a
/// truncated trace named the field `nodes[9].`: both now name what the user
/// typed or wrote (a zero size is outside its flag's range).
#[test]
fn zero_sizes_name_their_flag_and_a_cut_trace_names_its_last_whole_field() {
    for (line, flag) in [
        (
            "record --workload tree-lstm --batch 0 --hidden 4 --out /tmp/never",
            "--batch",
        ),
        (
            "record --workload tree-lstm --batch 2 --hidden 0 --out /tmp/never",
            "--hidden",
        ),
        (
            "replay --workload tree-lstm --batch 0 --executor cavs",
            "--batch",
        ),
        ("script --workload tree-lstm --hidden 0", "--hidden"),
    ] {
        let o = engine_line(line, &[]);
        assert_eq!(o.status.code(), Some(2), "{line}");
        let e = stderr(&o);
        let first = e.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: invalid value '0' for '")
                && first.contains(flag)
                && (first.ends_with("0 is outside 1 to 1000000")
                    || first.ends_with("0 is outside 1 to 65536")),
            "{line}: {e}"
        );
    }

    let whole = tmp("whole.json");
    let o = engine_line(
        "record --workload tree-lstm --batch 1 --hidden 4 --out",
        &[whole.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&whole).unwrap();
    // Cut inside the third node's first key.
    let third = text.match_indices("{\"type\"").nth(2).unwrap().0;
    let cut = tmp("cut.json");
    std::fs::write(&cut, &text[..third + 2]).unwrap();
    let o = engine(&["inspect", cut.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("field `nodes[2]`: EOF while parsing"), "{e}");
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["record", "inspect", "workloads", "cells", "fixtures"] {
        let o = engine(&[sub, "--help"]);
        assert!(o.status.success(), "{sub}");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("--json"), "{sub} documents --json");
    }
}

#[test]
fn workloads_json_lists_fifteen_with_roles() {
    let o = engine(&["workloads", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let list = v.as_array().unwrap();
    assert_eq!(list.len(), 15);
    let lattice = list.iter().find(|w| w["name"] == "lattice-lstm").unwrap();
    assert_eq!(lattice["default_data"], "weibo-train");
    assert!(
        lattice["roles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["role"] == "lattice.char" && r["cell"] == "lattice_lstm.char")
    );
}

#[test]
fn replay_runs_and_checks_against_the_reference() {
    let o = engine(&[
        "replay",
        "--workload",
        "tree-gru",
        "--batch",
        "4",
        "--hidden",
        "16",
        "--executor",
        "cavs",
        "--repeat",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["instances"], 4);
    assert!(v["max_rel_error"].as_f64().unwrap() < 1e-4);
    assert!(v["counters"]["batches"].as_u64().unwrap() > 0);
}

#[test]
fn replay_roofline_pairs_each_round_with_the_runs_gemms_alone() {
    let o = engine(&[
        "replay",
        "--workload",
        "tree-lstm",
        "--batch",
        "8",
        "--hidden",
        "32",
        "--executor",
        "cavs",
        "--repeat",
        "3",
        "--no-check",
        "--roofline",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["roofline"];
    assert_eq!(r["rounds"], 3, "{r}");
    assert_eq!(r["round_fractions"].as_array().unwrap().len(), 3, "{r}");
    assert!(r["fraction_of_peak"].as_f64().unwrap() > 0.0, "{r}");
    // Every logged product is executed alone: the shapes' flops add up to
    // the run's shared-weight GEMM flops.
    let shapes = r["by_shape"].as_array().unwrap();
    assert_eq!(shapes.len() as u64, r["shapes"].as_u64().unwrap());
    let flops: u64 = shapes
        .iter()
        .map(|s| {
            let f = |k: &str| s[k].as_u64().unwrap();
            2 * f("m") * f("n") * f("k") * f("calls")
        })
        .sum();
    assert_eq!(flops, r["gemm_flops"].as_u64().unwrap(), "{r}");
}

#[test]
fn replay_bad_inputs_fail_clearly() {
    let o = engine(&["replay", "--workload", "rvnn", "--executor", "policy"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o)
            .contains("--executor policy needs a policy (`--executor policy:P` or --policy P"),
        "{}",
        stderr(&o)
    );
    let o = engine(&[
        "replay",
        "--workload",
        "rvnn",
        "--executor",
        "cavs",
        "--device",
        "cuda",
    ]);
    // No GPU here (CI): a typed error naming the missing library, never a CPU
    // fall back; with one, the CUDA executor runs and matches the reference.
    if engine_has_gpu() {
        assert!(o.status.success(), "{}", stderr(&o));
    } else {
        assert!(!o.status.success());
        assert_eq!(
            stderr(&o).trim(),
            "error: CUDA unavailable: libcuda not found"
        );
    }
    let foreign = tmp("foreign.json");
    std::fs::write(
        &foreign,
        r#"{"format":"batchlab-trace","version":1,"workload":"mine","types":[{"name":"a"}],
            "nodes":[{"type":0,"args":[]}]}"#,
    )
    .unwrap();
    let o = engine(&[
        "replay",
        "--trace",
        foreign.to_str().unwrap(),
        "--executor",
        "cavs",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("has no cell definitions"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn edbatch_without_layouts_or_policy_says_how_to_get_them() {
    let o = engine(&[
        "replay",
        "--workload",
        "rvnn",
        "--executor",
        "edbatch",
        "--policy",
        "typewise",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("needs --layouts DIR"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("planner layout --all"),
        "{}",
        stderr(&o)
    );
    let with_layouts = |dir: &std::path::Path| {
        let line = "replay --workload rvnn --executor edbatch --policy typewise --layouts";
        engine_line(line, &[dir.to_str().unwrap()])
    };
    let empty = tmp("no-layouts");
    std::fs::create_dir_all(&empty).unwrap();
    let o = with_layouts(&empty);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no layout for cell"), "{}", stderr(&o));
    // A layout file given where the folder goes was reported as a missing
    // `FILE/<cell>.json`.
    let file = tmp("a-layout-file.json");
    std::fs::write(&file, "{}").unwrap();
    let o = with_layouts(&file);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!("--layouts {}: not a folder", file.display())),
        "{}",
        stderr(&o)
    );
    let o = engine(&[
        "replay",
        "--workload",
        "rvnn",
        "--executor",
        "edbatch",
        "--layouts",
        empty.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("search train"), "{}", stderr(&o));
}

#[test]
fn replay_rejects_a_policy_of_another_workload() {
    let policy = tmp("tree.yaml");
    let trace = tmp("tree-trace.json");
    let o = engine(&[
        "record",
        "--workload",
        "tree-lstm",
        "--batch",
        "2",
        "--hidden",
        "8",
        "--out",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A minimal valid policy file for tree-lstm, with no states.
    std::fs::write(
        &policy,
        "format: batchlab-policy\nversion: 1\nencoding: sort\nworkload: tree-lstm\nprovenance:\n  trace: t.json\n  nodes: 1\n  batch_size: null\n  hidden: null\n  dataset: null\n  seed: 0\nhyperparameters:\n  learning_rate: 0.4\n  gamma: 1.0\n  epsilon_start: 0.5\n  epsilon_decay: 0.9\n  epsilon_floor: 0.05\n  n_step: 10\n  max_episodes: 1000\n  rollout_every: 50\n  alpha: 0.5\n  stop_ratio: 1.01\ntraining:\n  episodes: 0\n  best_batches: 0\n  lower_bound: 0\n  best_episode: 0\n  stop_reason: budget\ntypes: []\nstates: []\n",
    )
    .unwrap();
    let o = engine(&[
        "replay",
        "--workload",
        "rvnn",
        "--batch",
        "2",
        "--hidden",
        "8",
        "--executor",
        "policy",
        "--policy",
        policy.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("policy trained for workload tree-lstm but the trace is rvnn"),
        "{}",
        stderr(&o)
    );
    let o = engine(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--executor",
        "policy",
        "--policy",
        policy.to_str().unwrap(),
        "--repeat",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Whether `engine devices` finds a usable GPU (never on CI).
fn engine_has_gpu() -> bool {
    let o = engine(&["devices", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["devices"][1]["available"].as_bool().unwrap_or(false)
}

#[test]
fn devices_lists_cpu_and_cuda_with_a_reason() {
    let o = engine(&["devices", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["devices"][0]["name"], "cpu");
    assert_eq!(v["devices"][1]["name"], "cuda:0");
    if !engine_has_gpu() {
        assert_eq!(
            v["devices"][1]["detail"],
            "CUDA unavailable: libcuda not found"
        );
    }
}

#[test]
fn export_model_writes_a_deterministic_safetensors_file() {
    let (a, b) = (tmp("export/a.safetensors"), tmp("export/b.safetensors"));
    let mut summary = serde_json::Value::Null;
    for p in [&a, &b] {
        let o = engine(&[
            "export-model",
            "--workload",
            "tree-gru",
            "--batch",
            "2",
            "--hidden",
            "8",
            "--gradients",
            "--out",
            p.to_str().unwrap(),
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        summary = serde_json::from_slice(&o.stdout).unwrap();
    }
    let bytes = std::fs::read(&a).unwrap();
    assert_eq!(bytes, std::fs::read(&b).unwrap(), "same inputs, same bytes");
    assert_eq!(summary["bytes"], bytes.len());
    // Any safetensors reader sees a parameter and a gradient tensor per
    // parameter, and the header in the metadata.
    let t = engine::modeldir::Tensors::read(&a).unwrap();
    let e = engine::export::Export::read(&a).unwrap();
    assert_eq!(t.metadata.len(), 1);
    let mut params = 0;
    for r in &e.header.roles {
        for p in &r.params {
            let v = t.get(&format!("param/{}/{}", r.role, p.name)).unwrap();
            assert_eq!(v.shape, p.shape);
            assert!(t.get(&format!("grad/{}/{}", r.role, p.name)).is_some());
            params += v.data.len();
        }
    }
    assert_eq!(
        t.len(),
        2 * e.header.roles.iter().map(|r| r.params.len()).sum::<usize>()
    );
    assert_eq!(summary["params"], params);
    assert_eq!(e.header.version, 2);
    // A cut file is refused, naming it.
    std::fs::write(&b, &bytes[..bytes.len() / 2]).unwrap();
    let err = engine::export::Export::read(&b).unwrap_err().to_string();
    assert!(err.starts_with(b.to_str().unwrap()), "{err}");
}

/// Regression (bad input round two): `record --out` equal to a `--cells`
/// file and `export-model --out` equal to its `--trace` overwrote them with
/// exit 0; they, and `schedule`'s and `script`'s `--out`, are refused and
/// the inputs kept.
#[test]
fn out_equal_to_an_input_is_refused_and_the_input_kept() {
    let trace = tmp("same-path/t.json");
    let t = trace.to_str().unwrap();
    let o = engine(&[
        "record",
        "--workload",
        "tree-lstm",
        "--batch",
        "1",
        "--hidden",
        "4",
        "--out",
        t,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(&trace).unwrap();
    for args in [
        vec!["export-model", "--trace", t, "--out", t],
        vec!["schedule", "--trace", t, "--policy", "depth", "--out", t],
        vec!["script", "--trace", t, "--out", t],
    ] {
        let o = engine(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("the same file as --trace"), "{args:?}: {e}");
        assert_eq!(std::fs::read(&trace).unwrap(), before, "{args:?}");
    }
    let cells = tmp("same-path/c.yaml");
    let text = "name: same_path\nports:\n  - {name: x, shape: [h]}\nparams:\n  - {name: W, shape: [h, h]}\nops:\n  - {out: y, op: matmul, args: [W, x]}\noutputs: [y]\n";
    std::fs::write(&cells, text).unwrap();
    let c = cells.to_str().unwrap();
    let o = engine(&[
        "record",
        "--workload",
        "tree-lstm",
        "--batch",
        "1",
        "--hidden",
        "4",
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
}

/// Regression (bad input round two): a node reading a later node (no
/// cycle) reached `replay --executor dynet` and `export-model`, which
/// panicked (index out of bounds); the reader refuses it, naming the node.
#[test]
fn forward_argument_is_an_error_not_a_panic() {
    let path = tmp("forward/t.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        r#"{"format": "batchlab-trace", "version": 1, "workload": "rvnn",
        "types": [{"name": "a"}, {"name": "b"}],
        "nodes": [{"type": 0, "args": []}, {"type": 1, "args": [2]}, {"type": 0, "args": []}]}"#,
    )
    .unwrap();
    let t = path.to_str().unwrap();
    let out = tmp("forward/e.safetensors");
    for args in [
        vec!["replay", "--trace", t, "--executor", "dynet"],
        vec!["export-model", "--trace", t, "--out", out.to_str().unwrap()],
    ] {
        let o = engine(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("node 1: argument #0 = 2 is not an earlier node"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

/// One executor grammar (`NAME[:POLICY]`, the specs'): `--executor
/// policy:depth` runs what `--executor policy --policy depth` runs; a policy
/// named twice differently, or given to an executor that takes none, is an
/// error naming it.
#[test]
fn executor_names_take_their_policy_as_the_specs_write_it() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "replay",
            "--workload",
            "tree-lstm",
            "--batch",
            "4",
            "--hidden",
            "8",
            "--repeat",
            "1",
            "--json",
        ];
        args.extend(extra);
        engine(&args)
    };
    let batches = |o: &std::process::Output| -> serde_json::Value {
        assert!(o.status.success(), "{}", stderr(o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["counters"]["batches"].clone()
    };
    let a = batches(&run(&["--executor", "policy:depth"]));
    let b = batches(&run(&["--executor", "policy", "--policy", "depth"]));
    assert_eq!(a, b);
    assert!(a.as_u64().is_some(), "{a}");
    let o = run(&["--executor", "policy:depth", "--policy", "agenda"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("names the policy depth, --policy agenda"),
        "{}",
        stderr(&o)
    );
    let o = run(&["--executor", "cavs:depth"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("executor cavs batches by no policy"),
        "{}",
        stderr(&o)
    );
}

/// Regression: a FIFO given as a trace hung `engine inspect` (reading it
/// waits for a writer). Every reader of a user's file refuses what is not a
/// regular file, naming it.
#[cfg(unix)]
#[test]
fn a_fifo_or_a_folder_given_as_a_file_is_refused_not_waited_on() {
    let dir = tmp("fifo");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("trace.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let f = fifo.to_str().unwrap();
    for args in [
        vec!["inspect", f],
        vec!["replay", "--trace", f, "--executor", "cavs"],
    ] {
        let o = engine(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains(f) && e.contains("not a regular file"), "{e}");
    }
    let o = engine(&["inspect", dir.to_str().unwrap()]);
    assert!(
        stderr(&o).contains("a folder, not a regular file"),
        "{}",
        stderr(&o)
    );
}
