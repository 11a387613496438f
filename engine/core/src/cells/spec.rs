//! The cell file format as serde types (see docs/cells.md).
//!
//! These types mirror the YAML one to one and do no validation beyond what serde
//! does (`deny_unknown_fields` everywhere, so a misspelt key is an error with a
//! line number rather than a silently ignored field). Entries that validation
//! may need to point at are wrapped in [`Spanned`] so that semantic errors found
//! later (a dangling operand, a shape mismatch) still carry their line.
//! Op names are kept as text here so that an unknown op is reported by
//! validation with the cell and op named, not as a generic serde enum error.

use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;

use super::error::CellError;
use super::shape::DimText;

/// How many producer nodes feed a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arity {
    /// Exactly one producer.
    One,
    /// Zero or one producer; absent means the port's inputs are zeros
    /// (e.g. the first step of a chain).
    Optional,
    /// Any number of producers (0..n); their values are summed elementwise
    /// before the cell runs (Cavs child-sum gather); none means zeros.
    Many,
}

/// A named tensor with a shape of dim expressions (a port input or a param).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValueSpec {
    /// The name ops refer to.
    pub name: String,
    /// 1 to 3 dim expressions.
    pub shape: Vec<DimText>,
}

/// A port: a group of inputs bound together to one producer's first outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortSpec {
    /// Port name (unique within the cell).
    pub name: String,
    /// How many producers.
    pub arity: Arity,
    /// The inputs, bound in order to the producer's outputs.
    pub inputs: Vec<Spanned<ValueSpec>>,
}

/// One op line: `{out: name, op: kind, args: [...]}` (+ `start`, `len` for slice,
/// `factor` for scale).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpSpec {
    /// Name of the result.
    pub out: String,
    /// Primitive op name (see [`super::PrimOp::name`]).
    pub op: String,
    /// Operand names: inputs, params or earlier op results.
    pub args: Vec<String>,
    /// `slice` only: first row along dim 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<DimText>,
    /// `slice` only: number of rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<DimText>,
    /// `scale` only: the constant `c` of `y = c · x` (finite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
}

/// A parsed cell file. Validate it with [`CellSpec::instantiate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellSpec {
    /// Cell name, e.g. `tree_lstm.internal`.
    pub name: Spanned<String>,
    /// What the cell computes and where the equations come from.
    #[serde(default)]
    pub doc: String,
    /// Ports in argument order (may be empty: leaves read run-time data only).
    #[serde(default)]
    pub ports: Vec<Spanned<PortSpec>>,
    /// Trainable parameters.
    #[serde(default)]
    pub params: Vec<Spanned<ValueSpec>>,
    /// Ops in dependency order.
    pub ops: Vec<Spanned<OpSpec>>,
    /// Names of the op results the cell exposes, in order.
    pub outputs: Vec<Spanned<String>>,
    /// Where the spec was read from (not part of the file).
    #[serde(skip)]
    source: String,
}

impl CellSpec {
    /// Parses one cell file; `source` names it in errors (a path or a label).
    /// Only the format is checked here; [`CellSpec::instantiate`] validates.
    pub fn parse(text: &str, source: &str) -> Result<CellSpec, CellError> {
        let mut spec: CellSpec =
            serde_saphyr::from_str(text).map_err(|e| parse_error(&e, text, source))?;
        spec.source = source.to_owned();
        Ok(spec)
    }

    /// The cell name.
    pub fn name(&self) -> &str {
        &self.name.value
    }

    /// The doc text.
    pub fn doc(&self) -> &str {
        &self.doc
    }

    /// The file name or label the spec was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// Converts a serde-saphyr error into [`CellError::Parse`] (see [`crate::yaml`]).
fn parse_error(err: &serde_saphyr::Error, text: &str, source: &str) -> CellError {
    let (line, column, message) = crate::yaml::error_parts(err, text);
    CellError::Parse {
        file: source.to_owned(),
        line,
        column,
        message,
    }
}
