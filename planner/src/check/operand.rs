//! Per-operand verification: values, offsets, access plan and byte counts.

use engine::cells::Cell;

use super::{CheckError, CheckReport};
use crate::layout_file::{OperandEntry, PlanKind, TotalsEntry, instance_stride};
use crate::problem::Var;

pub(super) struct OperandCtx<'a> {
    pub cell: &'a Cell,
    pub vars: &'a [Var],
    pub offsets: &'a [u64],
    pub batch: usize,
    pub ops_text: String,
    pub instances: u64,
}

impl OperandCtx<'_> {
    pub fn operand(
        &self,
        o: &OperandEntry,
        expect: &[usize],
        label: &str,
        is_result: bool,
        report: &mut CheckReport,
        totals: &mut TotalsEntry,
    ) -> Result<(), CheckError> {
        let bad = |reason: String| CheckError::Operand {
            batch: self.batch,
            ops: self.ops_text.clone(),
            operand: label.to_owned(),
            reason,
        };
        if o.values != expect {
            return Err(bad(format!(
                "values {:?} but the ops read {:?}",
                o.values, expect
            )));
        }
        let names: Vec<&str> = expect
            .iter()
            .map(|&v| self.cell.values[v].name.as_str())
            .collect();
        let offs: Vec<u64> = expect.iter().map(|&v| self.offsets[v]).collect();
        if o.names != names || o.offsets != offs {
            return Err(bad(format!(
                "names/offsets should be {names:?} at {offs:?}"
            )));
        }
        let k = expect.len();
        let first = &self.vars[expect[0]];
        let block = first.bytes;
        if o.instance_stride != instance_stride(self.cell, expect[0]) {
            return Err(bad(format!(
                "instance_stride {} is wrong",
                o.instance_stride
            )));
        }
        let all_same = expect.iter().all(|&v| v == expect[0]);
        let shared = expect.iter().all(|&v| self.vars[v].shared);
        let (bytes, bcast, stride) = match o.plan {
            PlanKind::Contiguous => {
                let uniform = expect
                    .iter()
                    .all(|&v| self.vars[v].bytes == block && self.vars[v].shared == first.shared);
                if !uniform {
                    return Err(bad(
                        "marked contiguous but its values differ in size or kind".into(),
                    ));
                }
                for w in expect.windows(2) {
                    let end = self.offsets[w[0]] + self.vars[w[0]].bytes;
                    if end != self.offsets[w[1]] {
                        return Err(bad(format!(
                            "marked contiguous but `{}` ends at {end} and `{}` starts at {} (not contiguous and aligned)",
                            self.cell.values[w[0]].name,
                            self.cell.values[w[1]].name,
                            self.offsets[w[1]]
                        )));
                    }
                }
                (0, 0, block)
            }
            PlanKind::Broadcast if !is_result && k >= 2 && all_same => (
                0,
                if shared {
                    0
                } else {
                    block.saturating_mul(k as u64)
                },
                0,
            ),
            PlanKind::Gather if !is_result && k >= 2 => (self.sum_bytes(expect), 0, block),
            PlanKind::Scatter if is_result && k >= 2 => (self.sum_bytes(expect), 0, block),
            other => {
                return Err(bad(format!(
                    "plan `{other:?}` is not possible here ({k} ops)"
                )));
            }
        };
        if o.bytes != bytes || o.broadcast_bytes != bcast || o.op_stride != stride {
            return Err(bad(format!(
                "bytes/broadcast_bytes/op_stride are {}/{}/{} but should be {bytes}/{bcast}/{stride}",
                o.bytes, o.broadcast_bytes, o.op_stride
            )));
        }
        // The report counts batched operands (two or more ops) only, so its
        // contiguous, broadcast and copied counts add up to `operands`; a
        // single op's operand is trivially contiguous and not counted.
        if k >= 2 {
            report.operands += 1;
        }
        match o.plan {
            PlanKind::Contiguous => report.contiguous += usize::from(k >= 2),
            PlanKind::Broadcast => {
                report.broadcasts += 1;
                totals.broadcasts += u64::from(bcast > 0);
            }
            PlanKind::Gather => {
                report.copies += 1;
                totals.gathers += 1;
            }
            PlanKind::Scatter => {
                report.copies += 1;
                totals.scatters += 1;
            }
        }
        totals.copy_bytes = totals.copy_bytes.saturating_add(bytes);
        totals.broadcast_bytes = totals.broadcast_bytes.saturating_add(bcast);
        let per = if shared {
            bytes.saturating_mul(self.instances)
        } else {
            bytes
        };
        totals.copy_bytes_per_instance_weights =
            totals.copy_bytes_per_instance_weights.saturating_add(per);
        Ok(())
    }

    fn sum_bytes(&self, values: &[usize]) -> u64 {
        values
            .iter()
            .fold(0u64, |s, &v| s.saturating_add(self.vars[v].bytes))
    }
}
