//! The CUDA replay backend: the same executors as the CPU (reference, Cavs,
//! any instance-level policy, ED-Batch with or without layouts) running their
//! batches as kernels on one stream. Cell programs become table views over a
//! device work buffer (`program`), launched per batch (`exec`) from the
//! host's schedule loop with asynchronous uploads (`run`).

mod batch;
mod dynet;
mod exec;
mod fuse;
mod program;
mod run;
mod staging;

pub use run::{CudaReplay, GpuRun};
