//! The backends: where a [`Session`](crate::session::Session)'s batches run.
//!
//! A backend takes the device-neutral parts of the replay — the
//! [`Executor`](crate::executor::Executor), the [`Model`](crate::model::Model),
//! the cells' programs ([`incell`](crate::incell)), the node
//! [`Store`](crate::store::Store) and the schedule walker
//! ([`run`](crate::run)) every pass runs on — and prepares them for its
//! device: it compiles each role's program once, owns every buffer a run
//! needs, runs each batch the walker hands it as its kernels, and reports
//! the run's counters and time split ([`PassRun`](crate::run::PassRun)).
//!
//! - [`cpu`]: the host, with its own GEMM, SIMD maths and threads; every
//!   executor but VPPS, forward and backward.
//! - [`cuda`]: the forward executors as kernels on one CUDA stream, and the
//!   session's CUDA side, which also holds VPPS's kernel. Without the `cuda`
//!   feature, a stub of that side that cannot be made.
//! - [`vpps`]: one persistent kernel per mini-batch interpreting a compiled
//!   script (CUDA only), with a CPU emulator as its specification.
//!
//! The session picks one when it is opened, from the device it is given
//! ([`DeviceKind`](crate::device::DeviceKind)) and the executor: the CPU
//! backend on the CPU (VPPS there is a typed error), on CUDA the VPPS kernel
//! for the VPPS executor and the CUDA replay for the others.

pub mod cpu;
// Without the `cuda` feature, the stub alone: the session's code is the same
// in both builds (candle's stub-backend pattern).
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "cuda/off.rs"]
pub mod cuda;
pub mod vpps;
