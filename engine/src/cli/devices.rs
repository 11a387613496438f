//! `engine devices`: what can run here, and why not.

use engine::device::{DeviceInfo, probe};
use serde::Serialize;

/// Arguments of `engine devices`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also run the CUDA self-test (kernels and cuBLAS against the CPU) when a
    /// GPU is available.
    #[arg(long)]
    check: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `engine devices --json` output.
#[derive(Serialize)]
struct Report {
    devices: Vec<DeviceInfo>,
    #[cfg(feature = "cuda")]
    self_test: Option<engine::device::cuda_self_test::SelfTestResult>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let devices = probe();
    #[cfg(feature = "cuda")]
    let self_test = if a.check && devices.iter().any(|d| d.name == "cuda:0" && d.available) {
        Some(engine::device::cuda_self_test::run(0))
    } else {
        None
    };
    let report = Report {
        devices,
        #[cfg(feature = "cuda")]
        self_test,
    };
    if a.json {
        return crate::cli::print_json(&report);
    }
    for d in &report.devices {
        let state = if d.available {
            "available"
        } else {
            "unavailable"
        };
        engine::outln!("{:<8} {:<12} {}", d.name, state, d.detail);
    }
    #[cfg(feature = "cuda")]
    if let Some(t) = &report.self_test {
        engine::outln!("self-test: {}", serde_json::to_string(t)?);
    }
    Ok(())
}
