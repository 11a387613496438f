//! The CUDA device (cudarc): library checks, context, stream, cuBLAS and the
//! NVRTC-compiled kernels of [`KERNELS_CU`](super::KERNELS_CU).

use std::sync::Arc;
use std::time::Instant;

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys::cublasOperation_t};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg,
};
use serde::Serialize;

use super::KERNELS_CU;
use super::error::DeviceError;

/// An opened CUDA device with its stream, cuBLAS handle and kernels.
pub struct CudaDevice {
    name: String,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    _module: Arc<CudaModule>,
    unary: CudaFunction,
    binary: CudaFunction,
    gather: CudaFunction,
    scatter: CudaFunction,
    pub(crate) kernels: ReplayKernels,
    compile_ms: f64,
}

/// The table-view kernels of the replay engine (see `kernels_src`).
pub(crate) struct ReplayKernels {
    pub(crate) ew: CudaFunction,
    pub(crate) copy: CudaFunction,
    pub(crate) seg_sum: CudaFunction,
    pub(crate) lookup: CudaFunction,
    pub(crate) softmax: CudaFunction,
    pub(crate) fused: CudaFunction,
}

/// Result of [`CudaDevice::self_test`].
#[derive(Clone, Debug, Serialize)]
pub struct SelfTest {
    /// Device model.
    pub device: String,
    /// NVRTC compile time of the kernels, ms.
    pub compile_ms: f64,
    /// Largest error of the sigmoid kernel against the CPU.
    pub sigmoid_max_err: f64,
    /// Largest error of the multiply kernel (x · sigmoid(x)) against the CPU.
    pub mul_max_err: f64,
    /// Largest error of the row-gather kernel (exact copy expected: 0).
    pub gather_max_err: f64,
    /// Largest error of scattering the gathered rows back (exact: 0).
    pub scatter_max_err: f64,
    /// Largest relative error of cuBLAS x·Wᵀ against the CPU GEMM.
    pub gemm_max_rel_err: f64,
    /// Time of that GEMM (k 256, 512 × 512), µs, median of 20.
    pub gemm_us: f64,
}

impl CudaDevice {
    /// Opens device `ordinal`. Each library is checked before cudarc touches
    /// it (cudarc panics on a missing library): the error names the first one
    /// missing.
    pub fn open(ordinal: usize) -> Result<CudaDevice, DeviceError> {
        // SAFETY: these only try to dlopen the named libraries.
        let (driver, blas, nvrtc) = unsafe {
            (
                cudarc::driver::sys::is_culib_present(),
                cudarc::cublas::sys::is_culib_present(),
                cudarc::nvrtc::sys::is_culib_present(),
            )
        };
        if !driver {
            return Err(DeviceError::CudaUnavailable { lib: "libcuda" });
        }
        if !blas {
            return Err(DeviceError::CudaUnavailable { lib: "libcublas" });
        }
        if !nvrtc {
            return Err(DeviceError::CudaUnavailable { lib: "libnvrtc" });
        }
        let ctx = CudaContext::new(ordinal).map_err(DeviceError::cuda)?;
        // SAFETY: the engine uses one stream per device, so cudarc's per-slice
        // events (for ordering across streams) are pure overhead.
        unsafe { ctx.disable_event_tracking() };
        let name = ctx.name().map_err(DeviceError::cuda)?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(DeviceError::cuda)?;
        let t = Instant::now();
        let ptx = cudarc::nvrtc::compile_ptx(KERNELS_CU).map_err(DeviceError::cuda)?;
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let module = ctx.load_module(ptx).map_err(DeviceError::cuda)?;
        let unary = module
            .load_function("unary_f32")
            .map_err(DeviceError::cuda)?;
        let binary = module
            .load_function("binary_f32")
            .map_err(DeviceError::cuda)?;
        let gather = module
            .load_function("gather_rows_f32")
            .map_err(DeviceError::cuda)?;
        let scatter = module
            .load_function("scatter_rows_f32")
            .map_err(DeviceError::cuda)?;
        let f = |name: &str| module.load_function(name).map_err(DeviceError::cuda);
        let kernels = ReplayKernels {
            ew: f("ew_f32")?,
            copy: f("copy_f32")?,
            seg_sum: f("seg_sum_f32")?,
            lookup: f("lookup_f32")?,
            softmax: f("softmax_f32")?,
            fused: f("fused_ew_f32")?,
        };
        Ok(CudaDevice {
            name,
            ctx,
            stream,
            blas,
            _module: module,
            unary,
            binary,
            gather,
            scatter,
            kernels,
            compile_ms,
        })
    }

    /// The process-wide device `ordinal`, opened (and its kernels compiled)
    /// on first use and shared afterwards.
    pub fn shared(ordinal: usize) -> Result<Arc<CudaDevice>, DeviceError> {
        static OPENED: std::sync::Mutex<Vec<(usize, Arc<CudaDevice>)>> =
            std::sync::Mutex::new(Vec::new());
        let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, d)) = opened.iter().find(|(n, _)| *n == ordinal) {
            return Ok(d.clone());
        }
        let d = Arc::new(CudaDevice::open(ordinal)?);
        opened.push((ordinal, d.clone()));
        Ok(d)
    }

    /// Device model name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The device's one stream (every kernel of the engine runs on it, in order).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The cuBLAS handle (bound to [`stream`](Self::stream)).
    pub(crate) fn blas(&self) -> &CudaBlas {
        &self.blas
    }

    /// Runs each kernel once against the CPU: elementwise unary (sigmoid) and
    /// binary (mul), a multi-row gather and the scatter back, and a cuBLAS GEMM in the engine's row-major `x·Wᵀ`
    /// convention (as column-major `W(op T)·xᵀ`).
    pub fn self_test(&self) -> Result<SelfTest, DeviceError> {
        let s = &self.stream;
        let n = 1 << 16;
        let host: Vec<f32> = (0..n).map(|i| (i % 23) as f32 * 0.1 - 1.1).collect();
        let x = s.clone_htod(&host).map_err(DeviceError::cuda)?;
        let mut y = s.alloc_zeros::<f32>(n).map_err(DeviceError::cuda)?;
        let (op, len) = (0i32, n as i64);
        let mut b = s.launch_builder(&self.unary);
        b.arg(&op).arg(&x).arg(&mut y).arg(&len);
        // SAFETY: the kernel reads `len` floats of x and writes `len` of y, both that long.
        unsafe { b.launch(LaunchConfig::for_num_elems(n as u32)) }.map_err(DeviceError::cuda)?;
        let out = s.clone_dtoh(&y).map_err(DeviceError::cuda)?;
        let sigmoid_max_err = out
            .iter()
            .zip(&host)
            .map(|(o, h)| f64::from((o - 1.0 / (1.0 + (-h).exp())).abs()))
            .fold(0.0, f64::max);

        let mut z = s.alloc_zeros::<f32>(n).map_err(DeviceError::cuda)?;
        let mul = 2i32;
        let mut b = s.launch_builder(&self.binary);
        b.arg(&mul).arg(&x).arg(&y).arg(&mut z).arg(&len);
        // SAFETY: x, y and z all hold `len` floats.
        unsafe { b.launch(LaunchConfig::for_num_elems(n as u32)) }.map_err(DeviceError::cuda)?;
        let zh = s.clone_dtoh(&z).map_err(DeviceError::cuda)?;
        let mul_max_err = zh
            .iter()
            .zip(&host)
            .zip(&out)
            .map(|((z, h), o)| f64::from((z - h * o).abs()))
            .fold(0.0, f64::max);

        // Rows at distinct, non-overlapping offsets, so the scatter is invertible.
        let (rows, width) = (64usize, 128usize);
        let offsets: Vec<i64> = (0..rows)
            .map(|r| ((r * 7919) % (n - width)) as i64)
            .collect();
        let off_d = s.clone_htod(&offsets).map_err(DeviceError::cuda)?;
        let mut g = s
            .alloc_zeros::<f32>(rows * width)
            .map_err(DeviceError::cuda)?;
        let (ri, wi) = (rows as i32, width as i32);
        let mut b = s.launch_builder(&self.gather);
        b.arg(&x).arg(&off_d).arg(&mut g).arg(&ri).arg(&wi);
        // SAFETY: every offset + width stays inside x; g holds rows × width floats.
        unsafe { b.launch(LaunchConfig::for_num_elems((rows * width) as u32)) }
            .map_err(DeviceError::cuda)?;
        let gh = s.clone_dtoh(&g).map_err(DeviceError::cuda)?;
        let mut gather_max_err = 0.0f64;
        for r in 0..rows {
            for c in 0..width {
                let want = host[offsets[r] as usize + c];
                gather_max_err = gather_max_err.max(f64::from((gh[r * width + c] - want).abs()));
            }
        }

        let mut back = s.alloc_zeros::<f32>(n).map_err(DeviceError::cuda)?;
        let mut b = s.launch_builder(&self.scatter);
        b.arg(&g).arg(&off_d).arg(&mut back).arg(&ri).arg(&wi);
        // SAFETY: as for the gather, with source and destination swapped.
        unsafe { b.launch(LaunchConfig::for_num_elems((rows * width) as u32)) }
            .map_err(DeviceError::cuda)?;
        let bh = s.clone_dtoh(&back).map_err(DeviceError::cuda)?;
        let mut scatter_max_err = 0.0f64;
        for &o in &offsets {
            for c in 0..width {
                let i = o as usize + c;
                scatter_max_err = scatter_max_err.max(f64::from((bh[i] - host[i]).abs()));
            }
        }

        let (k, m, kk) = (256usize, 512usize, 512usize);
        let xh: Vec<f32> = (0..k * kk).map(|i| ((i * 7) % 13) as f32 * 0.01).collect();
        let wh: Vec<f32> = (0..m * kk).map(|i| ((i * 5) % 11) as f32 * 0.01).collect();
        let xd = s.clone_htod(&xh).map_err(DeviceError::cuda)?;
        let wd = s.clone_htod(&wh).map_err(DeviceError::cuda)?;
        let mut yd = s.alloc_zeros::<f32>(k * m).map_err(DeviceError::cuda)?;
        // Row-major Y[k×m] = X[k×kk]·Wᵀ is column-major Yᵀ(m×k) = W(opT)·Xᵀ.
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_T,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: m as i32,
            n: k as i32,
            k: kk as i32,
            alpha: 1.0f32,
            lda: kk as i32,
            ldb: kk as i32,
            beta: 0.0,
            ldc: m as i32,
        };
        let mut times = Vec::with_capacity(20);
        for _ in 0..20 {
            s.synchronize().map_err(DeviceError::cuda)?;
            let t = Instant::now();
            // SAFETY: the shapes and leading dimensions match the buffers above.
            unsafe { self.blas.gemm(cfg, &wd, &xd, &mut yd) }.map_err(DeviceError::cuda)?;
            s.synchronize().map_err(DeviceError::cuda)?;
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        times.sort_by(f64::total_cmp);
        let yh = s.clone_dtoh(&yd).map_err(DeviceError::cuda)?;
        let mut cpu = vec![0.0f32; k * m];
        {
            use crate::backend::cpu::gemm::{ASeg, COut, GemmScratch, Init, PackedB, gemm};
            let w = PackedB::new(m, kk, |i, p| wh[i * kk + p], None);
            let a = [ASeg::new(&xh, 0, kk, kk, k)];
            let threads = crate::backend::cpu::threads::Threads::new(1);
            let out = COut::new(&mut cpu, 0, m, k, m);
            gemm(
                &threads,
                k,
                &a,
                &w,
                out,
                Init::Overwrite,
                &mut GemmScratch::default(),
            );
        }
        let gemm_max_rel_err = yh
            .iter()
            .zip(&cpu)
            .map(|(g, c)| f64::from((g - c).abs() / c.abs().max(1e-3)))
            .fold(0.0, f64::max);
        Ok(SelfTest {
            device: self.name.clone(),
            compile_ms: self.compile_ms,
            sigmoid_max_err,
            mul_max_err,
            gather_max_err,
            scatter_max_err,
            gemm_max_rel_err,
            gemm_us: times[times.len() / 2],
        })
    }
}
