//! The CUDA self-test as a serialisable outcome (for `engine devices --check`).

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
