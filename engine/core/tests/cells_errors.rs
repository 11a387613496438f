//! Every validation error: the message names the file, line, cell and op/field.

use engine_core::cells::{CellError, CellLibrary};

/// A valid cell; each test breaks one line of it. Line numbers are fixed.
const BASE: &str = "\
name: t
doc: test cell
ports:
  - name: x
    arity: one
    inputs:
      - {name: x, shape: [h]}
params:
  - {name: b, shape: [h]}
  - {name: W, shape: [h, h]}
ops:
  - {out: pre, op: affine, args: [b, W, x]}
  - {out: y, op: tanh, args: [pre]}
outputs: [y]
";

const FILE: &str = "user/t.yaml";

/// `BASE` with `from` (which must occur exactly once) replaced by `to`.
fn with(from: &str, to: &str) -> String {
    assert_eq!(BASE.matches(from).count(), 1, "fixture: {from:?}");
    BASE.replacen(from, to, 1)
}

fn load(text: &str) -> Result<String, CellError> {
    CellLibrary::new().add_yaml(text, FILE)
}

fn err(text: &str) -> String {
    match load(text) {
        Ok(name) => panic!("expected an error, loaded `{name}`"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn base_fixture_is_valid() {
    assert_eq!(load(BASE).expect("valid"), "t");
}

#[test]
fn dangling_operand() {
    let msg = err(&with("args: [pre]", "args: [nope]"));
    assert_eq!(
        msg,
        "user/t.yaml:13: cell `t`: op `y`: undefined operand `nope` \
         (not a port input, param or earlier op result)"
    );
}

#[test]
fn forward_reference_is_dangling_with_a_hint() {
    let text = with("args: [b, W, x]}", "args: [b, W, y]}");
    let msg = err(&text);
    assert!(
        msg.starts_with("user/t.yaml:12: cell `t`: op `pre`: undefined operand `y`"),
        "{msg}"
    );
    assert!(msg.contains("defined by a later op at line 13"), "{msg}");
}

#[test]
fn unknown_field_reports_line_and_field() {
    let msg = err(&with("args: [pre]}", "args: [pre], bogus: 1}"));
    assert!(msg.starts_with("user/t.yaml:13:"), "{msg}");
    assert!(msg.contains("unknown field `bogus`"), "{msg}");
    let msg = err(&with("doc: test cell", "doc: test cell\nversion: 2"));
    assert!(msg.starts_with("user/t.yaml:3:"), "{msg}");
    assert!(msg.contains("unknown field `version`"), "{msg}");
    match load(&with("    arity: one", "    arity: one\n    kind: x")) {
        Err(CellError::Parse { line, message, .. }) => {
            assert_eq!(line, 6);
            assert!(message.contains("`kind`"), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn unknown_op() {
    let msg = err(&with("op: tanh", "op: tanhh"));
    assert!(
        msg.starts_with(
            "user/t.yaml:13: cell `t`: op `y`: unknown op `tanhh` (known: matmul, affine,"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("one_minus") && msg.contains("pick_loss"),
        "{msg}"
    );
}

#[test]
fn wrong_arg_count() {
    let msg = err(&with("args: [pre]", "args: [pre, pre]"));
    assert_eq!(
        msg,
        "user/t.yaml:13: cell `t`: op `y` (tanh): wrong arg count: expects exactly 1, got 2"
    );
    let msg = err(&with("args: [b, W, x]", "args: [b, W]"));
    assert!(
        msg.contains("op `pre` (affine): wrong arg count: expects an odd number >= 3"),
        "{msg}"
    );
}

#[test]
fn duplicate_name() {
    let msg = err(&with("{name: b, shape: [h]}", "{name: x, shape: [h]}"));
    assert_eq!(
        msg,
        "user/t.yaml:9: cell `t`: name `x` defined twice (first at line 7)"
    );
    let msg = err(&with("{out: y, op: tanh", "{out: pre, op: tanh"));
    assert!(
        msg.contains("user/t.yaml:13: cell `t`: name `pre` defined twice (first at line 12)"),
        "{msg}"
    );
    let msg = err(&with("outputs: [y]", "outputs: [y, y]"));
    assert!(msg.contains("output `y` defined twice"), "{msg}");
}

#[test]
fn output_not_defined() {
    let msg = err(&with("outputs: [y]", "outputs: [y, z]"));
    assert_eq!(msg, "user/t.yaml:14: cell `t`: output `z` is not defined");
    let msg = err(&with("outputs: [y]", "outputs: []"));
    assert!(msg.contains("the cell has no outputs"), "{msg}");
    let msg = err(&with("outputs: [y]", "outputs: [y, x]"));
    assert!(
        msg.contains("output `x` is a port input, not an op result"),
        "{msg}"
    );
}

#[test]
fn shape_mismatch_says_which_operand() {
    let msg = err(&with(
        "{name: W, shape: [h, h]}",
        "{name: W, shape: [h, 2h]}",
    ));
    assert_eq!(
        msg,
        "user/t.yaml:12: cell `t`: op `pre` (affine): shape mismatch: weight (arg 2) is [8, 16] \
         but bias [8] and input (arg 3) [8] need [8, 8]"
    );
    let text = with(
        "args: [pre]}",
        "args: [pre]}\n  - {out: z, op: add, args: [y, W]}",
    )
    .replace("outputs: [y]", "outputs: [z]");
    let msg = err(&text);
    assert!(
        msg.contains("op `z` (add): shape mismatch: arg 1 is [8] but arg 2 is [8, 8]"),
        "{msg}"
    );
}

#[test]
fn dead_op() {
    let text = with(
        "args: [pre]}",
        "args: [pre]}\n  - {out: spare, op: relu, args: [pre]}",
    );
    assert_eq!(
        err(&text),
        "user/t.yaml:14: cell `t`: dead op `spare`: its result is never used and is not an output"
    );
}

#[test]
fn unused_param_and_input() {
    let msg = err(&with("params:", "params:\n  - {name: junk, shape: [h]}"));
    assert_eq!(
        msg,
        "user/t.yaml:9: cell `t`: param `junk` is never used by any op"
    );
    let text = with(
        "{name: x, shape: [h]}",
        "{name: x, shape: [h]}\n      - {name: x2, shape: [h]}",
    );
    assert!(err(&text).contains("port input `x2` is never used"));
}

#[test]
fn bad_dim_expression() {
    let msg = err(&with(
        "{name: W, shape: [h, h]}",
        "{name: W, shape: [h, 4x]}",
    ));
    assert!(
        msg.starts_with(
            "user/t.yaml:10: cell `t`: param `W` shape dim 2: bad dim expression `4x`:"
        ),
        "{msg}"
    );
    let msg = err(&with(
        "{name: W, shape: [h, h]}",
        "{name: W, shape: [h, -8]}",
    ));
    assert!(msg.contains("bad dim expression `-8`"), "{msg}");
    let msg = err(&with("{name: x, shape: [h]}", "{name: x, shape: [1.5]}"));
    assert!(
        msg.contains("port `x` input `x` shape dim 1: bad dim expression `1.5`"),
        "{msg}"
    );
}

#[test]
fn bad_shapes() {
    let msg = err(&with(
        "{name: W, shape: [h, h]}",
        "{name: W, shape: [h, h, h, h]}",
    ));
    assert!(
        msg.contains("param `W` shape: bad shape: needs 1 to 3 dims, got 4"),
        "{msg}"
    );
    let msg = err(&with("{name: b, shape: [h]}", "{name: b, shape: []}"));
    assert!(msg.contains("needs 1 to 3 dims, got 0"), "{msg}");
    let msg = err(&with("{name: b, shape: [h]}", "{name: b, shape: [0]}"));
    assert!(msg.contains("dim 1 (`0`) is 0"), "{msg}");
}

#[test]
fn lookup_arg_must_be_a_param() {
    let text = with(
        "args: [pre]}",
        "args: [pre]}\n  - {out: e, op: lookup, args: [y]}",
    )
    .replace("outputs: [y]", "outputs: [e]");
    assert_eq!(
        err(&text),
        "user/t.yaml:14: cell `t`: op `e` (lookup): arg `y` is not a param (lookup reads a parameter table)"
    );
}

#[test]
fn slice_range_and_attrs() {
    let ok = BASE.replace(
        "  - {out: y, op: tanh, args: [pre]}",
        "  - {out: s, op: slice, args: [pre], start: 2, len: 6}\n  - {out: y, op: tanh, args: [s]}",
    );
    let lib_ok = load(&ok);
    assert!(lib_ok.is_ok(), "{lib_ok:?}");
    let bad = ok.replace("start: 2, len: 6", "start: 4, len: h");
    assert_eq!(
        err(&bad),
        "user/t.yaml:13: cell `t`: op `s` (slice): slice out of range: start 4 + len 8 exceeds dim 0 of \
         size 8 (or len is 0)"
    );
    let missing = ok.replace(", len: 6", "");
    assert!(err(&missing).contains("op `s` (slice): slice needs both `start` and `len`"));
    let stray = with("args: [pre]}", "args: [pre], start: 0}");
    assert!(err(&stray).contains("op `y` (tanh): `start` and `len` are only allowed on slice"));
    let dim = ok.replace("len: 6", "len: six");
    assert!(err(&dim).contains("op `s` len: bad dim expression `six`"));
}

#[test]
fn bad_names_and_empty_ports() {
    let msg = err(&with("name: t\n", "name: \"t[1]\"\n"));
    assert!(msg.contains("invalid cell name `t[1]`"), "{msg}");
    let msg = err(&with("{out: y,", "{out: \"y;z\","));
    assert!(msg.contains("invalid op result name `y;z`"), "{msg}");
    let text = with(
        "params:",
        "  - name: e\n    arity: many\n    inputs: []\nparams:",
    );
    assert!(err(&text).contains("port `e` has no inputs"));
}

#[test]
fn empty_ports_are_allowed() {
    let text = "name: emb\nparams:\n  - {name: E, shape: [50, 2h]}\nops:\n  - {out: e, op: lookup, args: [E]}\noutputs: [e]\n";
    let mut lib = CellLibrary::new();
    assert_eq!(lib.add_yaml(text, "emb.yaml").expect("valid"), "emb");
    let cell = lib.instantiate("emb", 4).expect("valid");
    assert!(cell.ports.is_empty());
    assert_eq!(cell.output_shapes(), vec![&[8usize][..]]);
}

#[test]
fn yaml_syntax_error_has_line() {
    let msg = err(&with("args: [pre]}", "args: [pre}"));
    assert!(msg.starts_with("user/t.yaml:13:"), "{msg}");
    let msg = err(&with("    arity: one", "    arity: sometimes"));
    assert!(msg.starts_with("user/t.yaml:5:"), "{msg}");
}

#[test]
fn unknown_cell_lists_known() {
    let lib = CellLibrary::builtin().expect("builtins load");
    let msg = lib
        .instantiate("treelstm", 8)
        .expect_err("unknown")
        .to_string();
    assert!(
        msg.starts_with("unknown cell `treelstm` (known: gru, lattice_gru.char,"),
        "{msg}"
    );
    assert!(msg.contains("tree_lstm.internal"), "{msg}");
}

#[test]
fn hidden_zero_and_overflow() {
    let mut lib = CellLibrary::new();
    lib.add_yaml(BASE, FILE).expect("valid");
    assert!(
        lib.instantiate("t", 0)
            .expect_err("h=0")
            .to_string()
            .contains("hidden size must be at least 1")
    );
    let too_big = lib
        .instantiate("t", usize::MAX)
        .expect_err("overflow")
        .to_string();
    assert!(
        too_big.contains(
            "user/t.yaml:7: cell `t`: port `x` input `x` shape: bad shape: too many elements"
        ),
        "{too_big}"
    );
    let wide = "name: w\nparams:\n  - {name: E, shape: [2, 4h]}\nops:\n  - {out: e, op: lookup, args: [E]}\noutputs: [e]\n";
    lib.add_yaml(wide, "w.yaml").expect("valid at h = 8");
    // 4h overflows before anything is allocated.
    let msg = lib
        .instantiate("w", usize::MAX / 2)
        .expect_err("overflow")
        .to_string();
    assert!(
        msg.starts_with(
            "w.yaml:3: cell `w`: param `E` shape dim 2: bad dim expression `4h`: overflows at h ="
        ),
        "{msg}"
    );
}

#[test]
fn name_clash_with_builtin_is_an_error() {
    let mut lib = CellLibrary::builtin().expect("builtins load");
    let before = lib.len();
    let msg = lib
        .add_yaml(&with("name: t\n", "name: lstm\n"), FILE)
        .expect_err("clash")
        .to_string();
    assert_eq!(
        msg,
        "cell `lstm` from user/t.yaml clashes with the cell of that name from engine/core/cells/lstm.yaml"
    );
    assert_eq!(lib.len(), before);
}

#[test]
fn user_file_load_and_bind_to_builtins() {
    let dir = std::env::temp_dir().join(format!("batchlab-cells-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("my_rnn.yaml");
    let text = BASE.replace("name: t\n", "name: my_rnn\n");
    std::fs::write(&path, text).expect("write temp file");
    let mut lib = CellLibrary::builtin().expect("builtins load");
    assert_eq!(lib.load_file(&path).expect("loads"), "my_rnn");
    assert!(lib.names().any(|n| n == "my_rnn"));
    let mine = lib.instantiate("my_rnn", 16).expect("valid");
    let lookup = lib.instantiate("lookup", 16).expect("valid");
    mine.check_binding(0, &lookup).expect("x <- lookup binds");
    lib.instantiate("lstm", 16)
        .expect("valid")
        .check_binding(0, &mine)
        .expect("lstm x <- my_rnn binds");

    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, with("op: tanh", "op: tahn")).expect("write temp file");
    let msg = lib.load_file(&bad).expect_err("bad op").to_string();
    assert!(
        msg.starts_with(&format!(
            "{}:13: cell `t`: op `y`: unknown op `tahn`",
            bad.display()
        )),
        "{msg}"
    );
    let missing = dir.join("missing.yaml");
    let msg = lib.load_file(&missing).expect_err("missing").to_string();
    assert!(
        msg.starts_with("cannot read cell file") && msg.contains("missing.yaml"),
        "{msg}"
    );
    std::fs::remove_dir_all(&dir).expect("clean up temp dir");
}

#[test]
fn scale_factor_is_parsed_and_a_missing_or_non_finite_or_stray_factor_names_the_field() {
    let ok = with(
        "op: tanh, args: [pre]}",
        "op: scale, args: [pre], factor: -0.5}",
    );
    assert_eq!(load(&ok).expect("valid"), "t");
    let missing = with("op: tanh, args: [pre]}", "op: scale, args: [pre]}");
    let msg = err(&missing);
    assert!(
        msg.starts_with("user/t.yaml:13:")
            && msg.contains("op `y` (scale): scale needs a `factor`"),
        "{msg}"
    );
    for bad in [".nan", ".inf", "-.inf", "1e39"] {
        let text = with(
            "op: tanh, args: [pre]}",
            &format!("op: scale, args: [pre], factor: {bad}}}"),
        );
        let msg = err(&text);
        assert!(
            msg.contains("op `y` (scale): `factor` must be a finite f32"),
            "{bad}: {msg}"
        );
    }
    let stray = with("args: [pre]}", "args: [pre], factor: 2}");
    assert!(err(&stray).contains("op `y` (tanh): `factor` is only allowed on scale"));
    let text = with("args: [pre]}", "args: [pre], factor: two}");
    assert!(err(&text).starts_with("user/t.yaml:"), "{}", err(&text));
}
