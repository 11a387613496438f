//! Validation of a [`CellSpec`] and construction of a concrete [`Cell`].
//!
//! Validation and instantiation are one pass on purpose: every check that needs
//! shapes (shape rules, slice ranges) needs a concrete `h`, and keeping a single
//! code path means a file that loads (validated at h = 8) can only fail later
//! for a reason that depends on `h`: a constant dim that matches `h` only at 8,
//! a slice that fits only some `h`, or arithmetic overflow at a huge `h`.
//! The first problem found is reported; checks run roughly in file order
//! (ports, params, ops, outputs, then liveness), so it is near the top.

use std::collections::BTreeMap;

use super::cell::{Cell, Op, PortInfo, ValueId, ValueInfo, ValueKind};
use super::error::{CellError, Site};
use super::ops::{PrimOp, ShapeError};
use super::shape::{DimExpr, DimText, checked_numel};
use super::spec::{CellSpec, OpSpec};

mod finish;

impl CellSpec {
    /// Validates the spec and builds it at hidden size `hidden`.
    pub fn instantiate(&self, hidden: usize) -> Result<Cell, CellError> {
        instantiate(self, hidden)
    }
}

/// Validates `spec` and builds it at hidden size `hidden`.
pub(crate) fn instantiate(spec: &CellSpec, hidden: usize) -> Result<Cell, CellError> {
    if hidden == 0 {
        return Err(CellError::BadHidden {
            cell: spec.name().to_owned(),
            hidden,
        });
    }
    let mut b = Builder {
        spec,
        hidden,
        values: Vec::new(),
        lines: Vec::new(),
        names: BTreeMap::new(),
    };
    let name_line = spec.name.referenced.line();
    b.check_name(name_line, "cell", spec.name())?;

    let ports = b.ports()?;
    let mut params = Vec::with_capacity(spec.params.len());
    for p in &spec.params {
        let line = p.referenced.line();
        b.check_name(line, "param", &p.value.name)?;
        let field = format!("param `{}` shape", p.value.name);
        let shape = b.shape(line, &field, &p.value.shape)?;
        params.push(b.define(&p.value.name, shape, ValueKind::Param, line, &field)?);
    }
    let ops = b.ops()?;
    let outputs = b.outputs(name_line)?;
    b.check_all_used(&ops, &outputs)?;
    b.check_param_bytes(&params, name_line)?;

    Ok(Cell {
        name: spec.name().to_owned(),
        hidden,
        doc: spec.doc().to_owned(),
        values: b.values,
        ports,
        params,
        ops,
        outputs,
    })
}

struct Builder<'a> {
    spec: &'a CellSpec,
    hidden: usize,
    values: Vec<ValueInfo>,
    /// Line of each value's definition, parallel to `values`.
    lines: Vec<u64>,
    names: BTreeMap<String, ValueId>,
}

impl Builder<'_> {
    fn site(&self, line: u64) -> Box<Site> {
        Box::new(Site {
            file: self.spec.source().to_owned(),
            line,
            cell: self.spec.name().to_owned(),
        })
    }

    /// Names end up inside signatures (`affine@role:b,W[...]`) and node types
    /// (`cell[h=64]`), so the separators used there are kept out of them.
    fn check_name(&self, line: u64, what: &'static str, name: &str) -> Result<(), CellError> {
        let ok = !name.is_empty()
            && name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
        if ok {
            Ok(())
        } else {
            Err(CellError::BadName {
                at: self.site(line),
                what,
                name: name.to_owned(),
            })
        }
    }

    fn dim(&self, line: u64, field: &str, text: &DimText) -> Result<usize, CellError> {
        let bad = |reason: String| CellError::BadDim {
            at: self.site(line),
            field: field.to_owned(),
            text: text.0.clone(),
            reason,
        };
        let expr = DimExpr::parse(&text.0).map_err(bad)?;
        expr.eval(self.hidden)
            .ok_or_else(|| bad(format!("overflows at h = {}", self.hidden)))
    }

    fn shape(&self, line: u64, field: &str, dims: &[DimText]) -> Result<Vec<usize>, CellError> {
        let bad = |reason: String| CellError::BadShape {
            at: self.site(line),
            field: field.to_owned(),
            reason,
        };
        if dims.is_empty() || dims.len() > 3 {
            return Err(bad(format!("needs 1 to 3 dims, got {}", dims.len())));
        }
        let mut shape = Vec::with_capacity(dims.len());
        for (i, text) in dims.iter().enumerate() {
            let d = self.dim(line, &format!("{field} dim {}", i + 1), text)?;
            if d == 0 {
                return Err(bad(format!("dim {} (`{text}`) is 0", i + 1)));
            }
            shape.push(d);
        }
        Ok(shape)
    }

    /// Adds a value; `field` names its shape in errors. Byte sizes (f32) must
    /// fit in `usize` so later size arithmetic cannot overflow.
    fn define(
        &mut self,
        name: &str,
        shape: Vec<usize>,
        kind: ValueKind,
        line: u64,
        field: &str,
    ) -> Result<ValueId, CellError> {
        self.check_unique(name, line)?;
        if checked_numel(&shape)
            .and_then(|n| n.checked_mul(4))
            .is_none()
        {
            return Err(CellError::BadShape {
                at: self.site(line),
                field: field.to_owned(),
                reason: format!("too many elements at h = {}", self.hidden),
            });
        }
        // A file with 2^32 entries cannot be held in memory, so this fits.
        let id = ValueId(self.values.len() as u32);
        self.values.push(ValueInfo {
            name: name.to_owned(),
            shape,
            kind,
        });
        self.lines.push(line);
        self.names.insert(name.to_owned(), id);
        Ok(id)
    }

    fn check_unique(&self, name: &str, line: u64) -> Result<(), CellError> {
        match self.names.get(name) {
            Some(&prev) => Err(CellError::Duplicate {
                at: self.site(line),
                what: "name",
                name: name.to_owned(),
                first_line: self.lines[prev.index()],
            }),
            None => Ok(()),
        }
    }

    fn ports(&mut self) -> Result<Vec<PortInfo>, CellError> {
        let spec = self.spec;
        let mut ports = Vec::with_capacity(spec.ports.len());
        let mut port_lines: BTreeMap<&str, u64> = BTreeMap::new();
        for (index, port) in spec.ports.iter().enumerate() {
            let (line, p) = (port.referenced.line(), &port.value);
            self.check_name(line, "port", &p.name)?;
            if let Some(&first_line) = port_lines.get(p.name.as_str()) {
                return Err(CellError::Duplicate {
                    at: self.site(line),
                    what: "port",
                    name: p.name.clone(),
                    first_line,
                });
            }
            port_lines.insert(&p.name, line);
            if p.inputs.is_empty() {
                return Err(CellError::EmptyPort {
                    at: self.site(line),
                    port: p.name.clone(),
                });
            }
            let mut inputs = Vec::with_capacity(p.inputs.len());
            for input in &p.inputs {
                let (line, v) = (input.referenced.line(), &input.value);
                self.check_name(line, "input", &v.name)?;
                let field = format!("port `{}` input `{}` shape", p.name, v.name);
                let shape = self.shape(line, &field, &v.shape)?;
                // Same size argument as in `define`.
                let kind = ValueKind::Input { port: index as u32 };
                inputs.push(self.define(&v.name, shape, kind, line, &field)?);
            }
            ports.push(PortInfo {
                name: p.name.clone(),
                arity: p.arity,
                inputs,
            });
        }
        Ok(ports)
    }

    fn ops(&mut self) -> Result<Vec<Op>, CellError> {
        let spec = self.spec;
        // First definition line of every op result, to explain forward references.
        let mut op_lines: BTreeMap<&str, u64> = BTreeMap::new();
        for op in &spec.ops {
            op_lines
                .entry(op.value.out.as_str())
                .or_insert(op.referenced.line());
        }
        let mut ops = Vec::with_capacity(spec.ops.len());
        for (index, op) in spec.ops.iter().enumerate() {
            let built = self.op(op.referenced.line(), &op.value, index, &op_lines)?;
            ops.push(built);
        }
        Ok(ops)
    }

    fn op(
        &mut self,
        line: u64,
        o: &OpSpec,
        index: usize,
        op_lines: &BTreeMap<&str, u64>,
    ) -> Result<Op, CellError> {
        self.check_name(line, "op result", &o.out)?;
        self.check_unique(&o.out, line)?;
        let at = || self.site(line);
        let kind = PrimOp::from_name(&o.op).ok_or_else(|| CellError::UnknownOp {
            at: at(),
            out: o.out.clone(),
            op: o.op.clone(),
            known: PrimOp::ALL.map(PrimOp::name).join(", "),
        })?;
        if !kind.arg_count().accepts(o.args.len()) {
            return Err(CellError::ArgCount {
                at: at(),
                out: o.out.clone(),
                op: kind,
                expected: kind.arg_count().to_string(),
                got: o.args.len(),
            });
        }
        let attrs = |message: &str| CellError::Attrs {
            at: at(),
            out: o.out.clone(),
            op: kind,
            message: message.to_owned(),
        };
        let slice = match (kind == PrimOp::Slice, &o.start, &o.len) {
            (true, Some(start), Some(len)) => Some((
                self.dim(line, &format!("op `{}` start", o.out), start)?,
                self.dim(line, &format!("op `{}` len", o.out), len)?,
            )),
            (true, _, _) => return Err(attrs("slice needs both `start` and `len`")),
            (false, None, None) => None,
            (false, _, _) => return Err(attrs("`start` and `len` are only allowed on slice")),
        };
        // The factor is an f32 like every value; one that overflows f32 is
        // refused with the non-finite ones.
        let factor = match (kind == PrimOp::Scale, o.factor) {
            (true, Some(c)) if (c as f32).is_finite() => Some(c as f32),
            (true, Some(c)) => {
                return Err(attrs(&format!("`factor` must be a finite f32, got {c}")));
            }
            (true, None) => return Err(attrs("scale needs a `factor` (y = factor · x)")),
            (false, None) => None,
            (false, Some(_)) => return Err(attrs("`factor` is only allowed on scale")),
        };
        let mut args = Vec::with_capacity(o.args.len());
        for a in &o.args {
            let Some(&id) = self.names.get(a) else {
                let hint = if *a == o.out {
                    " (an op cannot read its own result)".to_owned()
                } else if let Some(l) = op_lines.get(a.as_str()) {
                    format!(
                        " (it is defined by a later op at line {l}; list ops in dependency order)"
                    )
                } else {
                    " (not a port input, param or earlier op result)".to_owned()
                };
                return Err(CellError::Dangling {
                    at: at(),
                    out: o.out.clone(),
                    operand: a.clone(),
                    hint,
                });
            };
            if kind == PrimOp::Lookup && self.values[id.index()].kind != ValueKind::Param {
                return Err(CellError::LookupNotParam {
                    at: at(),
                    out: o.out.clone(),
                    arg: a.clone(),
                });
            }
            args.push(id);
        }
        let shapes: Vec<&[usize]> = args
            .iter()
            .map(|id| self.values[id.index()].shape.as_slice())
            .collect();
        let shape = kind.infer_shape(&shapes, slice).map_err(|e| match e {
            ShapeError::Mismatch(detail) => CellError::ShapeMismatch {
                at: at(),
                out: o.out.clone(),
                op: kind,
                detail,
            },
            ShapeError::SliceRange { start, len, dim } => CellError::SliceRange {
                at: at(),
                out: o.out.clone(),
                start,
                len,
                dim,
            },
        })?;
        // Same size argument as in `define` for the op count.
        let kind_out = ValueKind::Op {
            index: index as u32,
        };
        let field = format!("op `{}` result", o.out);
        let out = self.define(&o.out, shape, kind_out, line, &field)?;
        Ok(Op {
            kind,
            args,
            out,
            slice,
            factor,
        })
    }
}
