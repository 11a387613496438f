//! Launches one cell program over `k` instances whose records are in the work
//! buffer: per in-cell batch, the gathers of its non-consecutive operands, the
//! batched kernel (cuBLAS for products, table-view kernels for the rest), and
//! the copy of a result that is not consecutive in the records.

use super::program::{Buf, Extra, GBatch, GView, GpuProgram};
use super::run::addr;
use crate::cells::PrimOp;
use crate::device::{CudaDevice, DeviceError, EwOp, TabView};
use crate::replay::incell::InCellCounts;

struct Ptrs {
    work: u64,
    params: u64,
    tables: u64,
    k: i64,
}

impl Ptrs {
    fn buf(&self, b: Buf) -> u64 {
        match b {
            Buf::Work => self.work,
            Buf::Params => self.params,
        }
    }

    fn view(&self, v: &GView) -> TabView {
        TabView {
            ptr: self.buf(v.buf),
            tab: self.tables + 8 * v.tab as u64,
            rs: v.rs,
            shift: v.shift_k * self.k,
        }
    }

    /// Address of op `j`'s data of instance 0 in a uniform view.
    fn at(&self, v: &GView, j: usize) -> u64 {
        let floats = v.shift_k * self.k + v.base + j as i64 * v.os;
        self.buf(v.buf) + 4 * floats as u64
    }
}

/// Runs every in-cell batch of `prog` over `k` instances; `idx` and `labels`
/// are device arrays of the instances' lookup rows and labels.
pub(super) fn run_program(
    dev: &CudaDevice,
    prog: &GpuProgram,
    k: usize,
    work: u64,
    idx: u64,
    labels: u64,
) -> Result<InCellCounts, DeviceError> {
    let p = Ptrs {
        work,
        params: addr(&prog.params, dev),
        tables: addr(&prog.tables, dev),
        k: k as i64,
    };
    let mut c = InCellCounts::default();
    for b in &prog.batches {
        // SAFETY: every view was laid out by `program::build` inside a record
        // or temporary of k instances (the work buffer holds k·work_units) or
        // inside the parameters; the tables hold m entries per view.
        unsafe { run_batch(dev, &p, b, k, idx, labels, &mut c)? };
    }
    Ok(c)
}

#[allow(clippy::too_many_arguments)]
unsafe fn run_batch(
    dev: &CudaDevice,
    p: &Ptrs,
    b: &GBatch,
    k: usize,
    idx: u64,
    labels: u64,
    c: &mut InCellCounts,
) -> Result<(), DeviceError> {
    let (m, out) = (b.m, b.out);
    let y = p.view(&b.y);
    // SAFETY (whole body): see `run_program`.
    unsafe {
        for a in &b.args {
            if let Some(src) = &a.gather {
                let rows = if a.per_row { k } else { 1 };
                dev.copy(p.view(src), p.view(&a.view), rows, m, a.numel, false)?;
                c.copy_kernels += 1;
                c.copy_bytes += (rows * m * a.numel * 4) as u64;
            }
        }
        let arg = |i: usize| p.view(&b.args[i].view);
        let ew = |op: EwOp| {
            let other = if b.args.len() > 1 { arg(1) } else { arg(0) };
            dev.ew(op, 1.0, arg(0), other, y, k, m, out).map(|()| 1)
        };
        // Launches of the batched op itself.
        let launches: u64 = match b.kind {
            PrimOp::Affine => {
                dev.copy(arg(0), y, k, m, out, false)?;
                let mut n = 1;
                for wi in (1..b.args.len()).step_by(2) {
                    n += product(dev, p, b, wi, wi + 1, 1.0, k)?;
                }
                n
            }
            PrimOp::Matmul => product(dev, p, b, 0, 1, 0.0, k)?,
            PrimOp::Sigmoid => ew(EwOp::Sigmoid)?,
            PrimOp::Tanh => ew(EwOp::Tanh)?,
            PrimOp::Relu => ew(EwOp::Relu)?,
            PrimOp::OneMinus => ew(EwOp::OneMinus)?,
            PrimOp::Add => ew(EwOp::Add)?,
            PrimOp::Sub => ew(EwOp::Sub)?,
            PrimOp::Mul => ew(EwOp::Mul)?,
            PrimOp::Sum | PrimOp::Mean => {
                dev.copy(arg(0), y, k, m, out, false)?;
                for i in 1..b.args.len() {
                    dev.ew(EwOp::Add, 1.0, y, arg(i), y, k, m, out)?;
                }
                if b.kind == PrimOp::Mean {
                    let s = 1.0 / b.args.len() as f32;
                    dev.ew(EwOp::Scale, s, y, y, y, k, m, out)?;
                }
                b.args.len() as u64 + u64::from(b.kind == PrimOp::Mean)
            }
            PrimOp::Concat => {
                let Extra::Concat(places) = &b.extra else {
                    unreachable!("concat batches are built with their places")
                };
                for (i, place) in places.iter().enumerate() {
                    dev.copy(arg(i), p.view(place), k, m, b.args[i].numel, false)?;
                }
                places.len() as u64
            }
            PrimOp::Slice => {
                let Extra::Slice(x) = &b.extra else {
                    unreachable!("slice batches are built with their source")
                };
                dev.copy(p.view(x), y, k, m, out, false)?;
                1
            }
            PrimOp::Lookup => dev.lookup(arg(0), b.rows0, idx, y, k, m, out).map(|()| 1)?,
            PrimOp::Softmax => dev
                .softmax(arg(0), y, k, m, b.args[0].numel, None)
                .map(|()| 1)?,
            PrimOp::PickLoss => dev
                .softmax(arg(0), y, k, m, b.args[0].numel, Some(labels))
                .map(|()| 1)?,
        };
        c.kernels += launches;
        if let Some(st) = &b.store {
            dev.copy(y, p.view(st), k, m, out, false)?;
            c.copy_kernels += 1;
            c.copy_bytes += (k * m * out * 4) as u64;
        }
    }
    Ok(())
}

/// `y (beta=1: +)= w · x` for operands `wi`, `xi` of the batch; returns the
/// GEMM calls made.
unsafe fn product(
    dev: &CudaDevice,
    p: &Ptrs,
    b: &GBatch,
    wi: usize,
    xi: usize,
    beta: f32,
    k: usize,
) -> Result<u64, DeviceError> {
    let (w, x) = (&b.args[wi], &b.args[xi]);
    let (m, out, n) = (b.m, b.out, x.numel);
    let (rows, cols) = (w.shape[0], w.shape.get(1).copied().unwrap_or(1).max(1));
    let pp = n / cols;
    let (wv, xv, yv) = (&w.view, &x.view, &b.y);
    // SAFETY (whole body): see `run_program`.
    unsafe {
        if !w.per_row && x.per_row && pp == 1 {
            if xv.os == 0 && wv.os == w.numel as i64 {
                // One input for every op and stacked weights: one GEMM.
                let (xa, wa, ya) = (p.at(xv, 0), p.at(wv, 0), p.at(yv, 0));
                dev.gemm_xwt(
                    k,
                    m * out,
                    n,
                    xa,
                    xv.rs as usize,
                    wa,
                    beta,
                    ya,
                    yv.rs as usize,
                )?;
                return Ok(1);
            }
            for j in 0..m {
                let (xa, wa, ya) = (p.at(xv, j), p.at(wv, j), p.at(yv, j));
                dev.gemm_xwt(k, out, n, xa, xv.rs as usize, wa, beta, ya, yv.rs as usize)?;
            }
        } else {
            // Per-instance matrices (MV-RNN): one strided-batched GEMM per op.
            for j in 0..m {
                dev.gemm_per_instance(
                    k,
                    (rows, cols, pp),
                    (p.at(wv, j), wv.rs),
                    (p.at(xv, j), xv.rs),
                    beta,
                    (p.at(yv, j), yv.rs),
                )?;
            }
        }
    }
    Ok(m as u64)
}
