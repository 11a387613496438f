//! Device memory the GPU executors share: pinned staging for a run's
//! per-batch uploads, device addresses, and the check that an upload fits.

use cudarc::driver::{CudaSlice, DevicePtr, PinnedHostSlice};

use crate::device::{CudaDevice, DeviceError};

/// Pinned host memory and a device buffer of the same length for a run's
/// per-batch uploads: each batch writes a fresh region and copies it up
/// asynchronously (regions are never reused within a run).
pub(super) struct Staging {
    host: PinnedHostSlice<i64>,
    dev: CudaSlice<i64>,
    dev_addr: u64,
}

impl Staging {
    pub(super) fn new(dev: &CudaDevice, len: usize) -> Result<Staging, DeviceError> {
        let len = len.max(1);
        // SAFETY: every region is written before it is copied up.
        let host = unsafe { dev.context().alloc_pinned::<i64>(len) }.map_err(DeviceError::cuda)?;
        let d = dev
            .stream()
            .alloc_zeros::<i64>(len)
            .map_err(DeviceError::cuda)?;
        let dev_addr = addr(&d, dev);
        Ok(Staging {
            host,
            dev: d,
            dev_addr,
        })
    }

    /// The host side (no copy from it is ever recorded, so this never waits).
    pub(super) fn host(&mut self) -> &mut [i64] {
        // Only fails if the (never recorded) event does; an empty slice then
        // makes the caller's bounds check report it.
        self.host.as_mut_slice().unwrap_or(&mut [])
    }

    /// Device address of entry `i`.
    pub(super) fn dev(&self, i: usize) -> u64 {
        debug_assert!(i <= self.dev.len());
        self.dev_addr + 8 * i as u64
    }

    /// Copies entries `from..to` up, asynchronously.
    pub(super) fn upload(
        &mut self,
        dev: &CudaDevice,
        from: usize,
        to: usize,
    ) -> Result<(), DeviceError> {
        let target = self.dev(from);
        let host = self.host();
        overflow(host, to.max(1) - 1)?;
        // SAFETY: the region lies inside both buffers (same length) and is
        // never written again in this run, so the asynchronous copy reads
        // settled data from pinned memory.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(
                target,
                &host[from..to],
                dev.stream().cu_stream(),
            )
        }
        .map_err(DeviceError::cuda)
    }
}

/// Device address of a slice (one stream, no event tracking).
pub(super) fn addr<T>(s: &CudaSlice<T>, dev: &CudaDevice) -> u64 {
    s.device_ptr(dev.stream()).0
}

/// An upload past the end of its staging buffer: the typed error, never a
/// write out of bounds.
pub(super) fn overflow(buf: &[i64], i: usize) -> Result<(), DeviceError> {
    if i < buf.len() {
        Ok(())
    } else {
        Err(DeviceError::Cuda(format!(
            "upload staging overflow at entry {i} of {} (a bug: the bound is computed from the trace)",
            buf.len()
        )))
    }
}
