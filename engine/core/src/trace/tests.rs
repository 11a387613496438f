use super::*;
use crate::graph::{GraphBuilder, NodeId};

const SMALL: &str = r#"{"format": "batchlab-trace", "version": 1,
 "workload": "tree-lstm",
 "meta": {"batch_size": 2, "hidden": 64, "dataset": "sst-train", "seed": 7, "level": "cell", "tool": "x"},
 "types": [{"name": "leaf[h=64]", "batchable": true}, {"name": "sum"}, {"name": "loss", "batchable": false}],
 "nodes": [{"type": 0, "args": [], "instance": 0}, {"type": 0, "args": [], "instance": 1},
           {"args": [0, 1], "type": 1}, {"type": 2, "args": [2]}]}"#;

fn parse(text: &str) -> Result<Trace, TraceError> {
    Trace::from_json(text, "t.json")
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

/// SMALL with one substring replaced (must occur).
fn mutate(from: &str, to: &str) -> String {
    assert!(SMALL.contains(from), "{from}");
    SMALL.replacen(from, to, 1)
}

#[test]
fn reads_optional_fields_with_defaults() {
    let t = parse(SMALL).unwrap();
    assert_eq!(t.workload, "tree-lstm");
    assert_eq!(t.meta.batch_size, Some(2));
    assert_eq!(t.meta.level, Some(Level::Cell));
    assert_eq!(t.meta.extra["tool"], serde_json::json!("x"));
    let g = &t.graph;
    assert_eq!(g.len(), 4);
    assert!(
        g.types().batchable(g.node_type(NodeId(2))),
        "batchable defaults to true"
    );
    assert!(!g.types().batchable(g.node_type(NodeId(3))));
    assert_eq!(g.instance(NodeId(1)), Some(1));
    assert_eq!(g.instance(NodeId(2)), None);
    assert_eq!(g.args(NodeId(2)), &[NodeId(0), NodeId(1)]);
}

#[test]
fn meta_may_be_absent() {
    let text = r#"{"format":"batchlab-trace","version":1,"workload":"w","types":[{"name":"a"}],
                   "nodes":[{"type":0,"args":[]}]}"#;
    let t = parse(text).unwrap();
    assert_eq!(t.meta, TraceMeta::default());
}

#[test]
fn write_read_write_is_byte_identical() {
    let first = parse(SMALL).unwrap().to_json();
    let second = parse(&first).unwrap().to_json();
    assert_eq!(first, second);
    assert!(first.contains("\n    {\"type\": 0, \"args\": [], \"instance\": 0},\n"));
}

#[test]
fn empty_graph_round_trips() {
    let t = Trace::new(
        "w",
        TraceMeta::default(),
        GraphBuilder::new().finish().unwrap(),
    );
    let text = t.to_json();
    assert_eq!(parse(&text).unwrap(), t);
}

#[test]
fn unknown_format_is_rejected() {
    assert_eq!(
        err(&mutate("\"batchlab-trace\"", "\"other-trace\"")),
        "t.json: field `format`: expected \"batchlab-trace\", found \"other-trace\""
    );
}

#[test]
fn unknown_version_is_rejected_even_when_fields_differ() {
    // A future version may add fields; the version error must win.
    let text = mutate("\"version\": 1,", "\"version\": 3, \"edges\": [],");
    assert_eq!(
        err(&text),
        "t.json: field `version`: unsupported version 3 (this build reads versions 1 to 2)"
    );
    let e = err(&mutate("\"version\": 1,", "\"version\": 0,"));
    assert!(e.contains("unsupported version 0"), "{e}");
}

#[test]
fn unknown_top_level_field_names_field_and_line() {
    let text = mutate("\"workload\"", "\"colour\": 1, \"workload\"");
    let e = err(&text);
    assert!(e.starts_with("t.json:2:"), "{e}");
    assert!(e.contains("unknown field `colour`"), "{e}");
}

#[test]
fn unknown_node_field_is_rejected() {
    let e = err(&mutate(
        "{\"type\": 2, \"args\": [2]}",
        "{\"type\": 2, \"arg\": [2]}",
    ));
    assert!(e.contains("unknown field `arg`"), "{e}");
}

#[test]
fn missing_node_fields_are_rejected() {
    let e = err(&mutate("{\"type\": 2, \"args\": [2]}", "{\"args\": [2]}"));
    assert!(e.contains("missing field `type`"), "{e}");
    let e = err(&mutate("{\"type\": 2, \"args\": [2]}", "{\"type\": 2}"));
    assert!(e.contains("missing field `args`"), "{e}");
}

#[test]
fn type_index_out_of_range_names_node() {
    assert_eq!(
        err(&mutate(
            "{\"type\": 2, \"args\": [2]}",
            "{\"type\": 7, \"args\": [2]}"
        )),
        "t.json: node 3: type 7 out of range (the trace has 3 types)"
    );
}

#[test]
fn argument_out_of_range_names_node() {
    assert_eq!(
        err(&mutate("\"args\": [2]", "\"args\": [2, 40]")),
        "t.json: node 3: argument #1 = 40 out of range (the trace has 4 nodes)"
    );
}

#[test]
fn self_loop_names_node() {
    assert_eq!(
        err(&mutate("\"args\": [2]", "\"args\": [3]")),
        "t.json: node 3: lists itself as an argument (self-loop)"
    );
}

#[test]
fn cycle_names_its_nodes() {
    // 0 -> 2 -> 3 and now 3 -> 0.
    let text = mutate(
        "{\"type\": 0, \"args\": [], \"instance\": 0}",
        "{\"type\": 0, \"args\": [3], \"instance\": 0}",
    );
    assert_eq!(err(&text), "t.json: cycle through nodes 0 -> 2 -> 3 -> 0");
}

#[test]
fn duplicate_type_names_are_rejected() {
    assert_eq!(
        err(&mutate("{\"name\": \"sum\"}", "{\"name\": \"leaf[h=64]\"}")),
        "t.json: type 1: duplicate type name \"leaf[h=64]\" (first defined as type 0)"
    );
}

#[test]
fn negative_and_fractional_indices_are_json_errors() {
    let e = err(&mutate("\"args\": [2]", "\"args\": [-1]"));
    assert!(e.starts_with("t.json:"), "{e}");
    let e = err(&mutate("\"args\": [2]", "\"args\": [1.5]"));
    assert!(e.contains("invalid type"), "{e}");
}

#[test]
fn reserved_instance_value_is_rejected() {
    let e = err(&mutate("\"instance\": 1}", "\"instance\": 4294967295}"));
    assert!(e.contains("instance 4294967295 out of range"), "{e}");
}

#[test]
fn missing_file_names_the_path() {
    let e = Trace::read(std::path::Path::new("/nonexistent/batchlab.json")).unwrap_err();
    assert!(
        e.to_string().starts_with("/nonexistent/batchlab.json: "),
        "{e}"
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Arbitrary bytes never panic the reader.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse(&text);
        }

        /// Mutated valid traces: either an error, or a trace that validates and
        /// round-trips through the canonical writer.
        #[test]
        fn mutated_traces_error_or_round_trip(
            v2 in any::<bool>(),
            pos in 0usize..700,
            len in 0usize..6,
            insert in "[0-9\\[\\]{},:\"a-z ]{0,6}",
        ) {
            // Half the cases mutate a version-2 trace with node data.
            let mut text = if v2 { with_data() } else { SMALL.to_string() };
            let pos = pos.min(text.len());
            let start = (0..=pos).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            let end = (start + len..=text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
            text.replace_range(start..end, &insert);
            if let Ok(t) = parse(&text) {
                let canonical = t.to_json();
                let again = parse(&canonical).expect("canonical output re-reads");
                prop_assert_eq!(again.to_json(), canonical);
            }
        }
    }
}

/// SMALL as version 2 with node data on nodes 0 and 3.
fn with_data() -> String {
    mutate("\"version\": 1,", "\"version\": 2,")
        .replacen(
            "{\"type\": 0, \"args\": [], \"instance\": 0}",
            "{\"type\": 0, \"args\": [], \"instance\": 0, \"data\": {\"id\": 17}}",
            1,
        )
        .replacen(
            "{\"type\": 2, \"args\": [2]}",
            "{\"data\": {\"label\": 3, \"id\": 4}, \"type\": 2, \"args\": [2]}",
            1,
        )
}

#[test]
fn version_2_node_data_is_read_and_written_canonically() {
    let t = parse(&with_data()).unwrap();
    assert_eq!(t.data.len(), 4, "one entry per node once any node has data");
    assert_eq!(
        t.node_data(NodeId(0)),
        NodeData {
            id: Some(17),
            label: None
        }
    );
    assert!(t.node_data(NodeId(1)).is_empty());
    assert_eq!(
        t.node_data(NodeId(3)),
        NodeData {
            id: Some(4),
            label: Some(3)
        }
    );
    assert_eq!(t.data_counts(), (2, 1));
    let text = t.to_json();
    assert!(text.starts_with("{\n  \"format\": \"batchlab-trace\",\n  \"version\": 2,"));
    assert!(
        text.contains(
            "\n    {\"type\": 0, \"args\": [], \"instance\": 0, \"data\": {\"id\": 17}},\n"
        )
    );
    assert!(
        text.contains("\n    {\"type\": 2, \"args\": [2], \"data\": {\"id\": 4, \"label\": 3}}\n")
    );
    assert_eq!(parse(&text).unwrap(), t);
    assert_eq!(parse(&text).unwrap().to_json(), text);
    // Without data the trace is written as version 1, as before.
    let mut bare = t;
    bare.data.clear();
    assert!(bare.to_json().contains("\"version\": 1,"));
    // A version-2 trace may have no data at all.
    let t = parse(&mutate("\"version\": 1,", "\"version\": 2,")).unwrap();
    assert!(t.data.is_empty());
}

#[test]
fn node_data_in_a_version_1_trace_is_an_error_naming_the_node() {
    let text = with_data().replacen("\"version\": 2,", "\"version\": 1,", 1);
    assert_eq!(
        err(&text),
        "t.json: node 0: field `data`: not part of version 1 (node data needs version 2)"
    );
}

#[test]
fn malformed_node_data_is_an_error_naming_the_node() {
    let node3 = "{\"type\": 2, \"args\": [2]}";
    let v2 = mutate("\"version\": 1,", "\"version\": 2,");
    let bad = |data: &str| {
        let text = v2.replacen(
            node3,
            &format!("{{\"type\": 2, \"args\": [2], \"data\": {data}}}"),
            1,
        );
        err(&text)
    };
    for (data, want) in [
        (
            "{\"label\": -1}",
            "node 3: field `data`: invalid value: integer `-1`, expected u32",
        ),
        (
            "{\"label\": 1.5}",
            "node 3: field `data`: invalid type: floating point `1.5`, expected u32",
        ),
        (
            "{\"label\": 4294967296}",
            "node 3: field `data`: invalid value: integer `4294967296`, expected u32",
        ),
        (
            "{\"word\": 1}",
            "node 3: field `data`: unknown field `word`, expected `id` or `label`",
        ),
        (
            "{\"id\": 1, \"id\": 2}",
            "node 3: field `data`: duplicate field `id`",
        ),
        (
            "{}",
            "node 3: field `data` is empty (give `id`, `label` or both)",
        ),
        ("[1, 2]", "node 3: field `data`: invalid type: sequence"),
        ("7", "node 3: field `data`: invalid type: integer `7`"),
    ] {
        let e = bad(data);
        assert!(e.starts_with("t.json:"), "{data}: {e}");
        assert!(e.contains(want), "{data}: {e}");
        assert!(
            !e.contains(" at line "),
            "position reported once, up front: {e}"
        );
    }
    let twice = v2.replacen(
        node3,
        "{\"type\": 2, \"args\": [2], \"data\": {\"id\": 1}, \"data\": {\"id\": 1}}",
        1,
    );
    assert!(err(&twice).contains("duplicate field `data`"));
}

/// Regression (bad input round two): a node reading a later node (no
/// cycle) was accepted, and `engine replay --executor dynet` and `engine
/// export-model` then panicked; the reader names the node and the argument.
#[test]
fn forward_argument_is_refused_naming_the_node() {
    let text = r#"{"format": "batchlab-trace", "version": 1, "workload": "w",
        "types": [{"name": "a"}, {"name": "b"}],
        "nodes": [{"type": 0, "args": []}, {"type": 1, "args": [2]}, {"type": 0, "args": []}]}"#;
    let e = err(text);
    assert_eq!(
        e,
        "t.json: node 1: argument #0 = 2 is not an earlier node (a trace lists every node after its arguments)"
    );
}

/// Regression: a trace whose `meta.hidden` was 0 was refused later, by a
/// cell ("hidden size must be at least 1"), naming neither the file nor
/// the field.
#[test]
fn a_zero_size_in_meta_is_refused_naming_the_file_and_field() {
    let e = err(&mutate(r#""hidden": 64"#, r#""hidden": 0"#));
    assert_eq!(
        e,
        "t.json: field `meta.hidden`: 0; a trace's hidden is at least 1"
    );
    let e = err(&mutate(r#""batch_size": 2"#, r#""batch_size": 0"#));
    assert!(e.starts_with("t.json: field `meta.batch_size`: 0"), "{e}");
}
