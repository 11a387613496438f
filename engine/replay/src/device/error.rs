//! Why a device cannot be used ([`DeviceError`]): CUDA missing on the
//! machine or in the build, a failed CUDA call, an unknown device name.

use thiserror::Error;

/// Why a device cannot be used.
#[derive(Debug, Error)]
pub enum DeviceError {
    /// A CUDA library is missing on this machine.
    #[error("CUDA unavailable: {lib} not found")]
    CudaUnavailable {
        /// The missing library (libcuda, libcublas, libnvrtc).
        lib: &'static str,
    },
    /// This build has no CUDA backend.
    #[error("CUDA unavailable: this build has no CUDA backend (rebuild with the `cuda` feature)")]
    NotBuilt,
    /// A CUDA call failed.
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// An unknown device name.
    #[error("unknown device {0:?}: expected `cpu` or `cuda` (or `cuda:N`)")]
    Unknown(String),
}

#[cfg(feature = "cuda")]
impl DeviceError {
    /// A failed CUDA call (driver, NVRTC or cuBLAS), with the call's error.
    pub(crate) fn cuda(e: impl std::fmt::Debug) -> DeviceError {
        DeviceError::Cuda(format!("{e:?}"))
    }
}
