//! Launches of the replay kernels on raw device addresses. The replay engine
//! keeps every node output in one device arena and every cell's variables in
//! another, and its operands overlap the buffers they are written to (a record
//! arena read and written by the same batch), which cudarc's borrow-checked
//! slices cannot express; these calls take addresses and the caller guarantees
//! the bounds.

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};

use super::cuda::CudaDevice;
use super::error::DeviceError;

/// A table view (see `kernels_src`): element `c` of op `j` of instance `r` is
/// at `ptr[shift + tab[j] + r·rs + c]` (floats), `tab` a device array of i64.
#[derive(Clone, Copy, Debug)]
pub struct TabView {
    /// Device address of the float buffer.
    pub ptr: u64,
    /// Device address of the per-op offsets.
    pub tab: u64,
    /// Instance stride (0: shared by all instances).
    pub rs: i64,
    /// Offset added to every element.
    pub shift: i64,
}

/// Elementwise operations of [`CudaDevice::ew`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum EwOp {
    /// 1 / (1 + e^-a)
    Sigmoid = 0,
    /// tanh a
    Tanh = 1,
    /// max(a, 0)
    Relu = 2,
    /// 1 - a
    OneMinus = 3,
    /// gelu a = a (1 + erf(a / √2)) / 2
    Gelu = 5,
    /// e^a
    Exp = 6,
    /// alpha · a
    Scale = 4,
    /// a + b
    Add = 10,
    /// a - b
    Sub = 11,
    /// a · b
    Mul = 12,
}

/// A grid-stride launch over `total` threads.
fn grid(total: usize) -> LaunchConfig {
    let blocks = total.div_ceil(256).clamp(1, 8192) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl CudaDevice {
    fn launch<'a>(
        &'a self,
        f: &'a CudaFunction,
        cfg: LaunchConfig,
        push: impl FnOnce(&mut cudarc::driver::LaunchArgs<'a>),
    ) -> Result<(), DeviceError> {
        let mut b = self.stream().launch_builder(f);
        push(&mut b);
        // SAFETY: the caller of each public method guarantees that every
        // address plus the offsets the kernel computes stays in its buffer.
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(DeviceError::cuda)
    }

    /// `y = op(a[, b])` over `k × m × len` elements.
    ///
    /// # Safety
    /// Every view must address `k` instances × `m` ops × `len` floats inside
    /// live buffers of this device.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn ew(
        &self,
        op: EwOp,
        alpha: f32,
        a: TabView,
        b: TabView,
        y: TabView,
        k: usize,
        m: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        let (op, k32, m32, l32) = (op as i32, k as i32, m as i32, len as i32);
        self.launch(&self.kernels.ew, grid(k * m * len), |l| {
            l.arg(&op).arg(&alpha);
            for v in [&a, &b, &y] {
                l.arg(&v.ptr).arg(&v.tab).arg(&v.rs).arg(&v.shift);
            }
            l.arg(&k32).arg(&m32).arg(&l32);
        })
    }

    /// `d (+)= s` over `k × m × len` elements.
    ///
    /// # Safety
    /// As for [`ew`](Self::ew).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn copy(
        &self,
        s: TabView,
        d: TabView,
        k: usize,
        m: usize,
        len: usize,
        accumulate: bool,
    ) -> Result<(), DeviceError> {
        let (k32, m32, l32, acc) = (k as i32, m as i32, len as i32, i32::from(accumulate));
        self.launch(&self.kernels.copy, grid(k * m * len), |l| {
            for v in [&s, &d] {
                l.arg(&v.ptr).arg(&v.tab).arg(&v.rs).arg(&v.shift);
            }
            l.arg(&k32).arg(&m32).arg(&l32).arg(&acc);
        })
    }

    /// Segment sums: `nseg` segments `(dst offset, len, first, end)` at
    /// `segs`, sources at `srcs`.
    ///
    /// # Safety
    /// The segment tables and every offset in them must be in bounds.
    pub unsafe fn seg_sum(
        &self,
        dst: u64,
        src: u64,
        segs: u64,
        nseg: usize,
        srcs: u64,
    ) -> Result<(), DeviceError> {
        if nseg == 0 {
            return Ok(());
        }
        let n = nseg as i32;
        let cfg = LaunchConfig {
            grid_dim: (nseg.min(65_535) as u32, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        self.launch(&self.kernels.seg_sum, cfg, |l| {
            l.arg(&dst).arg(&src).arg(&segs).arg(&n).arg(&srcs);
        })
    }

    /// `y[r, j] = table_j[idx[r] mod rows]` (rows of `len`).
    ///
    /// # Safety
    /// As for [`ew`](Self::ew); `idx` holds `k` i64.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn lookup(
        &self,
        table: TabView,
        rows: usize,
        idx: u64,
        y: TabView,
        k: usize,
        m: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        let (rows, k32, m32, l32) = (rows as i64, k as i32, m as i32, len as i32);
        self.launch(&self.kernels.lookup, grid(k * m * len), |l| {
            l.arg(&table.ptr)
                .arg(&table.tab)
                .arg(&table.shift)
                .arg(&rows)
                .arg(&idx);
            l.arg(&y.ptr).arg(&y.tab).arg(&y.rs).arg(&y.shift);
            l.arg(&k32).arg(&m32).arg(&l32);
        })
    }

    /// A fused elementwise chain: `n` instructions at `code`, views at
    /// `views` (see `kernels_src`), over `k × m × len` elements of `work`.
    ///
    /// # Safety
    /// The code and views must address the work buffer within bounds.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn fused(
        &self,
        work: u64,
        code: u64,
        n: usize,
        views: u64,
        k: usize,
        m: usize,
        len: usize,
    ) -> Result<(), DeviceError> {
        let (n32, k64, m32, l32) = (n as i32, k as i64, m as i32, len as i32);
        self.launch(&self.kernels.fused, grid(k * m * len), |l| {
            l.arg(&work).arg(&code).arg(&n32).arg(&views);
            l.arg(&k64).arg(&m32).arg(&l32);
        })
    }

    /// Per row of `n`: softmax, or (with `labels`) `-log softmax[label]`.
    ///
    /// # Safety
    /// As for [`ew`](Self::ew); `labels` (if any) holds `k` i64.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn softmax(
        &self,
        x: TabView,
        y: TabView,
        k: usize,
        m: usize,
        n: usize,
        labels: Option<u64>,
    ) -> Result<(), DeviceError> {
        let mode = i32::from(labels.is_some());
        unsafe { self.row_kernel(x, y, k, m, n, mode, labels.unwrap_or(0)) }
    }

    /// The per-row kernel `softmax_f32` in `mode` 0 (softmax), 1 (pick
    /// loss, `labels` a device array) or 2 (layer normalisation).
    ///
    /// # Safety
    /// As for [`ew`](Self::ew).
    #[allow(clippy::too_many_arguments)]
    unsafe fn row_kernel(
        &self,
        x: TabView,
        y: TabView,
        k: usize,
        m: usize,
        n: usize,
        mode: i32,
        labels: u64,
    ) -> Result<(), DeviceError> {
        let (k32, m32, n32) = (k as i32, m as i32, n as i32);
        self.launch(&self.kernels.softmax, grid(k * m), |l| {
            for v in [&x, &y] {
                l.arg(&v.ptr).arg(&v.tab).arg(&v.rs).arg(&v.shift);
            }
            l.arg(&k32).arg(&m32).arg(&n32).arg(&mode).arg(&labels);
        })
    }

    /// Per row of `n`: layer normalisation, `(x − μ) / √(σ² + 1e-5)` (the
    /// softmax kernel's third mode).
    ///
    /// # Safety
    /// As for [`ew`](Self::ew).
    pub unsafe fn layer_norm(
        &self,
        x: TabView,
        y: TabView,
        k: usize,
        m: usize,
        n: usize,
    ) -> Result<(), DeviceError> {
        unsafe { self.row_kernel(x, y, k, m, n, 2, 0) }
    }

    /// Row-major `Y[k×m] = beta·Y + X[k×n]·Wᵀ` (W `m×n`, row stride n), rows
    /// of X and Y strided by `ldx` / `ldy` floats: cuBLAS column-major
    /// `Yᵀ = W(op T)·Xᵀ`.
    ///
    /// # Safety
    /// The addresses and strides must stay inside live buffers.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm_xwt(
        &self,
        k: usize,
        m: usize,
        n: usize,
        x: u64,
        ldx: usize,
        w: u64,
        beta: f32,
        y: u64,
        ldy: usize,
    ) -> Result<(), DeviceError> {
        let (alpha, beta) = (1.0f32, beta);
        // SAFETY: forwarded from the caller.
        unsafe {
            cudarc::cublas::result::sgemm(
                *self.blas().handle(),
                cublasOperation_t::CUBLAS_OP_T,
                cublasOperation_t::CUBLAS_OP_N,
                m as i32,
                k as i32,
                n as i32,
                &alpha,
                w as *const f32,
                n as i32,
                x as *const f32,
                ldx as i32,
                &beta,
                y as *mut f32,
                ldy as i32,
            )
        }
        .map_err(DeviceError::cuda)
    }

    /// For each of `count` instances `r`: row-major
    /// `C_r[mm×p] = beta·C_r + A_r[mm×nn]·B_r[nn×p]`, with `A_r = a + r·sa`
    /// (likewise b, c; stride 0 shares a matrix): one strided-batched GEMM
    /// (per-instance matrices, MV-RNN).
    ///
    /// # Safety
    /// As for [`gemm_xwt`](Self::gemm_xwt).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn gemm_per_instance(
        &self,
        count: usize,
        (mm, nn, p): (usize, usize, usize),
        (a, sa): (u64, i64),
        (b, sb): (u64, i64),
        beta: f32,
        (c, sc): (u64, i64),
    ) -> Result<(), DeviceError> {
        let alpha = 1.0f32;
        // Column-major: C_rᵀ (p×mm) = B_rᵀ (p×nn) · A_rᵀ (nn×mm).
        // SAFETY: forwarded from the caller.
        unsafe {
            cudarc::cublas::result::sgemm_strided_batched(
                *self.blas().handle(),
                cublasOperation_t::CUBLAS_OP_N,
                cublasOperation_t::CUBLAS_OP_N,
                p as i32,
                mm as i32,
                nn as i32,
                &alpha,
                b as *const f32,
                p as i32,
                sb,
                a as *const f32,
                nn as i32,
                sa,
                &beta,
                c as *mut f32,
                p as i32,
                sc,
                count as i32,
            )
        }
        .map_err(DeviceError::cuda)
    }
}
