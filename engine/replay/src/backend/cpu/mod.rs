//! The CPU backend of the replay engine.
//!
//! - [`gemm`]: products against weights packed once per session (AVX-512
//!   micro-kernel, portable fallback), A read through strided segments, C
//!   written in place from the bias.
//! - [`simd`]: vectorised elementwise math (exp, sigmoid, tanh with stated
//!   error bounds), compiled per instruction set and chosen at run time.
//! - [`plan`]: a role's cell program compiled into steps — shared-weight
//!   GEMMs, and fused per-instance passes over everything else.
//! - [`exec`], [`dynet`]: running batches (cell level, and DyNet's op level).
//! - [`threads`], [`team`]: the session's threads (the caller and spinning
//!   workers); every step splits over them.
//!
//! A [`CpuReplay`] (`replay.rs`) owns every buffer a run needs — the node
//! store, the batch records and temporaries, the GEMM's packing buffer,
//! DyNet's arena — sized on the first run and reused, so repeated runs
//! allocate nothing and touch no new pages (`page_faults` in the run record
//! shows it). It is the CPU's backend: `session.rs` implements the
//! backends' trait for it (forward pass, training step, read-back).

mod backward;
pub mod dynet;
pub mod exec;
pub mod gemm;
pub mod grad;
pub mod ops;
pub mod plan;
mod replay;
pub mod roofline;
mod session;
pub mod simd;
pub(crate) mod split;
pub mod team;
pub mod threads;

pub use replay::{CpuOptions, CpuReplay};
