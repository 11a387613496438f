//! The embedded cells: shapes, parameter sizes, ports, signatures and bindings.

use engine_core::cells::{Arity, Cell, CellError, CellLibrary, PrimOp, ValueKind};

fn lib() -> CellLibrary {
    CellLibrary::builtin().expect("builtin cells must load")
}

fn cell(lib: &CellLibrary, name: &str, h: usize) -> Cell {
    lib.instantiate(name, h)
        .unwrap_or_else(|e| panic!("{name} at h={h}: {e}"))
}

/// Output shape written with `h` standing for the hidden size.
#[derive(Clone, Copy)]
enum S {
    H,
    HxH,
    One,
}

fn dims(s: S, h: usize) -> Vec<usize> {
    match s {
        S::H => vec![h],
        S::HxH => vec![h, h],
        S::One => vec![1],
    }
}

/// `(cell, output shapes, param element count as a function of h, ports)`.
type Expect = (
    &'static str,
    &'static [S],
    fn(usize) -> usize,
    &'static [(&'static str, Arity, usize)],
);

/// A gate with bias and `k` h×h weights.
fn gate(h: usize, k: usize) -> usize {
    k * h * h + h
}

const ONE_X: &[(&str, Arity, usize)] = &[("x", Arity::One, 1)];
const LR1: &[(&str, Arity, usize)] = &[("left", Arity::One, 1), ("right", Arity::One, 1)];
const LR2: &[(&str, Arity, usize)] = &[("left", Arity::One, 2), ("right", Arity::One, 2)];
const FB: &[(&str, Arity, usize)] = &[("fwd", Arity::One, 1), ("bwd", Arity::One, 1)];

const EXPECTED: &[Expect] = &[
    (
        "gru",
        &[S::H],
        |h| 3 * gate(h, 2),
        &[("x", Arity::One, 1), ("prev", Arity::Optional, 1)],
    ),
    (
        "lattice_gru.char",
        &[S::H],
        |h| 4 * gate(h, 2),
        &[
            ("x", Arity::One, 1),
            ("prev", Arity::Optional, 1),
            ("words", Arity::Many, 1),
        ],
    ),
    (
        "lattice_gru.word",
        &[S::H],
        |h| 3 * gate(h, 2),
        &[("x", Arity::One, 1), ("start", Arity::One, 1)],
    ),
    (
        "lattice_lstm.char",
        &[S::H, S::H],
        |h| 5 * gate(h, 2),
        &[
            ("x", Arity::One, 1),
            ("prev", Arity::Optional, 2),
            ("words", Arity::Many, 1),
        ],
    ),
    (
        "lattice_lstm.word",
        &[S::H],
        |h| 3 * gate(h, 2),
        &[("x", Arity::One, 1), ("start", Arity::One, 2)],
    ),
    ("lookup", &[S::H], |h| 1000 * h, &[]),
    ("loss.sum", &[S::One], |_| 0, &[("losses", Arity::Many, 1)]),
    (
        "lstm",
        &[S::H, S::H],
        |h| 4 * gate(h, 2),
        &[("x", Arity::One, 1), ("prev", Arity::Optional, 2)],
    ),
    ("mv.internal", &[S::H, S::HxH], |h| h + 4 * h * h, LR2),
    ("mv.leaf", &[S::H, S::HxH], |h| 1000 * h + 1000 * h * h, &[]),
    ("nmt.loss", &[S::One], |h| 1000 + 1000 * h, ONE_X),
    ("rvnn.internal", &[S::H], |h| gate(h, 2), LR1),
    ("rvnn.leaf", &[S::H], |h| gate(h, 1), ONE_X),
    ("sentiment.loss", &[S::One], |h| 5 + 5 * h, ONE_X),
    ("tagger.char_word", &[S::H], |h| gate(h, 2), FB),
    ("tagger.loss", &[S::One], |h| 9 + 9 * h, ONE_X),
    ("tagger.mlp", &[S::H], |h| gate(h, 2), FB),
    ("td_lstm.combine", &[S::H, S::H], |h| 4 * gate(h, 2), LR2),
    ("td_lstm.leaf", &[S::H, S::H], |h| 3 * gate(h, 1), ONE_X),
    ("td_rnn.combine", &[S::H], |h| gate(h, 2), LR1),
    ("tree_fc", &[S::H], |h| gate(h, 2), LR1),
    ("tree_gru.internal", &[S::H], |h| 4 * gate(h, 2), LR1),
    ("tree_gru.leaf", &[S::H], |h| 2 * gate(h, 1), ONE_X),
    ("tree_lstm.internal", &[S::H, S::H], |h| 5 * gate(h, 2), LR2),
    ("tree_lstm.leaf", &[S::H, S::H], |h| 3 * gate(h, 1), ONE_X),
];

#[test]
fn builtin_names_are_exactly_the_expected_set_in_sorted_order() {
    let lib = lib();
    let names: Vec<&str> = lib.names().collect();
    let expected: Vec<&str> = EXPECTED.iter().map(|e| e.0).collect();
    assert_eq!(names, expected);
}

#[test]
fn every_builtin_instantiates_with_expected_shapes_ports_and_param_bytes() {
    let lib = lib();
    for &(name, outs, params, ports) in EXPECTED {
        for h in [8, 32, 64] {
            let c = cell(&lib, name, h);
            let want: Vec<Vec<usize>> = outs.iter().map(|&s| dims(s, h)).collect();
            let got: Vec<Vec<usize>> = c.output_shapes().iter().map(|s| s.to_vec()).collect();
            assert_eq!(got, want, "{name} output shapes at h={h}");
            assert_eq!(
                c.param_bytes(),
                params(h) * 4,
                "{name} param bytes at h={h}"
            );
            let got_ports: Vec<(&str, Arity, usize)> = c
                .ports
                .iter()
                .map(|p| (p.name.as_str(), p.arity, p.inputs.len()))
                .collect();
            assert_eq!(got_ports, ports.to_vec(), "{name} ports");
            assert_eq!(c.hidden, h);
        }
    }
}

#[test]
fn lstm_param_bytes_by_hand() {
    let lib = lib();
    // 4 gates × (W, U of h×h + bias h) × 4 bytes.
    assert_eq!(
        cell(&lib, "lstm", 64).param_bytes(),
        4 * (2 * 64 * 64 + 64) * 4
    );
    assert_eq!(cell(&lib, "lstm", 8).param_bytes(), 2176);
    // MV-RNN internal: bias [h] + W [h,2h] + W_M [h,2h] at h = 8.
    assert_eq!(
        cell(&lib, "mv.internal", 8).param_bytes(),
        (8 + 128 + 128) * 4
    );
}

#[test]
fn every_builtin_has_a_doc_and_gates_are_separate_affines() {
    let lib = lib();
    for name in lib.names() {
        let c = cell(&lib, name, 8);
        assert!(c.doc.len() > 40, "{name} needs a doc citing its source");
        // No builtin packs gates into one wide affine that is sliced apart: the
        // planner batches separate gate ops (ED-Batch Table 2).
        assert!(c.ops.iter().all(|op| op.kind != PrimOp::Slice), "{name}");
    }
    let lstm = cell(&lib, "lstm", 8);
    let affines = lstm
        .ops
        .iter()
        .filter(|op| op.kind == PrimOp::Affine)
        .count();
    assert_eq!(affines, 4);
}

#[test]
fn values_are_numbered_inputs_then_params_then_ops() {
    let c = cell(&lib(), "lstm", 8);
    let kinds: Vec<u8> = c
        .values
        .iter()
        .map(|v| match v.kind {
            ValueKind::Input { .. } => 0,
            ValueKind::Param => 1,
            ValueKind::Op { .. } => 2,
        })
        .collect();
    assert!(kinds.windows(2).all(|w| w[0] <= w[1]), "{kinds:?}");
    assert_eq!(c.value(c.ports[1].inputs[1]).name, "c_prev");
    assert_eq!(
        c.value(c.ports[1].inputs[1]).kind,
        ValueKind::Input { port: 1 }
    );
    for (i, op) in c.ops.iter().enumerate() {
        assert_eq!(c.value(op.out).kind, ValueKind::Op { index: i as u32 });
        assert!(
            op.args.iter().all(|a| a.0 < op.out.0),
            "args defined before use"
        );
    }
    let outs: Vec<&str> = c
        .outputs
        .iter()
        .map(|&o| c.value(o).name.as_str())
        .collect();
    assert_eq!(outs, ["h", "c"]);
}

#[test]
fn op_signatures() {
    let lib = lib();
    let lstm = cell(&lib, "lstm", 64);
    assert_eq!(
        lstm.op_signature(0, "lstm.fwd"),
        "affine@lstm.fwd:b_i,W_i,U_i[64;64x64;64;64x64;64]"
    );
    assert_eq!(lstm.op_signature(4, "lstm.fwd"), "sigmoid[64]");
    // Different parameter sets must not batch; parameter-free ops do.
    assert_ne!(
        lstm.op_signature(0, "lstm.fwd"),
        lstm.op_signature(0, "lstm.bwd")
    );
    assert_eq!(
        lstm.op_signature(4, "lstm.fwd"),
        lstm.op_signature(4, "lstm.bwd")
    );
    let gru = cell(&lib, "gru", 64);
    assert_eq!(gru.op_signature(2, "x"), lstm.op_signature(4, "y"));
    // An empty role falls back to the cell name.
    let lookup = cell(&lib, "lookup", 64);
    assert_eq!(lookup.op_signature(0, ""), "lookup@lookup:E[1000x64]");
    let mv = cell(&lib, "mv.internal", 8);
    let last = mv.ops.len() - 1;
    assert_eq!(mv.op_signature(last, "mv"), "matmul@mv:W_M[8x16;16x8]");
    assert_eq!(mv.op_signature(0, "mv"), "matmul[8x8;8]");
    let loss = cell(&lib, "tagger.loss", 8);
    assert_eq!(loss.op_signature(1, "t"), "pick_loss[9]");
    let tree = cell(&lib, "tree_lstm.internal", 8);
    assert_eq!(tree.op_signature(13, "t"), "sum[8;8;8]");
}

#[test]
fn binding_rule_positive_cases() {
    let lib = lib();
    let ok = |consumer: &str, port: usize, producer: &str| {
        let (c, p) = (cell(&lib, consumer, 32), cell(&lib, producer, 32));
        c.check_binding(port, &p)
            .unwrap_or_else(|e| panic!("{consumer}[{port}] <- {producer}: {e}"));
    };
    ok("lstm", 1, "lstm");
    ok("lstm", 0, "lstm"); // stacked LSTM: x binds to the first output h
    ok("lstm", 0, "lookup");
    ok("tree_lstm.internal", 0, "tree_lstm.leaf");
    ok("tree_lstm.internal", 1, "tree_lstm.internal");
    ok("lattice_lstm.char", 2, "lattice_lstm.word");
    ok("lattice_lstm.word", 1, "lattice_lstm.char");
    ok("lattice_gru.char", 2, "lattice_gru.word");
    ok("lattice_gru.word", 1, "lattice_gru.char");
    ok("mv.internal", 0, "mv.leaf");
    ok("mv.internal", 1, "mv.internal");
    ok("tagger.mlp", 1, "lstm");
    ok("tagger.loss", 0, "tagger.mlp");
    ok("loss.sum", 0, "tagger.loss");
    ok("td_lstm.combine", 0, "td_lstm.leaf");
}

#[test]
fn binding_rule_negative_cases() {
    let lib = lib();
    let err = |consumer: &str, port: usize, producer: &str, h_producer: usize| {
        let (c, p) = (cell(&lib, consumer, 32), cell(&lib, producer, h_producer));
        match c.check_binding(port, &p) {
            Ok(()) => panic!("{consumer}[{port}] <- {producer} should fail"),
            Err(e) => e.to_string(),
        }
    };
    assert_eq!(
        err("lstm", 1, "gru", 32),
        "cannot bind `gru` to port `prev` of `lstm`: the port needs 2 values (h_prev, c_prev) \
         but `gru` has only 1 output(s)"
    );
    assert_eq!(
        err("mv.internal", 0, "lstm", 32),
        "cannot bind `lstm` to port `left` of `mv.internal`: input 2 `A` has shape [32, 32] \
         but output 2 `c` has shape [32]"
    );
    let msg = err("lstm", 0, "lookup", 64);
    assert!(
        msg.contains("has shape [32] but output 1 `e` has shape [64]"),
        "{msg}"
    );
    let msg = err("loss.sum", 0, "lstm", 32);
    assert!(msg.contains("`l` has shape [1]"), "{msg}");
    let lstm = cell(&lib, "lstm", 8);
    assert!(matches!(
        lstm.check_binding(2, &lstm),
        Err(CellError::BadPort {
            port: 2,
            count: 2,
            ..
        })
    ));
}

#[test]
fn instantiation_is_deterministic() {
    let (a, b) = (lib(), lib());
    for name in a.names() {
        assert_eq!(cell(&a, name, 16), cell(&b, name, 16));
    }
}

#[test]
fn spec_accessors_and_serde_round_trip() {
    let lib = lib();
    let spec = lib.spec("tree_lstm.internal").expect("builtin");
    assert_eq!(spec.name(), "tree_lstm.internal");
    assert_eq!(spec.source(), "engine/core/cells/tree_lstm.internal.yaml");
    assert!(lib.spec("nope").is_none());
    // Writing a spec back out and re-reading it gives the same cell.
    let text = serde_saphyr::to_string(spec).expect("specs serialize");
    let mut other = CellLibrary::new();
    other.add_yaml(&text, "roundtrip").expect("re-reads");
    assert_eq!(
        other.instantiate("tree_lstm.internal", 8).ok(),
        lib.instantiate("tree_lstm.internal", 8).ok()
    );
}

#[test]
fn every_file_in_engine_cells_is_embedded() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cells");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .expect("engine/core/cells exists")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    files.sort();
    let lib = lib();
    let mut sources: Vec<String> = lib
        .names()
        .map(|n| {
            lib.spec(n)
                .expect("listed")
                .source()
                .trim_start_matches("engine/core/cells/")
                .to_owned()
        })
        .collect();
    sources.sort();
    assert_eq!(sources, files);
    // File names follow cell names, so a reader finds a cell's file by its name.
    for n in lib.names() {
        assert_eq!(
            lib.spec(n).expect("listed").source(),
            format!("engine/core/cells/{n}.yaml")
        );
    }
}

#[test]
fn scale_signatures_carry_the_factor_distinct_factors_distinct_bytes() {
    let mut lib = CellLibrary::new();
    lib.add_yaml(
        "name: s
ports:
  - {name: x, arity: one, inputs: [{name: x, shape: [h]}]}
ops:
  - {out: a, op: scale, args: [x], factor: 0.5}
  - {out: b, op: scale, args: [x], factor: 0.50}
  - {out: c, op: scale, args: [x], factor: 0.25}
  - {out: d, op: scale, args: [x], factor: -1}
  - {out: e, op: exp, args: [x]}
  - {out: y, op: sum, args: [a, b, c, d, e]}
outputs: [y]
",
        "test",
    )
    .unwrap();
    let c = lib.instantiate("s", 64).unwrap();
    assert_eq!(c.op_signature(0, "r"), "scale(0.5)[64]");
    // The same factor written otherwise: the same bytes.
    assert_eq!(c.op_signature(0, "r"), c.op_signature(1, "r"));
    assert_eq!(c.op_signature(2, "r"), "scale(0.25)[64]");
    assert_eq!(c.op_signature(3, "r"), "scale(-1.0)[64]");
    assert_eq!(c.op_signature(4, "r"), "exp[64]");
    assert_eq!(c.ops[3].factor, Some(-1.0));
    assert_eq!(c.ops[4].factor, None);
}
