//! The CUDA replay backend: the same executors as the CPU (reference, Cavs,
//! any instance-level policy, ED-Batch with or without layouts, DyNet)
//! running their batches as kernels on one stream. Cell programs become table
//! views over a device work buffer (`program`), launched per batch (`exec`)
//! from the host's schedule loop with asynchronous uploads (`run`). Two
//! backends open on a CUDA device (`session`): `CudaBackend`, this replay,
//! and `VppsBackend`, VPPS's persistent kernel
//! ([`vpps`](crate::backend::vpps)). Built with the `cuda` feature; without
//! it, `off.rs` takes this module's place.

mod batch;
mod dynet;
mod exec;
mod fuse;
mod program;
mod run;
mod session;
mod staging;

pub use run::{CudaReplay, GpuRun};
pub(crate) use session::{CudaBackend, VppsBackend};
