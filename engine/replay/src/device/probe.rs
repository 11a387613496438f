//! What devices this machine and build have ([`probe`], for `engine
//! devices`), and whether one can be opened ([`check_available`], for
//! commands that take `--device`).

use serde::Serialize;

#[cfg(feature = "cuda")]
use super::cuda::CudaDevice;
use super::error::DeviceError;
use super::kind::DeviceKind;

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
