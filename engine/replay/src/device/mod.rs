//! Devices: the CPU always, CUDA when the `cuda` feature is built and the
//! machine has the libraries and a GPU. As in candle, the `Cuda` variant always
//! exists in the types; opening it on a machine without CUDA is a typed
//! [`DeviceError::CudaUnavailable`] naming the missing library — never a panic
//! and never a silent fall back to the CPU.

#[cfg(feature = "cuda")]
mod cuda;
mod kernels_src;
#[cfg(feature = "cuda")]
mod launch;

use serde::Serialize;
use thiserror::Error;

#[cfg(feature = "cuda")]
pub use cuda::CudaDevice;
pub use kernels_src::KERNELS_CU;
#[cfg(feature = "cuda")]
pub use launch::{EwOp, TabView};

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

/// Which device a name selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// The host CPU.
    Cpu,
    /// CUDA device with this ordinal.
    Cuda(usize),
}

impl DeviceKind {
    /// Parses `cpu`, `cuda` or `cuda:N`.
    pub fn parse(s: &str) -> Result<DeviceKind, DeviceError> {
        match s {
            "cpu" => Ok(DeviceKind::Cpu),
            "cuda" => Ok(DeviceKind::Cuda(0)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceKind::Cuda)
                .ok_or_else(|| DeviceError::Unknown(other.to_string())),
        }
    }
}

/// What `engine devices` reports for one device.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    /// `cpu` or `cuda:N`.
    pub name: String,
    /// Usable now?
    pub available: bool,
    /// Model name when available (`NVIDIA H100 80GB HBM3`), or why not.
    pub detail: String,
}

/// The CPU and, if this build has the CUDA backend, CUDA device 0 with its
/// status.
pub fn probe() -> Vec<DeviceInfo> {
    let cpu = DeviceInfo {
        name: "cpu".into(),
        available: true,
        detail: format!(
            "{} logical cores",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
    };
    vec![cpu, probe_cuda()]
}

#[cfg(feature = "cuda")]
fn probe_cuda() -> DeviceInfo {
    match CudaDevice::open(0) {
        Ok(d) => DeviceInfo {
            name: "cuda:0".into(),
            available: true,
            detail: d.name().to_string(),
        },
        Err(e) => DeviceInfo {
            name: "cuda:0".into(),
            available: false,
            detail: e.to_string(),
        },
    }
}

#[cfg(not(feature = "cuda"))]
fn probe_cuda() -> DeviceInfo {
    DeviceInfo {
        name: "cuda:0".into(),
        available: false,
        detail: DeviceError::NotBuilt.to_string(),
    }
}

/// Checks that `kind` can be opened (for commands that take `--device`).
pub fn check_available(kind: DeviceKind) -> Result<(), DeviceError> {
    match kind {
        DeviceKind::Cpu => Ok(()),
        #[cfg(feature = "cuda")]
        DeviceKind::Cuda(n) => CudaDevice::open(n).map(|_| ()),
        #[cfg(not(feature = "cuda"))]
        DeviceKind::Cuda(_) => Err(DeviceError::NotBuilt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_parse() {
        assert_eq!(DeviceKind::parse("cpu").unwrap(), DeviceKind::Cpu);
        assert_eq!(DeviceKind::parse("cuda").unwrap(), DeviceKind::Cuda(0));
        assert_eq!(DeviceKind::parse("cuda:3").unwrap(), DeviceKind::Cuda(3));
        let e = DeviceKind::parse("tpu").unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown device \"tpu\": expected `cpu` or `cuda` (or `cuda:N`)"
        );
    }

    /// On a machine without CUDA (CI) opening it is a typed error naming the
    /// library; on a machine with it, the probe reports a usable device.
    #[test]
    fn cuda_is_usable_or_a_typed_error() {
        let info = probe();
        assert_eq!(info[0].name, "cpu");
        assert!(info[0].available);
        match check_available(DeviceKind::Cuda(0)) {
            Ok(()) => assert!(info[1].available, "{info:?}"),
            Err(e) => {
                assert!(!info[1].available);
                assert!(e.to_string().starts_with("CUDA unavailable: "), "{e}");
                assert_eq!(info[1].detail, e.to_string());
            }
        }
    }
}

/// The CUDA self-test as a serialisable outcome (for `engine devices --check`).
#[cfg(feature = "cuda")]
pub mod cuda_self_test {
    use serde::Serialize;

    /// The test's numbers, or why it could not run.
    #[derive(Clone, Debug, Serialize)]
    #[serde(untagged)]
    pub enum SelfTestResult {
        /// It ran.
        Ran(super::cuda::SelfTest),
        /// It could not run.
        Failed {
            /// Why.
            error: String,
        },
    }

    /// Opens device `ordinal` and runs [`CudaDevice::self_test`](super::CudaDevice::self_test).
    pub fn run(ordinal: usize) -> SelfTestResult {
        match super::CudaDevice::open(ordinal).and_then(|d| d.self_test()) {
            Ok(t) => SelfTestResult::Ran(t),
            Err(e) => SelfTestResult::Failed {
                error: e.to_string(),
            },
        }
    }
}
