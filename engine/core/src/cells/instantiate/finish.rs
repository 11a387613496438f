//! The checks that need the whole cell: outputs, liveness and total size.
//!
//! They run after every op is built, because "is this value used?" and "is
//! this output an op result?" can only be answered once all ops are known.

use std::collections::BTreeMap;

use super::Builder;
use crate::cells::cell::{Op, ValueId, ValueKind};
use crate::cells::error::CellError;

impl Builder<'_> {
    /// Resolves `outputs:`; each must name a distinct op result.
    pub(super) fn outputs(&self, name_line: u64) -> Result<Vec<ValueId>, CellError> {
        if self.spec.outputs.is_empty() {
            return Err(CellError::NoOutputs {
                at: self.site(name_line),
            });
        }
        let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
        let mut outputs = Vec::with_capacity(self.spec.outputs.len());
        for out in &self.spec.outputs {
            let (line, name) = (out.referenced.line(), out.value.as_str());
            if let Some(&first_line) = seen.get(name) {
                return Err(CellError::Duplicate {
                    at: self.site(line),
                    what: "output",
                    name: name.to_owned(),
                    first_line,
                });
            }
            seen.insert(name, line);
            let Some(&id) = self.names.get(name) else {
                return Err(CellError::UndefinedOutput {
                    at: self.site(line),
                    name: name.to_owned(),
                });
            };
            let kind = match self.values[id.index()].kind {
                ValueKind::Op { .. } => None,
                ValueKind::Input { .. } => Some("port input"),
                ValueKind::Param => Some("param"),
            };
            if let Some(kind) = kind {
                return Err(CellError::OutputNotOp {
                    at: self.site(line),
                    name: name.to_owned(),
                    kind,
                });
            }
            outputs.push(id);
        }
        Ok(outputs)
    }

    /// Unused values are almost always a typo in an argument list (the intended
    /// value is read twice, the typo'd one never), so they are errors.
    pub(super) fn check_all_used(&self, ops: &[Op], outputs: &[ValueId]) -> Result<(), CellError> {
        let mut used = vec![false; self.values.len()];
        for id in ops.iter().flat_map(|op| &op.args).chain(outputs) {
            used[id.index()] = true;
        }
        let first_unused = used.iter().position(|&u| !u);
        let Some(i) = first_unused else {
            return Ok(());
        };
        let (v, at) = (&self.values[i], self.site(self.lines[i]));
        let name = v.name.clone();
        Err(match v.kind {
            ValueKind::Op { .. } => CellError::DeadOp { at, out: name },
            ValueKind::Param => CellError::Unused {
                at,
                kind: "param",
                name,
            },
            ValueKind::Input { .. } => CellError::Unused {
                at,
                kind: "port input",
                name,
            },
        })
    }

    /// Makes `Cell::param_bytes` overflow-free.
    pub(super) fn check_param_bytes(&self, params: &[ValueId], line: u64) -> Result<(), CellError> {
        let total = params.iter().try_fold(0usize, |acc, p| {
            // Each value's own byte size was checked in `define`.
            acc.checked_add(self.values[p.index()].shape.iter().product::<usize>() * 4)
        });
        match total {
            Some(_) => Ok(()),
            None => Err(CellError::BadShape {
                at: self.site(line),
                field: "params".to_owned(),
                reason: "total parameter bytes overflow".to_owned(),
            }),
        }
    }
}
