//! The backends: where a [`Session`](crate::session::Session)'s batches run,
//! side by side behind one small trait (candle's and burn's pattern).
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
//! What a backend must do is the crate-internal trait `Backend` (`base.rs`,
//! re-exported here): `open` (prepare an executor for the session's trace,
//! model and cells, the `Work`), `forward` (one forward pass), `train` (a
//! training step: forward, then backward in a
//! [`BackwardSchedule`](crate::run::BackwardSchedule) order), and the
//! read-back of the last run (`outputs`, `into_outputs`, `gradients`). What
//! only one backend has — the CPU backend itself (`cpu`, `cpu_mut`), VPPS's
//! placement and kernel (`vpps_plan`) — are accessors that answer `None`
//! unless a backend has it. The session holds its backend as one
//! `Box<dyn Backend>` and calls these; it names a backend's type only to
//! open it. Each backend's `session.rs` implements the trait.
//!
//! - [`cpu`]: the host, with its own GEMM, SIMD maths and threads; every
//!   executor but VPPS, forward and backward.
//! - [`cuda`]: two backends on one CUDA stream: the forward executors'
//!   replay as kernels, and VPPS's persistent kernel (forward and
//!   backward). Without the `cuda` feature, a stub in their place that
//!   cannot be made.
//! - [`vpps`]: one persistent kernel per mini-batch interpreting a compiled
//!   script (CUDA only, opened through [`cuda`]), with a CPU emulator as its
//!   specification.
//!
//! The session picks one when it is opened, from the device it is given
//! ([`DeviceKind`](crate::device::DeviceKind)) and the executor: the CPU
//! backend on the CPU (which refuses VPPS with a typed error), on CUDA the
//! VPPS kernel for the VPPS executor and the CUDA replay for the others.
//!
//! Why the trait is at the session's level and not the batch's: each
//! backend drives [`run`](crate::run)'s walker itself, with state that
//! lives for one pass (the CPU's thread team and its idle hook, the CUDA
//! replay's staging cursor, DyNet's op-level arena), and VPPS runs no
//! batch on its own (one kernel for the whole mini-batch); a per-batch
//! method would have to carry that state through the trait object.

mod base;
pub mod cpu;
// Without the `cuda` feature, the stub alone: the session's code is the same
// in both builds (candle's stub-backend pattern).
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "cuda/off.rs"]
pub mod cuda;
pub mod vpps;

pub(crate) use base::{Backend, Work};
