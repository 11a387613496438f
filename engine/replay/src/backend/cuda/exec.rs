//! Launches one cell program over `k` instances whose records are in the work
//! buffer: per in-cell batch, the gathers of its non-consecutive operands, the
//! batched kernel (cuBLAS for products, table-view kernels for the rest), and
//! the copy of a result that is not consecutive in the records. The kernel of
//! one batched op is launched from resolved views ([`LaunchOp`]), which the
//! op-level DyNet executor builds directly.

use super::batch::{Buf, Extra, GBatch, GView};
use super::program::GpuProgram;
use super::staging::addr;
use crate::cells::PrimOp;
use crate::device::{CudaDevice, DeviceError, EwOp, TabView};
use crate::incell::InCellCounts;

/// A view resolved for one launch: the kernels' table view, and for GEMM
/// operands the address of op 0's instance 0 with the op stride (floats).
#[derive(Clone, Copy, Debug)]
pub(super) struct LaunchView {
    pub tv: TabView,
    pub addr: u64,
    pub os: i64,
}

impl LaunchView {
    fn at(&self, j: usize) -> u64 {
        self.addr + 4 * (j as i64 * self.os) as u64
    }
}

/// One operand of a resolved op.
pub(super) struct LaunchArg<'a> {
    pub v: LaunchView,
    pub per_row: bool,
    pub numel: usize,
    pub shape: &'a [usize],
}

/// Kind-specific resolved views (see `program::Extra`).
pub(super) enum LaunchExtra {
    None,
    Concat(Vec<LaunchView>),
    Slice(LaunchView),
}

/// A batched op ready to launch: `m` ops of one kind over `k` instances.
pub(super) struct LaunchOp<'a> {
    pub kind: PrimOp,
    /// `scale`'s factor (1 for other ops).
    pub factor: f32,
    pub k: usize,
    pub m: usize,
    pub out: usize,
    pub args: Vec<LaunchArg<'a>>,
    pub y: LaunchView,
    pub extra: LaunchExtra,
    pub rows0: usize,
}

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

    fn resolve(&self, v: &GView) -> LaunchView {
        let floats = v.shift_k * self.k + v.base;
        LaunchView {
            tv: self.view(v),
            addr: self.buf(v.buf) + 4 * floats as u64,
            os: v.os,
        }
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
    let mut chains = prog.fused.iter().peekable();
    let mut i = 0;
    while i < prog.batches.len() {
        if let Some((f, code, views)) = chains.next_if(|(f, ..)| f.first == i) {
            let n = f.code.len() / 5;
            // SAFETY: the chain's views are record views of its batches, inside
            // the work buffer of k instances; code and views are in `tables`.
            unsafe {
                dev.fused(
                    work,
                    p.tables + 8 * *code as u64,
                    n,
                    p.tables + 8 * *views as u64,
                    k,
                    f.m,
                    f.len,
                )?;
            }
            c.kernels += 1;
            i = f.end;
            continue;
        }
        // SAFETY: every view was laid out by `program::build` inside a record
        // or temporary of k instances (the work buffer holds k·work_units) or
        // inside the parameters; the tables hold m entries per view.
        unsafe { run_batch(dev, &p, &prog.batches[i], k, idx, labels, &mut c)? };
        i += 1;
    }
    Ok(c)
}

unsafe fn run_batch(
    dev: &CudaDevice,
    p: &Ptrs,
    b: &GBatch,
    k: usize,
    idx: u64,
    labels: u64,
    c: &mut InCellCounts,
) -> Result<(), DeviceError> {
    let m = b.m;
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
        let op = LaunchOp {
            kind: b.kind,
            factor: b.factor,
            k,
            m,
            out: b.out,
            args: b
                .args
                .iter()
                .map(|a| LaunchArg {
                    v: p.resolve(&a.view),
                    per_row: a.per_row,
                    numel: a.numel,
                    shape: &a.shape,
                })
                .collect(),
            y: p.resolve(&b.y),
            extra: match &b.extra {
                Extra::None => LaunchExtra::None,
                Extra::Concat(places) => {
                    LaunchExtra::Concat(places.iter().map(|v| p.resolve(v)).collect())
                }
                Extra::Slice(x) => LaunchExtra::Slice(p.resolve(x)),
            },
            rows0: b.rows0,
        };
        c.kernels += launch_op(dev, &op, idx, labels)?;
        if let Some(st) = &b.store {
            dev.copy(op.y.tv, p.view(st), k, m, b.out, false)?;
            c.copy_kernels += 1;
            c.copy_bytes += (k * m * b.out * 4) as u64;
        }
    }
    Ok(())
}

/// Launches the kernels of one batched op; returns how many.
///
/// # Safety
/// Every view must address `k × m` blocks of its operand inside live buffers.
pub(super) unsafe fn launch_op(
    dev: &CudaDevice,
    op: &LaunchOp,
    idx: u64,
    labels: u64,
) -> Result<u64, DeviceError> {
    let (k, m, out) = (op.k, op.m, op.out);
    let y = op.y.tv;
    let arg = |i: usize| op.args[i].v.tv;
    // SAFETY (whole body): forwarded from the caller.
    unsafe {
        let ew = |f: EwOp| {
            let other = if op.args.len() > 1 { arg(1) } else { arg(0) };
            dev.ew(f, 1.0, arg(0), other, y, k, m, out).map(|()| 1)
        };
        Ok(match op.kind {
            PrimOp::Affine => {
                dev.copy(arg(0), y, k, m, out, false)?;
                let mut n = 1;
                for wi in (1..op.args.len()).step_by(2) {
                    n += product(dev, op, wi, wi + 1, 1.0)?;
                }
                n
            }
            PrimOp::Matmul => product(dev, op, 0, 1, 0.0)?,
            PrimOp::Sigmoid => ew(EwOp::Sigmoid)?,
            PrimOp::Tanh => ew(EwOp::Tanh)?,
            PrimOp::Relu => ew(EwOp::Relu)?,
            PrimOp::Gelu => ew(EwOp::Gelu)?,
            PrimOp::Exp => ew(EwOp::Exp)?,
            PrimOp::Scale => dev
                .ew(EwOp::Scale, op.factor, arg(0), arg(0), y, k, m, out)
                .map(|()| 1)?,
            PrimOp::OneMinus => ew(EwOp::OneMinus)?,
            PrimOp::Add => ew(EwOp::Add)?,
            PrimOp::Sub => ew(EwOp::Sub)?,
            PrimOp::Mul => ew(EwOp::Mul)?,
            PrimOp::Sum | PrimOp::Mean => {
                dev.copy(arg(0), y, k, m, out, false)?;
                for i in 1..op.args.len() {
                    dev.ew(EwOp::Add, 1.0, y, arg(i), y, k, m, out)?;
                }
                if op.kind == PrimOp::Mean {
                    let s = 1.0 / op.args.len() as f32;
                    dev.ew(EwOp::Scale, s, y, y, y, k, m, out)?;
                }
                op.args.len() as u64 + u64::from(op.kind == PrimOp::Mean)
            }
            PrimOp::Concat => {
                let LaunchExtra::Concat(places) = &op.extra else {
                    unreachable!("concat ops are resolved with their places")
                };
                for (i, place) in places.iter().enumerate() {
                    dev.copy(arg(i), place.tv, k, m, op.args[i].numel, false)?;
                }
                places.len() as u64
            }
            PrimOp::Slice => {
                let LaunchExtra::Slice(x) = &op.extra else {
                    unreachable!("slice ops are resolved with their source")
                };
                dev.copy(x.tv, y, k, m, out, false)?;
                1
            }
            PrimOp::Lookup => dev
                .lookup(arg(0), op.rows0, idx, y, k, m, out)
                .map(|()| 1)?,
            PrimOp::Softmax => dev
                .softmax(arg(0), y, k, m, op.args[0].numel, None)
                .map(|()| 1)?,
            PrimOp::LayerNorm => dev
                .layer_norm(arg(0), y, k, m, op.args[0].numel)
                .map(|()| 1)?,
            PrimOp::PickLoss => dev
                .softmax(arg(0), y, k, m, op.args[0].numel, Some(labels))
                .map(|()| 1)?,
        })
    }
}

/// `y (beta=1: +)= w · x` for operands `wi`, `xi`; returns the GEMM calls made.
unsafe fn product(
    dev: &CudaDevice,
    op: &LaunchOp,
    wi: usize,
    xi: usize,
    beta: f32,
) -> Result<u64, DeviceError> {
    let (w, x) = (&op.args[wi], &op.args[xi]);
    let (k, m, out, n) = (op.k, op.m, op.out, x.numel);
    let (rows, cols) = (w.shape[0], w.shape.get(1).copied().unwrap_or(1).max(1));
    let pp = n / cols;
    let (wv, xv, yv) = (&w.v, &x.v, &op.y);
    let (ldx, ldy) = (xv.tv.rs as usize, yv.tv.rs as usize);
    // SAFETY (whole body): forwarded from the caller.
    unsafe {
        if !w.per_row && x.per_row && pp == 1 {
            if xv.os == 0 && wv.os == w.numel as i64 {
                // One input for every op and stacked weights: one GEMM.
                dev.gemm_xwt(k, m * out, n, xv.at(0), ldx, wv.at(0), beta, yv.at(0), ldy)?;
                return Ok(1);
            }
            for j in 0..m {
                dev.gemm_xwt(k, out, n, xv.at(j), ldx, wv.at(j), beta, yv.at(j), ldy)?;
            }
        } else {
            // Per-instance matrices (MV-RNN): one strided-batched GEMM per op.
            for j in 0..m {
                dev.gemm_per_instance(
                    k,
                    (rows, cols, pp),
                    (wv.at(j), wv.tv.rs),
                    (xv.at(j), xv.tv.rs),
                    beta,
                    (yv.at(j), yv.tv.rs),
                )?;
            }
        }
    }
    Ok(m as u64)
}
