//! VPPS (vpps.txt §III): one persistent kernel per mini-batch whose CTAs act
//! as virtual processors that keep the model's weight matrices on chip and
//! interpret a per-batch script.
//!
//! - [`target`]: the GPU's SMs, registers and shared memory (presets).
//! - [`placement`]: rows of every weight matrix over the processors, within
//!   their register / shared-memory budget, with per-matrix fall back to DRAM.
//! - `lower`: each role's cell as instruction templates, forward and backward.
//! - [`script`]: the versioned binary instruction format.
//! - `compile`: a schedule's batches (any policy; backward on the reversed
//!   graph) into per-processor streams with grid barriers where needed.
//! - `emulator`: the kernel's semantics on the CPU — each processor's
//!   rows, the barriers, a race detector — checked against the reference.
//! - [`kernel`]: the CUDA C source, specialised per model (static register
//!   indices), compiled by NVRTC.
//! - `pipeline`: the flow below, from a [`Vpps`] to a run.
//! - `cuda` (feature `cuda`): the executor on a GPU.
//!
//! The seam is the replay's: a [`Model`](crate::model::Model) over the cell
//! IR, a schedule from any [`BatchPolicy`](crate::sched::BatchPolicy)
//! (backward batches as the CPU training step takes them,
//! [`BackwardSchedule`](crate::run::BackwardSchedule)), and [`Executor::Vpps`](crate::executor::Executor::Vpps)
//! behind [`Session`](crate::session::Session) on a CUDA device (on the CPU it is the typed
//! error [`VppsError::CudaOnly`]; the emulator is what runs there). The
//! emulator is the kernel's specification: tests hold it to the reference
//! executor's loss, outputs and gradients (1e-4) on every workload, and
//! `engine/replay/tests/vpps_nvrtc.rs` compiles every workload's kernel with NVRTC.
//! On a GPU it agrees with the CPU reference (loss, outputs and gradients,
//! 1e-4) on every workload (an H200, `results/2026-11-27-h200-vpps`); CI has
//! no GPU, so the emulator and the NVRTC compile are what CI checks.
//! `docs/vpps.md` says what remains (its speed end to end).
//!
//! Flow: [`Vpps::new`] (place, lower) → [`schedule`] → [`Vpps::compile`]
//! (a [`Script`]) → [`Vpps::emulate`] or the kernel.
//!
//! ```
//! use engine_core::cells::CellLibrary;
//! use engine_replay::backend::vpps;
//! use engine_replay::model;
//! use engine_replay::run::BackwardSchedule;
//! use engine_core::sched::{CavsPolicy, TypewisePolicy};
//! use engine_core::trace::Level;
//! use engine_core::workloads::{self, DataChoice, RecordOptions};
//!
//! let cells = CellLibrary::builtin().unwrap();
//! let trace = workloads::record(
//!     &RecordOptions {
//!         workload: workloads::workload("tree-lstm").unwrap(),
//!         data: DataChoice::Default,
//!         batch: 2,
//!         hidden: 8,
//!         level: Level::Cell,
//!         seed: 1,
//!     },
//!     &cells,
//! )
//! .unwrap();
//! let model = model::model(&trace, &cells, 3).unwrap();
//! let v = vpps::Vpps::new(&model, &vpps::VppsOptions::default()).unwrap();
//! assert!(v.plan().summary.fits_on_chip);
//! let mut backward = TypewisePolicy;
//! let batches = vpps::schedule(
//!     &trace,
//!     &mut CavsPolicy::default(),
//!     Some(BackwardSchedule::Policy(&mut backward)),
//! )
//! .unwrap();
//! let compiled = v.compile(&trace, &model, &batches).unwrap();
//! let run = v.emulate(&trace, &model, &compiled, true).unwrap();
//! assert!(run.loss > 0.0 && run.gradients.is_some());
//! ```

mod compile;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod emulator;
mod error;
pub mod kernel;
mod lower;
mod pipeline;
pub mod placement;
pub mod script;
pub mod target;
#[cfg(test)]
mod tests;

pub use compile::{Pool, ScriptStats};
pub use emulator::EmuStats;
pub use error::{PoolTooLarge, VppsError};
pub use pipeline::{Batches, Compiled, KernelInfo, Vpps, VppsOptions, VppsRun, schedule};
pub use placement::{PlaceOptions, Plan, Storage};
pub use script::{Ins, Script, ScriptError};
pub use target::Target;
