//! Spec checks: every bad spec fails before any run, naming file and line.

use experiments::{Kind, SpecError, parse_spec};

fn err(yaml: &str) -> String {
    match parse_spec(yaml, "specs/bad.yaml", false) {
        Ok(_) => panic!("spec accepted:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

/// (line, column) of a located error.
fn at(yaml: &str) -> (u64, u64) {
    match parse_spec(yaml, "bad.yaml", false) {
        Err(SpecError::Yaml { line, column, .. } | SpecError::Invalid { line, column, .. }) => {
            (line, column)
        }
        other => panic!("expected a located error, got {other:?}"),
    }
}

const GOOD: &str = "kind: replay
name: ok
workloads: [tree-lstm]
batches: [2]
hiddens: [8]
executors: [cavs]
";

#[test]
fn a_good_spec_parses_with_defaults() {
    let s = parse_spec(GOOD, "ok.yaml", false).unwrap();
    assert_eq!(s.kind, Kind::Replay);
    assert_eq!(s.grid.seeds, vec![1]);
    assert_eq!(s.grid.repeats, 3);
    assert_eq!(s.grid.devices, vec!["cpu"]);
    assert!(s.grid.check);
    assert_eq!(s.grid.fsm.batch, Some(32));
}

#[test]
fn unknown_field_names_file_and_line() {
    let e = err(&format!("{GOOD}executorz: [cavs]\n"));
    assert!(
        e.starts_with("specs/bad.yaml:7:1: unknown field `executorz`"),
        "{e}"
    );
    let e = err(&format!("{GOOD}fsm:\n  episodez: 3\n"));
    assert!(
        e.starts_with("specs/bad.yaml:8:3: unknown field `episodez`"),
        "{e}"
    );
    let e = err(&format!("{GOOD}quick:\n  batchez: [1]\n"));
    assert!(
        e.starts_with("specs/bad.yaml:8:3: unknown field `batchez`"),
        "{e}"
    );
}

#[test]
fn missing_workload_names_its_line() {
    let yaml = "kind: policies
name: p
workloads:
  - tree-lstm
  - tree-lstn
batches: [2]
policies: [depth]
";
    let e = err(yaml);
    assert_eq!(
        e,
        "specs/bad.yaml:5:5: workloads[1]: unknown workload \"tree-lstn\" (see `engine workloads`, or random-dag)"
    );
}

#[test]
fn batch_zero_and_oversize_hidden_are_rejected() {
    let e = err(&GOOD.replace("batches: [2]", "batches: [2, 0]"));
    assert_eq!(
        e,
        "specs/bad.yaml:4:14: batches[1]: 0 is out of range 1..=4096"
    );
    let e = err(&GOOD.replace("hiddens: [8]", "hiddens: [0]"));
    assert!(
        e.starts_with("specs/bad.yaml:5:11: hiddens[0]: 0 is out of range"),
        "{e}"
    );
    let e = err(&GOOD.replace("hiddens: [8]", "hiddens: [100000]"));
    assert!(
        e.contains("hiddens[0]: 100000 is out of range 1..=4096"),
        "{e}"
    );
    let e = err(&format!("{GOOD}repeats: 0\n"));
    assert!(
        e.starts_with("specs/bad.yaml:7:10: repeats: 0 is out of range"),
        "{e}"
    );
}

#[test]
fn unknown_executor_policy_device_cell_encoding() {
    let e = err(&GOOD.replace("[cavs]", "[cavs, edbach]"));
    assert!(
        e.starts_with("specs/bad.yaml:6:19: executors[1]: unknown executor \"edbach\""),
        "{e}"
    );
    let e = err(&format!("{GOOD}devices: [cpu, tpu]\n"));
    assert!(
        e.starts_with("specs/bad.yaml:7:16: devices[1]: unknown device \"tpu\""),
        "{e}"
    );
    let e =
        err("kind: policies\nname: p\nworkloads: [rvnn]\nbatches: [2]\npolicies: [fsm-sorted]\n");
    assert!(
        e.starts_with("specs/bad.yaml:5:12: policies[0]: unknown policy \"fsm-sorted\""),
        "{e}"
    );
    let e = err("kind: planner-memory\nname: p\ncells: [lstm, lstn]\n");
    assert!(
        e.starts_with("specs/bad.yaml:3:15: cells[1]: unknown cell \"lstn\""),
        "{e}"
    );
    let e =
        err("kind: training\nname: t\nworkloads: [rvnn]\nbatches: [2]\nencodings: [sort, srot]\n");
    assert!(
        e.starts_with("specs/bad.yaml:5:19: encodings[1]: unknown encoding"),
        "{e}"
    );
}

#[test]
fn a_field_the_kind_does_not_use_is_an_error_at_its_line() {
    let e = err(
        "kind: policies\nname: p\nworkloads: [rvnn]\nbatches: [2]\npolicies: [depth]\nexecutors: [cavs]\n",
    );
    assert!(
        e.starts_with("specs/bad.yaml:6:12: executors: not used by kind policies (only by replay)"),
        "{e}"
    );
    let e = err("kind: planner-memory\nname: p\nquick:\n  workloads: [rvnn]\n");
    assert!(
        e.contains("4:14: quick.workloads: not used by kind planner-memory"),
        "{e}"
    );
}

#[test]
fn missing_required_fields_and_empty_or_duplicate_lists() {
    let e = err("kind: replay\nname: r\nworkloads: [rvnn]\nbatches: [2]\n");
    assert_eq!(
        e,
        "specs/bad.yaml:1:7: executors: missing: kind replay needs it"
    );
    let e = err(&GOOD.replace("batches: [2]", "batches: []"));
    assert!(e.contains("4:10: batches: must not be empty"), "{e}");
    let e = err(&GOOD.replace("[cavs]", "[cavs, cavs]"));
    assert!(e.contains("executors[1]: \"cavs\" is listed twice"), "{e}");
    let e = err(&GOOD.replace("name: ok", "name: a/b"));
    assert!(e.contains("2:7: name: must be letters"), "{e}");
}

#[test]
fn the_quick_block_is_checked_in_full_mode_too() {
    let yaml = format!("{GOOD}quick:\n  batches: [0]\n");
    assert_eq!(at(&yaml), (8, 13));
    let yaml = format!("{GOOD}quick:\n  batches: [4]\n  repeats: 1\n");
    let full = parse_spec(&yaml, "q.yaml", false).unwrap();
    let quick = parse_spec(&yaml, "q.yaml", true).unwrap();
    assert_eq!((full.grid.batches, full.grid.repeats), (vec![2], 3));
    assert_eq!((quick.grid.batches, quick.grid.repeats), (vec![4], 1));
    assert!(quick.quick && !full.quick);
}

#[test]
fn exclude_values_must_be_in_the_grid() {
    let yaml = format!("{GOOD}exclude:\n  - {{ executors: [reference] }}\n");
    let e = err(&yaml);
    assert!(
        e.contains("8:19: exclude[0].executors[0]: \"reference\" is not in the grid's executors"),
        "{e}"
    );
    let e = err(&format!("{GOOD}exclude:\n  - {{}}\n"));
    assert!(e.contains("exclude[0]: names no field"), "{e}");
    let e = err(&format!("{GOOD}exclude:\n  - {{ policies: [depth] }}\n"));
    assert!(
        e.contains("exclude[0].policies: not used by kind replay"),
        "{e}"
    );
}

/// Regression: a wrong-typed value said "invalid u64" without the field.
#[test]
fn a_wrong_typed_value_names_its_field() {
    let e = err(&GOOD.replace("batches: [2]", "batches: [2, x]"));
    assert!(
        e.contains("field `batches`") && e.contains("bad.yaml:4:"),
        "{e}"
    );
    let e = err(&format!("{GOOD}repeats: three\n"));
    assert!(e.contains("field `repeats`"), "{e}");
    let e = err(&format!("{GOOD}quick:\n  hiddens: [8, big]\n"));
    assert!(e.contains("field `quick.hiddens`"), "{e}");
}

#[test]
fn unreadable_file_and_bad_yaml() {
    let e = experiments::load_spec(std::path::Path::new("/no/such/spec.yaml"), false).unwrap_err();
    assert!(e.to_string().starts_with("/no/such/spec.yaml: "), "{e}");
    assert_eq!(at("kind: replay\nname: [unclosed\n").0, 2);
    let e = err("kind: sweep\nname: x\n");
    assert!(e.starts_with("specs/bad.yaml:1:7: "), "{e}");
}
