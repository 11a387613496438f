//! Why VPPS fails: [`VppsError`] (a compiled script's, the emulator's, the
//! device's and the model's refusals) and [`PoolTooLarge`], the script
//! format's.

use thiserror::Error;

use super::script::ScriptError;

/// VPPS failures.
#[derive(Debug, Error)]
pub enum VppsError {
    /// The pool does not fit the format's 30-bit offsets.
    #[error(transparent)]
    PoolTooLarge(#[from] PoolTooLarge),
    /// A malformed script.
    #[error(transparent)]
    Script(#[from] ScriptError),
    /// Two processors touched the same float in one phase (a compiler bug:
    /// a missing barrier), found by the emulator.
    #[error(
        "race at pool float {addr}: processor {vp} {action} it after {other} {did} it in the same phase (a missing grid barrier), in {ins}"
    )]
    Race {
        /// Pool address.
        addr: usize,
        /// The processor that found it.
        vp: u32,
        /// What it did (`reads`, `writes`).
        action: String,
        /// The other one(s).
        other: String,
        /// What they did (`wrote`, `read`).
        did: String,
        /// The instruction.
        ins: String,
    },
    /// Processors disagree on the barriers.
    #[error("the script deadlocks: {0}")]
    Deadlock(String),
    /// The vpps executor asked for on the CPU.
    #[error(
        "the vpps executor runs on CUDA only (engine replay --executor vpps --device cuda); on the CPU, `engine script --emulate` runs its emulator"
    )]
    CudaOnly,
    /// The device cannot hold every virtual processor at once.
    #[error(
        "the VPPS kernel fits {got} CTA(s) per SM with {smem} B of shared memory, the plan needs {want}: place with fewer CTAs per SM"
    )]
    Occupancy {
        /// CTAs per SM the plan needs.
        want: u32,
        /// CTAs per SM the device can hold.
        got: u32,
        /// Dynamic shared memory per CTA, bytes.
        smem: u32,
    },
    /// Training needs a loss.
    #[error("workload {0} has no loss (no loss.sum node): nothing to train")]
    NoLoss(String),
    /// A cell uses an op the instruction set has no instruction for.
    #[error(
        "cell `{cell}` uses `{op}`, which the VPPS instruction set has no instruction for; run it with another executor (cavs, edbatch, policy, dynet)"
    )]
    Unsupported {
        /// The cell.
        cell: String,
        /// The op.
        op: &'static str,
    },
}

/// The pool is too large for 30-bit offsets.
#[derive(Debug, Error)]
#[error(
    "the VPPS pool needs {floats} floats, more than the script format's 2^30 (4 GiB): record a smaller mini-batch or hidden size"
)]
pub struct PoolTooLarge {
    /// Floats needed.
    pub floats: usize,
}
