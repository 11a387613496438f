//! The `engine` binary at the edges a new user hits first: sizes the machine
//! cannot hold (refused with the flag and the estimate, never an abort),
//! batches larger than the data set, and hand-edited files with a field of the
//! wrong type (the error names the field).

mod common;

use std::process::{Command, Output};

use common::{engine_line as run, stderr, tmp};

/// `engine` with the words of `line` under an address-space limit of `kib`
/// KiB (`ulimit -v`), as a user on a small machine or in a container runs it.
fn limited(kib: u64, line: &str) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_engine"))
        .args(line.split_whitespace())
        .output()
        .expect("sh runs")
}

/// A refusal, not an abort: status 1, one `error:` line naming `flag`, the
/// estimate and where the limit comes from.
fn refused(o: &Output, flag: &str, source: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.starts_with("error: ") && e.contains(flag), "{e}");
    assert!(e.contains(" GB") && e.contains(source), "{e}");
    assert!(!e.contains("memory allocation"), "aborted: {e}");
}

const GB4: u64 = 4_000_000;

/// `record` of tree-lstm into `name` at hidden 8, and the trace's path.
fn recorder(name: &str) -> (std::path::PathBuf, String) {
    let out = tmp(name);
    let line = format!(
        "record --workload tree-lstm --hidden 8 --out {}",
        out.display()
    );
    (out, line)
}

/// Regression: `engine record --batch 100000000` grew to 23 GB and was killed;
/// under a 4 GB limit it aborted with "memory allocation of ... failed".
#[test]
fn record_of_a_huge_batch_is_refused_under_a_memory_limit() {
    let (out, rec) = recorder("huge.json");
    refused(
        &limited(GB4, &format!("{rec} --batch 1000000")),
        "--batch 1000000",
        "ulimit -v",
    );
    assert!(!out.exists());
    let o = run(&rec, &["--batch", "1000000", "--max-memory", "1G"]);
    refused(&o, "--batch 1000000", "--max-memory");
    // Beyond the flag's range: refused whatever the memory.
    let o = run(&rec, &["--batch", "100000000"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("--batch") && e.contains("1 to 1000000"), "{e}");
}

/// Regression: `engine replay --hidden 100000` tried to allocate 40 GB and
/// aborted (65536 is the flag's range's top, and as far beyond 4 GB).
#[test]
fn replay_at_a_huge_hidden_size_is_refused_under_a_memory_limit() {
    let rep = "replay --workload tree-lstm --executor cavs";
    let o = limited(GB4, &format!("{rep} --batch 8 --hidden 65536"));
    refused(&o, "--hidden 65536", "ulimit -v");
    // A small run still fits under the same limit.
    let o = limited(GB4, &format!("{rep} --batch 4 --hidden 16 --repeat 1"));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(rep, &["--batch", "64", "--max-memory", "1M"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("--batch 64") && e.contains("--max-memory"),
        "{e}"
    );
    let o = run(rep, &["--max-memory", "lots"]);
    assert_eq!(o.status.code(), Some(2), "a bad size is a usage error");
    // --roofline packs a second copy of the weights, and the estimate says so.
    let o = run(rep, &["--batch", "64", "--roofline", "--max-memory", "1M"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("the roofline's weights"), "{e}");
}

/// Regression: `record --batch 100000` silently drew 100000 samples from 8550 trees.
#[test]
fn a_batch_larger_than_the_data_set_says_so() {
    let (_, rec) = recorder("repeat.json");
    let o = run(&rec, &["--batch", "9000", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    let note = "--batch 9000 is more than the 8550 samples of sst-train";
    assert!(e.contains(note), "{e}");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (
            j["dataset_samples"].as_u64(),
            j["repeats_samples"].as_bool()
        ),
        (Some(8550), Some(true))
    );
    let o = run(&rec, &["--batch", "8"]);
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
    let (good, rec) = recorder("good.json");
    assert!(run(&rec, &["--batch", "2"]).status.success());
    let text = std::fs::read_to_string(&good).unwrap();
    let cases = [
        (
            "\"instance\": 0,",
            "\"instance\": \"z\",",
            "field `nodes[0].instance`",
        ),
        (
            "\"args\": [0]",
            "\"args\": [-1]",
            "field `nodes[1].args[0]`",
        ),
        (
            "\"batch_size\":2",
            "\"batch_size\":\"two\"",
            "field `meta.batch_size`",
        ),
    ];
    for (i, (from, to, want)) in cases.iter().enumerate() {
        let bad = text.replacen(from, to, 1);
        assert_ne!(bad, text, "case {i} edits the file");
        let f = tmp(&format!("bad{i}.json"));
        std::fs::write(&f, bad).unwrap();
        let o = run("inspect", &[f.to_str().unwrap()]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(
            e.contains(want) && e.contains(&format!("bad{i}.json:")),
            "{e}"
        );
    }
    let policy = tmp("p.yaml");
    std::fs::write(&policy, "format: batchlab-policy\nversion: 2\n").unwrap();
    let o = run("inspect", &[policy.to_str().unwrap()]);
    assert!(stderr(&o).contains("\"batchlab-policy\""), "{}", stderr(&o));
}

/// Regression (bad input round two): a failed allocation aborted
/// ("memory allocation of N bytes failed", SIGABRT). With a `--max-memory`
/// above what the address space allows, the estimate passes and the
/// allocation fails: an error and status 1, not an abort.
#[test]
fn a_failed_allocation_is_an_error_not_an_abort() {
    let o = limited(
        GB4,
        "replay --workload tree-lstm --executor cavs --batch 2 --hidden 65536 --max-memory 1000T",
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.starts_with("error: out of memory: an allocation of "),
        "{e}"
    );
    assert!(!e.contains("memory allocation of"), "aborted: {e}");
}

/// Regression (bad input round two): `engine script` and `engine
/// export-model` at `--hidden 65536` aborted with no memory estimate; they
/// are refused as `replay` is, naming the flag and the estimate.
#[test]
fn script_and_export_model_at_a_huge_hidden_size_are_refused_with_an_estimate() {
    let out = tmp("huge.safetensors");
    for line in [
        "script --workload tree-lstm --batch 2 --hidden 65536".to_string(),
        format!(
            "export-model --workload tree-lstm --batch 2 --hidden 65536 --out {}",
            out.display()
        ),
    ] {
        refused(&limited(GB4, &line), "--hidden 65536", "ulimit -v");
    }
    assert!(!out.exists());
    // The same commands at a size that fits still run under the limit.
    let o = limited(GB4, "script --workload tree-lstm --batch 2 --hidden 8");
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Regression (bad input round two): `replay --repeat 1000000000` allocated
/// 32 GB, `--threads 4294967296` aborted and `script --rpw 4294967295`
/// hung; a count flag outside its range is refused naming the flag and the
/// range, at once.
#[test]
fn count_flags_outside_their_range_name_flag_and_range() {
    for (args, flag, range) in [
        (
            "replay --workload tree-lstm --batch 1 --hidden 4 --executor cavs --repeat 1000000000",
            "--repeat",
            "1 to 100000",
        ),
        (
            "replay --workload tree-lstm --batch 1 --hidden 4 --executor cavs --threads 4294967296",
            "--threads",
            "1 to 4096",
        ),
        (
            "script --workload tree-lstm --batch 1 --hidden 4 --rpw 4294967295",
            "--rpw",
            "1 to 1024",
        ),
        (
            "replay --workload tree-lstm --batch 1 --hidden 4 --executor cavs --repeat 0",
            "--repeat",
            "1 to 100000",
        ),
    ] {
        let o = run(args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(flag) && e.contains(range), "{args}: {e}");
    }
}
