//! Kind `peers`: the real DyNet and PyTorch beside batchlab's executors, on
//! the same traces, the same weights and the same inputs, in one run
//! (`docs/peers.md`).
//!
//! Per grid point (workload × batch × hidden × seed × threads) the runner
//! records the trace and writes, in-process and untimed, the model export
//! (`engine::export`, with the reference loss), the FSM policy and the
//! layouts the ED-Batch executors need. Then, for `rounds` rounds, every
//! system runs in a process of its own — warm-up and `repeats` timed runs —
//! in an order rotated by one each round, with the thread variables pinned.
//! Peers run in the Python harness (`python -m batchlab_peers`, from
//! [`PeersEnv`]); batchlab's executors in a worker process
//! ([`WorkerCommand`], [`worker_main`]). One untimed DyNet process with its
//! profiler on counts the batches DyNet's agenda executes. Each system gets
//! one row: medians over all rounds' timed runs, wall and process CPU time,
//! the loss against batchlab's reference loss, op and batch counts.

pub(crate) mod cputime;
mod run;
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::config::{ExecutorChoice, parse_executor};

pub(crate) use run::run;
pub use worker::worker_main;

/// A peer framework configuration of the harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// DyNet, autobatch 0.
    DynetNone,
    /// DyNet, autobatch 1 (agenda).
    DynetAgenda,
    /// PyTorch eager.
    Torch,
    /// PyTorch by levels as its practitioners write it: level sets made in
    /// the collate step, fused gate matrices, one call per role and level,
    /// the losses once at the end.
    TorchLevels,
    /// PyTorch batched level by level (`batchlab_torch.run`, schedule `depth`).
    TorchDepth,
    /// PyTorch batched by DyNet's agenda.
    TorchAgenda,
    /// PyTorch batched by an FSM `search train` learned on PyTorch's graph
    /// of the FSM's training trace.
    TorchFsm,
    /// DGL as its users write it (its Tree-LSTM example's form: fused gates,
    /// the cell nodes only in the graph, batched in the collate step), in
    /// DGL's own environment.
    Dgl,
    /// The earlier DGL peer: one `pull` per frontier and role over every
    /// node, lookups and losses included, the graph built in the timed
    /// region (kept to measure what the fair one changes).
    DglPull,
}

impl Peer {
    /// The harness's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Peer::DynetNone => "dynet-none",
            Peer::DynetAgenda => "dynet-agenda",
            Peer::Torch => "torch",
            Peer::TorchLevels => "torch-levels",
            Peer::TorchDepth => "torch-depth",
            Peer::TorchAgenda => "torch-agenda",
            Peer::TorchFsm => "torch-fsm",
            Peer::Dgl => "dgl",
            Peer::DglPull => "dgl-pull",
        }
    }

    /// The framework it needs (`dynet`, `torch`).
    pub fn framework(self) -> &'static str {
        match self {
            Peer::DynetNone | Peer::DynetAgenda => "dynet",
            Peer::Dgl | Peer::DglPull => "dgl",
            _ => "torch",
        }
    }

    /// Whether it runs PyTorch batched by a schedule (it reads the trace,
    /// and batchlab's `engine` serves its schedules).
    pub fn batched(self) -> bool {
        matches!(self, Peer::TorchDepth | Peer::TorchAgenda | Peer::TorchFsm)
    }
}

/// One system of a `peers` spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// A peer framework.
    Peer(Peer),
    /// A batchlab executor (replay names: `reference`, `dynet`, `cavs`, `edbatch`...).
    Batchlab(ExecutorChoice),
}

impl System {
    /// Whether it needs the auto FSM.
    pub fn needs_fsm(self) -> bool {
        matches!(self, System::Batchlab(c) if c.needs_fsm()) || self == System::Peer(Peer::TorchFsm)
    }

    /// Whether it needs planned layouts.
    pub fn needs_layouts(self) -> bool {
        matches!(self, System::Batchlab(ExecutorChoice::EdBatch { .. }))
    }
}

/// Parses a system name: a peer (`dynet-none`, `dynet-agenda`, `torch`) or a
/// batchlab executor as in kind `replay`.
pub fn parse_system(name: &str) -> Option<System> {
    Some(match name {
        "dynet-none" => System::Peer(Peer::DynetNone),
        "dynet-agenda" => System::Peer(Peer::DynetAgenda),
        "torch" => System::Peer(Peer::Torch),
        "torch-levels" => System::Peer(Peer::TorchLevels),
        "torch-depth" => System::Peer(Peer::TorchDepth),
        "torch-agenda" => System::Peer(Peer::TorchAgenda),
        "torch-fsm" => System::Peer(Peer::TorchFsm),
        "dgl" => System::Peer(Peer::Dgl),
        "dgl-pull" => System::Peer(Peer::DglPull),
        other => System::Batchlab(parse_executor(other)?),
    })
}

/// What a system name may be, for messages.
pub const SYSTEM_NAMES: &str = "dynet-none, dynet-agenda, torch, torch-levels, torch-depth, torch-agenda, torch-fsm, dgl, dgl-pull (peers), or a batchlab executor: reference, dynet, dynet:agenda, dynet:depth, cavs, policy:<heuristic>, policy:fsm, edbatch, edbatch-nolayout";

/// The peers' Python environment: the interpreter, the folder holding the
/// `batchlab_peers` package, and which frameworks import there (version, or
/// why not). Made by `paper-repro peers --install`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeersEnv {
    /// The venv's `python`.
    pub python: PathBuf,
    /// Folder put on `PYTHONPATH` (holds `batchlab_peers/`).
    pub harness: PathBuf,
    /// Per framework (`dynet`, `torch`, `dgl`): its version, or why it is
    /// unavailable.
    pub frameworks: BTreeMap<String, Result<String, String>>,
    /// The `python` of DGL's own environment (DGL pins an older PyTorch
    /// than the project's), where it was made.
    pub dgl_python: Option<PathBuf>,
}

/// How to start a batchlab worker process: `program args... <worker flags>`
/// (`paper-repro worker ...`; the flags are [`worker_main`]'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerCommand {
    /// Executable.
    pub program: PathBuf,
    /// Leading arguments (the subcommand).
    pub args: Vec<String>,
}

impl WorkerCommand {
    /// This executable with `subcommand` first (for binaries that dispatch
    /// `subcommand` to [`worker_main`]).
    pub fn current_exe(subcommand: &str) -> std::io::Result<WorkerCommand> {
        Ok(WorkerCommand {
            program: std::env::current_exe()?,
            args: vec![subcommand.to_string()],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systems_parse_peers_before_executors() {
        assert_eq!(
            parse_system("dynet-agenda"),
            Some(System::Peer(Peer::DynetAgenda))
        );
        assert!(matches!(parse_system("dynet"), Some(System::Batchlab(_))));
        assert!(parse_system("edbatch").unwrap().needs_layouts());
        assert!(parse_system("edbatch").unwrap().needs_fsm());
        assert!(!parse_system("torch").unwrap().needs_fsm());
        assert!(parse_system("torch-fsm").unwrap().needs_fsm());
        assert!(!parse_system("torch-depth").unwrap().needs_fsm());
        assert_eq!(
            parse_system("torch-agenda"),
            Some(System::Peer(Peer::TorchAgenda))
        );
        assert_eq!(parse_system("tensorflow"), None);
    }
}
