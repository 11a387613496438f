//! The VPPS executor on a GPU (run on an H200: `docs/vpps.md`, "On a GPU").
//!
//! Opening it reads the device's SM count, register file and shared-memory
//! limits, plans the placement for them, generates the kernel for the model
//! and compiles it with NVRTC for the device's architecture, loads it, sets
//! its dynamic shared memory and checks that every virtual processor can be
//! resident at once (a persistent kernel with grid barriers deadlocks
//! otherwise). Each run compiles the mini-batch's script on the host,
//! uploads it with the pool (parameters, zeroed gradients), launches the
//! kernel once, cooperatively (one CTA per virtual processor), between two
//! CUDA events, and reads the pool back.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys::{CUdevice_attribute as A, CUevent_flags, CUfunction_attribute_enum as F};
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};

use super::error::VppsError;
use super::kernel;
use super::pipeline::{Batches, KernelInfo, Vpps, VppsOptions, VppsRun};
use super::placement::BLOCK;
use super::target::Target;
use crate::device::{CudaDevice, DeviceError};
use crate::error::ReplayError;
use crate::model::Model;
use crate::trace::Trace;

/// A model's kernel, compiled and loaded on a device.
pub(crate) struct VppsCuda {
    dev: Arc<CudaDevice>,
    vpps: Vpps,
    func: CudaFunction,
    smem_bytes: u32,
    /// What the driver made of the kernel, and what compiling it cost.
    pub(crate) kernel: KernelInfo,
    /// Device buffers kept between runs.
    bufs: std::sync::Mutex<Option<Buffers>>,
    /// The host buffer the script's words are written into for upload,
    /// kept between runs.
    words: std::sync::Mutex<Vec<u32>>,
}

/// A session's device memory: the pool, the script, the barrier counter.
struct Buffers {
    pool: CudaSlice<f32>,
    script: CudaSlice<u32>,
    bar: CudaSlice<u32>,
}

/// The kernel for `source` on `dev`, compiled by NVRTC and loaded once per
/// process and device: sessions of the same model at other batch sizes reuse
/// it (a sweep would otherwise compile the same kernel at every point).
fn compiled(
    dev: &Arc<CudaDevice>,
    source: &str,
    arch: &str,
) -> Result<(CudaFunction, bool), DeviceError> {
    // A function keeps its module loaded (it holds the module's `Arc`).
    type Entry = (usize, String, CudaFunction);
    static CACHE: std::sync::Mutex<Vec<Entry>> = std::sync::Mutex::new(Vec::new());
    let key = Arc::as_ptr(dev) as usize;
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, f)) = cache.iter().find(|(d, s, _)| *d == key && s == source) {
        return Ok((f.clone(), true));
    }
    // NVRTC takes the architecture as a static string: one per process and
    // device kind, so leaking it is bounded.
    let arch: &'static str = Box::leak(arch.to_string().into_boxed_str());
    let ptx = compile_ptx_with_opts(
        source,
        CompileOptions {
            arch: Some(arch),
            options: vec!["--std=c++17".into()],
            ..Default::default()
        },
    )
    .map_err(DeviceError::cuda)?;
    let module = dev.context().load_module(ptx).map_err(DeviceError::cuda)?;
    let func = module
        .load_function(kernel::ENTRY)
        .map_err(DeviceError::cuda)?;
    cache.push((key, source.to_string(), func.clone()));
    Ok((func, false))
}

/// One GPU run.
pub(crate) struct GpuRun {
    pub(crate) run: VppsRun,
    /// Host seconds compiling the script.
    pub(crate) script_s: f64,
    /// Host seconds uploading, launching, waiting and reading back.
    pub(crate) exec_s: f64,
    /// GPU seconds between the events around the kernel.
    pub(crate) device_s: f64,
}

impl VppsCuda {
    pub(crate) fn new(
        dev: Arc<CudaDevice>,
        model: &Model,
        opts: &VppsOptions,
    ) -> Result<VppsCuda, ReplayError> {
        let ctx = dev.context().clone();
        let attr = |a: A| -> Result<u32, DeviceError> {
            ctx.attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(DeviceError::cuda)
        };
        let (major, minor) = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let target = Target {
            name: dev.name().to_string(),
            sms: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            regs_per_sm: attr(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
            max_regs_per_thread: opts.target.max_regs_per_thread,
            smem_per_sm: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
            smem_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            smem_reserved_per_block: attr(A::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)?,
            arch: format!("compute_{major}{minor}"),
        };
        let vpps = Vpps::new(
            model,
            &VppsOptions {
                target: target.clone(),
                place: opts.place,
            },
        )?;
        let t = Instant::now();
        let (func, cached) = compiled(&dev, &vpps.kernel_source(), &target.arch)?;
        let compile_ms = t.elapsed().as_secs_f64() * 1e3;
        let fattr = |a: F| -> Result<u32, DeviceError> {
            func.get_attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(DeviceError::cuda)
        };
        let kernel = KernelInfo {
            regs_per_thread: fattr(F::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            local_bytes_per_thread: fattr(F::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            static_smem_bytes: fattr(F::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            compile_ms,
            cached,
        };
        let smem_bytes = (4 * kernel::smem_floats(vpps.plan())) as u32;
        func.set_attribute(
            F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem_bytes as i32,
        )
        .map_err(DeviceError::cuda)?;
        let per_sm = func
            .occupancy_max_active_blocks_per_multiprocessor(BLOCK, smem_bytes as usize, None)
            .map_err(DeviceError::cuda)?;
        if per_sm < vpps.plan().ctas_per_sm {
            return Err(VppsError::Occupancy {
                want: vpps.plan().ctas_per_sm,
                got: per_sm,
                smem: smem_bytes,
            }
            .into());
        }
        Ok(VppsCuda {
            dev,
            vpps,
            func,
            smem_bytes,
            kernel,
            bufs: std::sync::Mutex::new(None),
            words: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The prepared model (plan and lowered cells).
    pub(crate) fn vpps(&self) -> &Vpps {
        &self.vpps
    }

    /// Compiles and runs one mini-batch.
    ///
    /// The device buffers (pool, script, barrier counter) are kept between
    /// runs and grown when a mini-batch needs more. Only the parameters
    /// travel to the device (the rest of the pool is zeroed there), and only
    /// what [`Vpps::read_back`] reads comes back: the parameter gradients and
    /// the forward records, not the gradient records or the partial-sum
    /// ring (about half the pool).
    pub(crate) fn run(
        &self,
        trace: &Trace,
        model: &Model,
        batches: &Batches,
    ) -> Result<GpuRun, ReplayError> {
        let t = Instant::now();
        let c = self.vpps.compile(trace, model, batches)?;
        let mut words = self.words.lock().unwrap_or_else(|p| p.into_inner());
        c.script.to_words_into(&mut words);
        let params = self.vpps.initial_params(model, &c.pool);
        let script_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let s = self.dev.stream();
        let e = DeviceError::cuda;
        let mut guard = self.bufs.lock().unwrap_or_else(|p| p.into_inner());
        let total = c.pool.total;
        if guard
            .as_ref()
            .is_none_or(|b| b.pool.len() < total || b.script.len() < words.len())
        {
            // Drop the old buffers first: the device holds one set at a time.
            *guard = None;
            *guard = Some(Buffers {
                pool: s.alloc_zeros::<f32>(total).map_err(e)?,
                script: s.alloc_zeros::<u32>(words.len()).map_err(e)?,
                bar: s.alloc_zeros::<u32>(1).map_err(e)?,
            });
        }
        let bufs = guard.as_mut().expect("allocated above");
        s.memcpy_htod(&params, &mut bufs.pool.slice_mut(0..params.len()))
            .map_err(e)?;
        s.memset_zeros(&mut bufs.pool.slice_mut(params.len()..total))
            .map_err(e)?;
        s.memcpy_htod(&*words, &mut bufs.script.slice_mut(0..words.len()))
            .map_err(e)?;
        s.memset_zeros(&mut bufs.bar).map_err(e)?;
        let ev = || {
            self.dev
                .context()
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(DeviceError::cuda)
        };
        let (start, end) = (ev()?, ev()?);
        start.record(s).map_err(e)?;
        let cfg = LaunchConfig {
            grid_dim: (c.script.vps, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: self.smem_bytes,
        };
        let Buffers { pool, script, bar } = bufs;
        let mut b = s.launch_builder(&self.func);
        b.arg(&mut *pool).arg(&*script).arg(&mut *bar);
        // SAFETY: the kernel reads the script words it was given (a prefix
        // of `script`) and addresses the pool only through offsets the
        // compiler checked against the pool's length (`Pool::new`), which
        // `pool` holds at least; `bar` is one counter, zeroed; the occupancy
        // check in `new` makes every CTA co-resident.
        unsafe { b.launch_cooperative(cfg) }.map_err(e)?;
        end.record(s).map_err(e)?;
        let mut back = vec![0.0f32; c.pool.fwd + c.pool.grad_shift];
        s.memcpy_dtoh(&pool.slice(0..back.len()), &mut back)
            .map_err(e)?;
        s.synchronize().map_err(e)?;
        let device_s = f64::from(start.elapsed_ms(&end).map_err(e)?) / 1e3;
        let run = self.vpps.read_back(trace, model, &c, &back);
        self.vpps.recycle(c);
        Ok(GpuRun {
            run,
            script_s,
            exec_s: t.elapsed().as_secs_f64(),
            device_s,
        })
    }
}
