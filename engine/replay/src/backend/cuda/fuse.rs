//! Kernel fusion of elementwise chains (Cavs §3.5): consecutive in-cell batches
//! of elementwise ops over the same `m × len` elements, reading and writing the
//! records in place, become one launch of an interpreter kernel that keeps the
//! chain's intermediates in registers. An operand produced earlier in the chain
//! is read from a register only when it is the same value for every op `j` of
//! the batch (so the thread that needs it computed it); a chain breaks before a
//! batch that would read another thread's result, or that needs more than
//! `REGS` registers. Every result is still stored: later batches may read it.

use super::batch::{Buf, GBatch, GView};
use crate::cells::PrimOp;

/// Registers of the kernel (`FUSED_REGS` in the CUDA source).
const REGS: usize = 16;

/// A fused chain: batches `first..end` of the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Fused {
    pub first: usize,
    pub end: usize,
    pub m: usize,
    pub len: usize,
    /// `5 × n` i64: op, a, b, dst register, store view (-1: none).
    pub code: Vec<i64>,
    /// `4 × views` i64: base, op stride, instance stride, shift per instance.
    pub views: Vec<i64>,
}

fn opcode(kind: PrimOp) -> Option<i64> {
    Some(match kind {
        PrimOp::Sigmoid => 0,
        PrimOp::Tanh => 1,
        PrimOp::Relu => 2,
        PrimOp::OneMinus => 3,
        PrimOp::Gelu => 5,
        PrimOp::Exp => 6,
        // `scale` needs its factor, which the fused chain's code (op, a, b,
        // dst, store) has no slot for: it runs as its own `ew_f32` launch.
        PrimOp::Add => 10,
        PrimOp::Sub => 11,
        PrimOp::Mul => 12,
        _ => return None,
    })
}

/// Can batch `b` join a chain at all?
fn fusable(b: &GBatch) -> bool {
    opcode(b.kind).is_some()
        && b.store.is_none()
        && b.y.buf == Buf::Work
        && b.args
            .iter()
            .all(|a| a.gather.is_none() && a.per_row && a.view.buf == Buf::Work)
}

fn view_entry(views: &mut Vec<i64>, v: &GView) -> i64 {
    let e = [v.base, v.os, v.rs, v.shift_k];
    let i = views.chunks(4).position(|c| c == e).unwrap_or_else(|| {
        views.extend(e);
        views.len() / 4 - 1
    });
    i as i64
}

/// The chains worth fusing (two batches or more) in `batches`.
pub(super) fn chains(batches: &[GBatch]) -> Vec<Fused> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < batches.len() {
        if !fusable(&batches[i]) {
            i += 1;
            continue;
        }
        let (m, len) = (batches[i].m, batches[i].out);
        // Register of each value vector produced so far in the chain.
        let mut regs: Vec<(&[usize], i64)> = Vec::new();
        let (mut code, mut views) = (Vec::new(), Vec::new());
        let mut end = i;
        'chain: while end < batches.len() {
            let b = &batches[end];
            if !fusable(b) || b.m != m || b.out != len || regs.len() == REGS {
                break;
            }
            let mut srcs = [0i64; 2];
            for (s, a) in b.args.iter().enumerate() {
                let vals = a.values.as_slice();
                if let Some((_, r)) = regs.iter().find(|(v, _)| *v == vals) {
                    srcs[s] = *r;
                } else if regs.iter().any(|(v, _)| v.iter().any(|x| vals.contains(x))) {
                    // Another op's result of this chain: another thread's.
                    break 'chain;
                } else {
                    srcs[s] = -view_entry(&mut views, &a.view) - 1;
                }
            }
            if b.args.len() == 1 {
                srcs[1] = srcs[0];
            }
            let dst = regs.len() as i64;
            let store = view_entry(&mut views, &b.y);
            code.extend([opcode(b.kind).unwrap_or(0), srcs[0], srcs[1], dst, store]);
            regs.push((b.out_values.as_slice(), dst));
            end += 1;
        }
        if end - i >= 2 {
            out.push(Fused {
                first: i,
                end,
                m,
                len,
                code,
                views,
            });
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::program::lay_out;
    use crate::cells::CellLibrary;
    use crate::incell::CellProgram;
    use crate::model::RoleModel;

    fn role(cell: &str) -> RoleModel {
        let lib = CellLibrary::builtin().unwrap();
        let cell = lib.instantiate(cell, 8).unwrap();
        let params = cell.values.iter().map(|v| vec![0.0; v.numel()]).collect();
        RoleModel {
            role: (&crate::workloads::workload("fixed-lstm").unwrap().roles[0]).into(),
            cell,
            params,
        }
    }

    /// The LSTM cell run op by op ends in a chain of elementwise ops (gates'
    /// nonlinearities, c = f·c' + i·g, h = o·tanh c): one fused launch, whose
    /// register reads are exactly the chain's own results.
    #[test]
    fn lstm_tail_fuses_into_one_chain() {
        let rm = role("lstm");
        let l = lay_out(&rm.cell, &CellProgram::op_by_op(&rm));
        let fused: Vec<_> = l.fused.iter().map(|(f, ..)| f).collect();
        assert!(!fused.is_empty(), "no chain");
        let longest = fused.iter().map(|f| f.end - f.first).max().unwrap();
        assert!(longest >= 5, "{fused:?}");
        for f in &fused {
            assert_eq!(f.code.len(), 5 * (f.end - f.first));
            for (n, ins) in f.code.chunks(5).enumerate() {
                // A register operand is an earlier instruction's result.
                for &src in &ins[1..3] {
                    assert!(src < n as i64, "{ins:?}");
                }
                assert_eq!(ins[3], n as i64);
            }
            // Every batch of a chain is elementwise, over the chain's shape.
            for b in &l.batches[f.first..f.end] {
                assert!(super::fusable(b));
                assert_eq!((b.m, b.out), (f.m, f.len));
            }
        }
    }

    /// A batch reading another op's result of the same chain (not its own
    /// op's) must not be fused: that value is another thread's.
    #[test]
    fn chain_breaks_before_a_cross_thread_read() {
        let rm = role("lstm");
        let mut l = lay_out(&rm.cell, &CellProgram::op_by_op(&rm));
        let (f, ..) = l.fused[0].clone();
        // Make the chain's second batch claim to read the first's result for
        // op 1 of a two-op batch: values [x, first's out] are a partial overlap.
        let first_out = l.batches[f.first].out_values[0];
        let b = &mut l.batches[f.first + 1];
        b.args[0].values = vec![usize::MAX, first_out];
        let chains = super::chains(&l.batches);
        assert!(
            chains
                .iter()
                .all(|c| !(c.first <= f.first && c.end > f.first + 1))
        );
    }
}
