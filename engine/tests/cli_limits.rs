//! The `engine` binary at the edges a new user hits first: sizes the machine
//! cannot hold (refused with the flag and the estimate, never an abort),
//! batches larger than the data set, and hand-edited files with a field of the
//! wrong type (the error names the field).

use std::path::PathBuf;
use std::process::{Command, Output};

fn engine(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_engine"))
        .args(args)
        .output()
        .expect("engine runs")
}

/// `engine ARGS` under an address-space limit of `kib` KiB (`ulimit -v`), as a
/// user on a small machine or in a limited container runs it.
fn engine_limited(kib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_engine"))
        .args(args)
        .output()
        .expect("sh runs")
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("batchlab-cli-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A refusal, not an abort: status 1, one `error:` line naming `flag`, the
/// estimate and where the limit comes from.
fn assert_refused(o: &Output, flag: &str, source: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.starts_with("error: ") && e.contains(flag), "{e}");
    assert!(e.contains(" GB") && e.contains(source), "{e}");
    assert!(!e.contains("memory allocation"), "aborted: {e}");
}

/// Regression: `engine record --batch 100000000` grew to 23 GB and was killed;
/// under a 4 GB limit it aborted with "memory allocation of ... failed".
#[test]
fn record_of_a_huge_batch_is_refused_under_a_memory_limit() {
    let out = tmp("huge.json");
    let args = [
        "record",
        "--workload",
        "tree-lstm",
        "--batch",
        "1000000",
        "--hidden",
        "8",
        "--out",
    ];
    let mut a = args.to_vec();
    a.push(out.to_str().unwrap());
    assert_refused(
        &engine_limited(4_000_000, &a),
        "--batch 1000000",
        "ulimit -v",
    );
    assert!(!out.exists());
    a.extend(["--max-memory", "1G"]);
    assert_refused(&engine(&a), "--batch 1000000", "--max-memory");
    // More nodes than a trace can number: refused whatever the memory.
    let o = engine(&[
        "record",
        "--workload",
        "tree-lstm",
        "--batch",
        "100000000",
        "--hidden",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--batch 100000000"), "{}", stderr(&o));
}

/// Regression: `engine replay --hidden 100000` tried to allocate 40 GB and aborted.
#[test]
fn replay_at_a_huge_hidden_size_is_refused_under_a_memory_limit() {
    let args = [
        "replay",
        "--workload",
        "tree-lstm",
        "--batch",
        "8",
        "--hidden",
        "100000",
        "--executor",
        "cavs",
    ];
    assert_refused(
        &engine_limited(4_000_000, &args),
        "--hidden 100000",
        "ulimit -v",
    );
    // A small run still fits under the same limit.
    let o = engine_limited(
        4_000_000,
        &[
            "replay",
            "--workload",
            "tree-lstm",
            "--batch",
            "4",
            "--hidden",
            "16",
            "--executor",
            "cavs",
            "--repeat",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = engine(&[
        "replay",
        "--workload",
        "tree-lstm",
        "--batch",
        "64",
        "--hidden",
        "64",
        "--executor",
        "cavs",
        "--max-memory",
        "1M",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("--batch 64") && e.contains("--max-memory"),
        "{e}"
    );
    let o = engine(&[
        "replay",
        "--workload",
        "tree-lstm",
        "--executor",
        "cavs",
        "--max-memory",
        "lots",
    ]);
    assert_eq!(o.status.code(), Some(2), "a bad size is a usage error");
}

/// Regression: `record --batch 100000` silently drew 100000 samples from 8550 trees.
#[test]
fn a_batch_larger_than_the_data_set_says_so() {
    let out = tmp("repeat.json");
    let o = engine(&[
        "record",
        "--workload",
        "tree-lstm",
        "--batch",
        "9000",
        "--hidden",
        "8",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("--batch 9000 is more than the 8550 samples of sst-train"),
        "{e}"
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["dataset_samples"], 8550);
    assert_eq!(j["repeats_samples"], true);
    let o = engine(&[
        "record",
        "--workload",
        "tree-lstm",
        "--batch",
        "8",
        "--hidden",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        o.status.success() && stderr(&o).is_empty(),
        "{}",
        stderr(&o)
    );
}

/// Regression: a wrong-typed field said "invalid type ... expected u32" without
/// the field; a policy handed to `inspect` failed on its first character.
#[test]
fn wrong_typed_fields_are_named() {
    let good = tmp("good.json");
    let o = engine(&[
        "record",
        "--workload",
        "tree-lstm",
        "--batch",
        "2",
        "--hidden",
        "8",
        "--out",
        good.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&good).unwrap();
    let cases = [
        (
            text.replacen("\"instance\": 0}", "\"instance\": \"z\"}", 1),
            "field `nodes[0].instance`",
        ),
        (
            text.replacen("\"args\": [0]", "\"args\": [-1]", 1),
            "field `nodes[1].args[0]`",
        ),
        (
            text.replacen("\"batch_size\":2", "\"batch_size\":\"two\"", 1),
            "field `meta.batch_size`",
        ),
    ];
    for (i, (bad, want)) in cases.iter().enumerate() {
        assert_ne!(bad, &text, "case {i} edits the file");
        let f = tmp(&format!("bad{i}.json"));
        std::fs::write(&f, bad).unwrap();
        let o = engine(&["inspect", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1));
        let e = stderr(&o);
        assert!(
            e.contains(want) && e.contains(&format!("bad{i}.json:")),
            "{e}"
        );
    }
    let policy = tmp("p.yaml");
    std::fs::write(&policy, "format: batchlab-policy\nversion: 2\n").unwrap();
    let o = engine(&["inspect", policy.to_str().unwrap()]);
    assert!(stderr(&o).contains("\"batchlab-policy\""), "{}", stderr(&o));
}
