//! A role's [`CellProgram`] laid out for the device: every operand of every
//! in-cell batch becomes a table view (see `device::kernels_src`) whose per-op
//! offsets are uploaded once, so a run only uploads what changes per batch (the
//! entry/exit segments and per-node data). The record arena of `k` instances is
//! followed by the packed temporaries of gathered operands and of results that
//! are not consecutive in the records, each at `k × (its per-instance offset)`.

use cudarc::driver::CudaSlice;

use super::batch::{Buf, Extra, GArg, GBatch, GView};
use super::fuse::{Fused, chains};
use crate::cells::{Cell, PrimOp, ValueKind};
use crate::device::{CudaDevice, DeviceError};
use crate::incell::{Access, CellProgram};

/// A role's program on the device.
pub(super) struct GpuProgram {
    pub batches: Vec<GBatch>,
    /// Floats of one instance's record.
    pub units: usize,
    /// Offset of each non-parameter value in a record.
    pub unit: Vec<usize>,
    /// Floats of work buffer per instance (record + temporaries).
    pub work_units: usize,
    pub tables: CudaSlice<i64>,
    pub params: CudaSlice<f32>,
    /// Fused elementwise chains, with the offsets of their code and views
    /// in `tables`.
    pub fused: Vec<(Fused, usize, usize)>,
}

struct Tables(Vec<i64>);

impl Tables {
    fn push(&mut self, entries: impl IntoIterator<Item = i64>) -> usize {
        let at = self.0.len();
        self.0.extend(entries);
        at
    }

    fn uniform(&mut self, buf: Buf, base: i64, os: i64, rs: i64, shift_k: i64, m: usize) -> GView {
        let tab = self.push((0..m as i64).map(|j| base + j * os));
        GView {
            buf,
            tab,
            base,
            os,
            rs,
            shift_k,
        }
    }

    fn table(&mut self, buf: Buf, entries: Vec<i64>, rs: i64) -> GView {
        let base = entries[0];
        GView {
            buf,
            tab: self.push(entries),
            base,
            os: 0,
            rs,
            shift_k: 0,
        }
    }
}

/// Lays out `prog` (compiled for `cell`) on `dev`.
pub(super) fn build(
    dev: &CudaDevice,
    cell: &Cell,
    prog: &CellProgram,
) -> Result<GpuProgram, DeviceError> {
    let l = lay_out(cell, prog);
    let s = dev.stream();
    let tables = s.clone_htod(&l.tables).map_err(DeviceError::cuda)?;
    let params = if prog.params.is_empty() {
        s.alloc_zeros::<f32>(1).map_err(DeviceError::cuda)?
    } else {
        s.clone_htod(&prog.params).map_err(DeviceError::cuda)?
    };
    Ok(GpuProgram {
        batches: l.batches,
        units: prog.units,
        unit: prog.unit.clone(),
        work_units: l.work_units,
        tables,
        params,
        fused: l.fused,
    })
}

/// The host side of a [`GpuProgram`]: batches, the view tables (with the
/// fused chains' code appended) and the work floats per instance.
pub(super) struct LaidOut {
    pub batches: Vec<GBatch>,
    pub tables: Vec<i64>,
    pub work_units: usize,
    pub fused: Vec<(Fused, usize, usize)>,
}

/// Lays out `prog` (compiled for `cell`) as views over the work buffer.
pub(super) fn lay_out(cell: &Cell, prog: &CellProgram) -> LaidOut {
    let mut t = Tables(Vec::new());
    let units = prog.units as i64;
    let mut pre = units;
    let mut batches = Vec::with_capacity(prog.batches.len());
    for b in &prog.batches {
        let first = &cell.ops[b.ops[0]];
        let m = b.ops.len();
        let out = cell.values[first.out.0 as usize].numel();
        let mut args = Vec::with_capacity(b.args.len());
        for (i, acc) in b.args.iter().enumerate() {
            let vals: Vec<usize> = b
                .ops
                .iter()
                .map(|&o| cell.ops[o].args[i].0 as usize)
                .collect();
            let info = &cell.values[vals[0]];
            let numel = info.numel();
            let per_row = info.kind != ValueKind::Param;
            let (view, gather) = match (acc, per_row) {
                (Access::Gather, _) => {
                    let (buf, rs, at): (Buf, i64, &[usize]) = if per_row {
                        (Buf::Work, units, &prog.unit)
                    } else {
                        (Buf::Params, 0, &prog.param_at)
                    };
                    let src = t.table(buf, vals.iter().map(|&v| at[v] as i64).collect(), rs);
                    let rs = if per_row { (m * numel) as i64 } else { 0 };
                    let dst = t.uniform(Buf::Work, 0, numel as i64, rs, pre, m);
                    pre += (m * numel) as i64;
                    (dst, Some(src))
                }
                (acc, true) => {
                    let os = if *acc == Access::Broadcast {
                        0
                    } else {
                        numel as i64
                    };
                    let base = prog.unit[vals[0]] as i64;
                    (t.uniform(Buf::Work, base, os, units, 0, m), None)
                }
                (acc, false) => {
                    let os = if *acc == Access::Broadcast {
                        0
                    } else {
                        numel as i64
                    };
                    let base = prog.param_at[vals[0]] as i64;
                    (t.uniform(Buf::Params, base, os, 0, 0, m), None)
                }
            };
            args.push(GArg {
                view,
                gather,
                per_row,
                numel,
                shape: info.shape.clone(),
                values: vals,
            });
        }
        let outs: Vec<i64> = b
            .ops
            .iter()
            .map(|&o| prog.unit[cell.ops[o].out.0 as usize] as i64)
            .collect();
        let (y, store) = if b.result_in_place {
            (t.uniform(Buf::Work, outs[0], out as i64, units, 0, m), None)
        } else {
            let y = t.uniform(Buf::Work, 0, out as i64, (m * out) as i64, pre, m);
            pre += (m * out) as i64;
            (y, Some(t.table(Buf::Work, outs, units)))
        };
        let extra = match first.kind {
            PrimOp::Concat => {
                let mut off = 0i64;
                let views = args
                    .iter()
                    .map(|a| {
                        let v = t.uniform(y.buf, y.base + off, y.os, y.rs, y.shift_k, m);
                        off += a.numel as i64;
                        v
                    })
                    .collect();
                Extra::Concat(views)
            }
            PrimOp::Slice => {
                let x = args[0].view;
                let shape = &cell.values[first.args[0].0 as usize].shape;
                let inner: usize = shape[1..].iter().product();
                let entries = b
                    .ops
                    .iter()
                    .enumerate()
                    .map(|(j, &o)| {
                        let start = cell.ops[o].slice.map_or(0, |s| s.0);
                        x.base + j as i64 * x.os + (start * inner) as i64
                    })
                    .collect();
                let mut v = t.table(x.buf, entries, x.rs);
                v.shift_k = x.shift_k;
                Extra::Slice(v)
            }
            _ => Extra::None,
        };
        let rows0 = cell.values[first.args.first().map_or(first.out, |a| *a).0 as usize]
            .shape
            .first()
            .copied()
            .unwrap_or(1)
            .max(1);
        let out_values = b.ops.iter().map(|&o| cell.ops[o].out.0 as usize).collect();
        batches.push(GBatch {
            out_values,
            kind: first.kind,
            factor: first.factor.unwrap_or(1.0),
            m,
            out,
            args,
            y,
            store,
            extra,
            rows0,
        });
    }
    let fused = chains(&batches)
        .into_iter()
        .map(|f| {
            let code = t.push(f.code.iter().copied());
            let views = t.push(f.views.iter().copied());
            (f, code, views)
        })
        .collect();
    LaidOut {
        batches,
        tables: t.0,
        work_units: pre as usize,
        fused,
    }
}
