//! Devices: the CPU always, CUDA when the `cuda` feature is built and the
//! machine has the libraries and a GPU. As in candle, the `Cuda` variant always
//! exists in the types; opening it on a machine without CUDA is a typed
//! [`DeviceError::CudaUnavailable`] naming the missing library — never a panic
//! and never a silent fall back to the CPU.
//!
//! The seam under every backend: what a `--device` name selects
//! ([`DeviceKind`], `kind`), what this machine has ([`probe`],
//! [`check_available`], `probe`) and why a device cannot be used
//! ([`DeviceError`], `error`); with the `cuda` feature, the CUDA context the
//! CUDA and VPPS backends share (`CudaDevice` in `cuda`: cudarc's driver,
//! cuBLAS and the replay's kernels [`KERNELS_CU`], compiled by NVRTC),
//! launches of those kernels (`launch`) and `engine devices --check`'s
//! self-test (`cuda_self_test`).

#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "cuda")]
pub mod cuda_self_test;
mod error;
mod kernels_src;
mod kind;
#[cfg(feature = "cuda")]
mod launch;
mod probe;

#[cfg(feature = "cuda")]
pub use cuda::CudaDevice;
pub use error::DeviceError;
pub use kernels_src::KERNELS_CU;
pub use kind::DeviceKind;
#[cfg(feature = "cuda")]
pub use launch::{EwOp, TabView};
pub use probe::{DeviceInfo, check_available, probe};
