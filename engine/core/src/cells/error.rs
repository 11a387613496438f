//! Errors of the cells module.
//!
//! Cell files are user input, so every problem is a typed variant whose message
//! names the file, the line, the cell and the op or field involved; a user should
//! be able to fix the file from the message alone. Tests assert on the rendered
//! messages, so wording changes here are deliberate.

use std::fmt;

use thiserror::Error;

use super::ops::PrimOp;

/// Where in a cell file a problem was found; displayed as ``file:line: cell `name` ``
/// (boxed in [`CellError`] to keep the error small on the `Ok` path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The file name (or the source label given to `add_yaml`).
    pub file: String,
    /// 1-based line of the entry (op, param, port input, output); 0 when unknown.
    pub line: u64,
    /// The cell's `name`.
    pub cell: String,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: cell `{}`", self.file, self.cell)
        } else {
            write!(f, "{}:{}: cell `{}`", self.file, self.line, self.cell)
        }
    }
}

/// Everything that can go wrong loading, validating or binding cells.
#[derive(Debug, Error)]
pub enum CellError {
    /// A user cell file could not be read.
    #[error("cannot read cell file {path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed or does not match the file format (unknown field,
    /// missing field, wrong type); the message comes from the YAML parser.
    #[error("{file}:{line}:{column}: {message}")]
    Parse {
        /// The file name or source label.
        file: String,
        /// 1-based line (0 when the parser gave none).
        line: u64,
        /// 1-based column (0 when the parser gave none).
        column: u64,
        /// The parser's message, e.g. "unknown field `bogus`, expected one of ...".
        message: String,
    },
    /// A cell, port or value name uses characters that would break signatures.
    #[error("{at}: invalid {what} name `{name}` (use ASCII letters, digits, `_`, `.`, `-`)")]
    BadName {
        /// Location.
        at: Box<Site>,
        /// "cell", "port", "input", "param" or "op result".
        what: &'static str,
        /// The offending name.
        name: String,
    },
    /// `instantiate` was asked for hidden size 0.
    #[error("cell `{cell}`: hidden size must be at least 1, got {hidden}")]
    BadHidden {
        /// The cell.
        cell: String,
        /// The requested size.
        hidden: usize,
    },
    /// A port lists no inputs.
    #[error("{at}: port `{port}` has no inputs")]
    EmptyPort {
        /// Location.
        at: Box<Site>,
        /// The port.
        port: String,
    },
    /// `op:` is not one of the primitive ops.
    #[error("{at}: op `{out}`: unknown op `{op}` (known: {known})")]
    UnknownOp {
        /// Location.
        at: Box<Site>,
        /// The op's `out` name.
        out: String,
        /// What was written.
        op: String,
        /// Comma-separated known op names.
        known: String,
    },
    /// The op got a number of arguments its rule does not allow.
    #[error("{at}: op `{out}` ({op}): wrong arg count: expects {expected}, got {got}")]
    ArgCount {
        /// Location.
        at: Box<Site>,
        /// The op's `out` name.
        out: String,
        /// The op.
        op: PrimOp,
        /// The rule, e.g. "exactly 2".
        expected: String,
        /// Arguments given.
        got: usize,
    },
    /// `start`/`len` missing on a slice, `factor` missing or not finite on a
    /// scale, or either present on another op.
    #[error("{at}: op `{out}` ({op}): {message}")]
    Attrs {
        /// Location.
        at: Box<Site>,
        /// The op's `out` name.
        out: String,
        /// The op.
        op: PrimOp,
        /// What is wrong.
        message: String,
    },
    /// An argument names nothing defined before the op.
    #[error("{at}: op `{out}`: undefined operand `{operand}`{hint}")]
    Dangling {
        /// Location.
        at: Box<Site>,
        /// The op's `out` name.
        out: String,
        /// The unknown name.
        operand: String,
        /// Extra explanation (e.g. "defined by a later op"), possibly empty.
        hint: String,
    },
    /// Two inputs/params/op results (or two ports, or two outputs) share a name.
    #[error("{at}: {what} `{name}` defined twice (first at line {first_line})")]
    Duplicate {
        /// Location of the second definition.
        at: Box<Site>,
        /// "name", "port" or "output".
        what: &'static str,
        /// The name.
        name: String,
        /// Line of the first definition.
        first_line: u64,
    },
    /// `outputs` names something that is not defined.
    #[error("{at}: output `{name}` is not defined")]
    UndefinedOutput {
        /// Location.
        at: Box<Site>,
        /// The name.
        name: String,
    },
    /// `outputs` names an input or param: outputs must be computed by an op.
    #[error("{at}: output `{name}` is a {kind}, not an op result (copy it with `sum`)")]
    OutputNotOp {
        /// Location.
        at: Box<Site>,
        /// The name.
        name: String,
        /// "port input" or "param".
        kind: &'static str,
    },
    /// `outputs` is empty.
    #[error("{at}: the cell has no outputs")]
    NoOutputs {
        /// Location.
        at: Box<Site>,
    },
    /// Operand shapes violate the op's rule.
    #[error("{at}: op `{out}` ({op}): shape mismatch: {detail}")]
    ShapeMismatch {
        /// Location.
        at: Box<Site>,
        /// The op's `out` name.
        out: String,
        /// The op.
        op: PrimOp,
        /// Which operands and shapes.
        detail: String,
    },
    /// A dim expression is not `h`, `<int>h` or `<int>`.
    #[error("{at}: {field}: bad dim expression `{text}`: {reason}")]
    BadDim {
        /// Location.
        at: Box<Site>,
        /// The field, e.g. "param `W` shape dim 2" or "op `s` start".
        field: String,
        /// What was written.
        text: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A declared shape has the wrong rank, a zero dim, or is too large.
    #[error("{at}: {field}: bad shape: {reason}")]
    BadShape {
        /// Location.
        at: Box<Site>,
        /// The field, e.g. "param `W` shape".
        field: String,
        /// Why it is rejected.
        reason: String,
    },
    /// An op whose result is neither used by a later op nor an output.
    #[error("{at}: dead op `{out}`: its result is never used and is not an output")]
    DeadOp {
        /// Location.
        at: Box<Site>,
        /// The op's `out` name.
        out: String,
    },
    /// A param or port input that no op reads.
    #[error("{at}: {kind} `{name}` is never used by any op")]
    Unused {
        /// Location.
        at: Box<Site>,
        /// "param" or "port input".
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// `lookup` reads a value that is not a parameter table.
    #[error(
        "{at}: op `{out}` (lookup): arg `{arg}` is not a param (lookup reads a parameter table)"
    )]
    LookupNotParam {
        /// Location.
        at: Box<Site>,
        /// The op's `out` name.
        out: String,
        /// The argument.
        arg: String,
    },
    /// `slice` reaches past dim 0 of its operand (or has `len` 0).
    #[error(
        "{at}: op `{out}` (slice): slice out of range: start {start} + len {len} exceeds dim 0 of size {dim} (or len is 0)"
    )]
    SliceRange {
        /// Location.
        at: Box<Site>,
        /// The op's `out` name.
        out: String,
        /// First row.
        start: usize,
        /// Rows.
        len: usize,
        /// Operand dim 0.
        dim: usize,
    },
    /// A second cell with an existing name was added to a library.
    #[error("cell `{name}` from {file} clashes with the cell of that name from {existing}")]
    NameClash {
        /// The cell name.
        name: String,
        /// Where the new one came from.
        file: String,
        /// Where the existing one came from.
        existing: String,
    },
    /// `instantiate` of a name the library does not hold.
    #[error("unknown cell `{name}` (known: {known})")]
    UnknownCell {
        /// The requested name.
        name: String,
        /// Comma-separated known names.
        known: String,
    },
    /// `check_binding` got a port index the cell does not have.
    #[error("cell `{cell}` has no port {port} (it has {count})")]
    BadPort {
        /// The consumer cell.
        cell: String,
        /// The index asked for.
        port: usize,
        /// How many ports the cell has.
        count: usize,
    },
    /// A producer cell cannot feed a port (binding rule).
    #[error("cannot bind `{producer}` to port `{port}` of `{consumer}`: {reason}")]
    Binding {
        /// The consumer cell.
        consumer: String,
        /// The port name.
        port: String,
        /// The producer cell.
        producer: String,
        /// Why.
        reason: String,
    },
}
