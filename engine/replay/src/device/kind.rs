//! Which device a name selects ([`DeviceKind`]: `cpu`, `cuda`, `cuda:N`).

use super::error::DeviceError;

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
}
