//! Result rows: one per run, as written to `<spec>.jsonl` (field by field in
//! `docs/experiments.md`), and read back typed by the report (`paper-repro`).
//!
//! Reading is the writing's inverse: a row serialised and deserialised is
//! the same row. Rows written by earlier revisions lack fields added since;
//! those fields carry `#[serde(default)]` (an `Option` reads as null, a
//! flag as off, `rounds` as 1, `device` as `cpu`), so every committed row
//! still reads.

use engine::layout::TotalsEntry;
use serde::{Deserialize, Deserializer, Serialize};

use crate::config::RunConfig;
use crate::provenance::Machine;

/// Version of the row schema (bumped when a field changes meaning).
pub const ROW_SCHEMA: u32 = 1;

/// One run's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Where, when and from what it was measured.
    pub provenance: Provenance,
    /// The run's parameters.
    pub config: RunConfig,
    /// What was measured (absent when the run failed).
    pub metrics: Option<Metrics>,
    /// Why the run failed, with its cause chain (absent when it succeeded).
    pub error: Option<String>,
    /// Raw timed samples in seconds, one per repeat (empty for untimed kinds).
    pub samples: Vec<f64>,
}

/// Provenance of a row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Row schema version ([`ROW_SCHEMA`]).
    pub schema: u32,
    /// Spec name.
    pub spec: String,
    /// Whether the spec ran in quick mode.
    pub quick: bool,
    /// Hash of `config` (see [`crate::hash`]).
    pub config_hash: String,
    /// Position of the run in the spec's expansion.
    pub run: usize,
    /// `git rev-parse --short HEAD` (+ `-dirty`), or `unknown`.
    pub git_revision: String,
    /// The machine.
    pub machine: Machine,
    /// Device the run used (`cpu` for the planner and policy kinds).
    pub device: String,
    /// Record seed, for kinds that record a trace.
    pub seed: Option<u64>,
    /// Version of this crate.
    pub crate_version: String,
    /// Seconds since the UNIX epoch when the row was written.
    pub timestamp: u64,
}

/// Kind-specific measurements, written untagged: the row's `config.kind`
/// says which they are, and reading goes by it ([`Metrics::read`]) rather
/// than by trying each variant in turn, which would hinge on which fields
/// the variants happen to share.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Metrics {
    /// Kind `policies`.
    Policy(PolicyMetrics),
    /// Kind `training`.
    Training(TrainingMetrics),
    /// Kind `planner-memory`.
    PlannerMemory(Box<PlannerMemoryMetrics>),
    /// Kind `planner-compile`.
    PlannerCompile(PlannerCompileMetrics),
    /// Kind `replay`.
    Replay(ReplayMetrics),
    /// Kind `peers`.
    Peers(Box<PeerMetrics>),
}

impl Metrics {
    /// Reads the metrics of a row whose configuration is `config`: the
    /// variant of the config's kind, so an error names the field that kind
    /// misses.
    pub fn read(config: &RunConfig, value: serde_json::Value) -> serde_json::Result<Metrics> {
        use serde_json::from_value;
        Ok(match config {
            RunConfig::Policies(_) => Metrics::Policy(from_value(value)?),
            RunConfig::Training(_) => Metrics::Training(from_value(value)?),
            RunConfig::PlannerMemory(_) => Metrics::PlannerMemory(from_value(value)?),
            RunConfig::PlannerCompile(_) => Metrics::PlannerCompile(from_value(value)?),
            RunConfig::Replay(_) => Metrics::Replay(from_value(value)?),
            RunConfig::Peers(_) => Metrics::Peers(from_value(value)?),
        })
    }
}

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Row, D::Error> {
        /// A row as written, its metrics not yet typed: which type they
        /// are depends on `config`.
        #[derive(Deserialize)]
        struct Raw {
            provenance: Provenance,
            config: RunConfig,
            metrics: Option<serde_json::Value>,
            error: Option<String>,
            samples: Vec<f64>,
        }
        let raw = Raw::deserialize(deserializer)?;
        let metrics = match raw.metrics {
            Some(value) => Some(Metrics::read(&raw.config, value).map_err(|e| {
                serde::de::Error::custom(format_args!(
                    "metrics of a `{}` row: {e}",
                    raw.config.kind().name()
                ))
            })?),
            None => None,
        };
        Ok(Row {
            provenance: raw.provenance,
            config: raw.config,
            metrics,
            error: raw.error,
            samples: raw.samples,
        })
    }
}

/// One system (a peer framework or a batchlab executor) on one trace, over
/// all its rounds (`docs/peers.md`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerMetrics {
    /// System name (`dynet-agenda`, `torch`, `edbatch`...).
    pub system: String,
    /// `dynet`, `torch` or `batchlab`.
    pub framework: String,
    /// The framework's version (`2.2`, `2.15.0+cu130`, `batchlab 0.1.0`).
    pub version: String,
    /// Samples in the mini-batch.
    pub instances: usize,
    /// Threads pinned.
    pub threads: usize,
    /// Rounds whose process finished (of the spec's `rounds`).
    pub rounds_ok: usize,
    /// Median construction seconds (DyNet: renew_cg and building the graph;
    /// batchlab: its construction; null for PyTorch eager).
    pub construction_s: Option<f64>,
    /// Median forward seconds (DyNet: `value()`; PyTorch: the eager run;
    /// batchlab: scheduling + execution).
    pub forward_s: Option<f64>,
    /// Median of every timed run's total over all rounds.
    pub total_s: f64,
    /// Median process CPU seconds per timed run (all threads).
    pub cpu_s: f64,
    /// `instances / total_s`.
    pub instances_per_s: f64,
    /// The mini-batch loss this system computed.
    pub loss: Option<f64>,
    /// batchlab's reference loss for the trace (from the export).
    pub reference_loss: Option<f64>,
    /// `|loss - reference_loss| / |reference_loss|`.
    pub loss_rel_err: Option<f64>,
    /// Batches executed: batchlab's counter, or DyNet agenda's own count
    /// (its profiler, parameter and input-constant nodes excluded).
    pub batches: Option<u64>,
    /// batchlab's `dynet --policy agenda` batches on the trace.
    pub agenda_batches: Option<u64>,
    /// Peers: ops of the generated program.
    pub program_ops: Option<usize>,
    /// Nodes of `engine record --level op` for the trace.
    pub expected_ops: usize,
    /// `dynet-agenda`: op nodes DyNet executed (its profiler's batch sizes summed).
    pub dynet_nodes: Option<u64>,
    /// `dynet-agenda`: ops the DyNet API spells as two nodes (`one_minus`).
    pub two_node_ops: Option<u64>,
    /// `dynet-agenda`: DyNet's batches per op kind.
    pub dynet_by_kind: Option<serde_json::Value>,
    /// `dynet-agenda`: batchlab agenda's batches per op kind.
    pub agenda_by_op: Option<serde_json::Value>,
    /// `dynet-agenda`: both agenda schedules simulated, DyNet's rules
    /// switched to batchlab's one at a time (`dynet`, `+mean`, `+one_minus`,
    /// `+sums`, `+types`, `+ties`; `docs/peers.md`).
    pub attribution: Option<serde_json::Value>,
    /// batchlab: the batching policy (null for the peers).
    pub policy: Option<String>,
    /// `dynet-agenda`: why DyNet's batch count could not be taken, if so.
    pub count_error: Option<String>,
    /// Every timed run's CPU seconds (as `samples` holds the wall seconds).
    pub cpu_samples: Vec<f64>,
    /// Training runs: median seconds of the backward pass (`total_s` is the
    /// whole step: construction, forward and backward); null for inference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backward_s: Option<f64>,
    /// Training runs of a peer: the largest relative difference of its
    /// parameter gradients from the reference executor's (per tensor, max
    /// |a − b| / max |b|); null for batchlab (its tests check that) and
    /// for inference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_rel_err: Option<f64>,
}

/// One policy on one trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicyMetrics {
    /// Trace nodes.
    pub nodes: usize,
    /// Batches of the schedule.
    pub batches: u64,
    /// ED-Batch A.3 lower bound.
    pub lower_bound: u64,
    /// `batches / lower_bound`.
    pub ratio: f64,
    /// Decisions that fell back (FSM states not in the table); 0 for heuristics.
    pub misses: u64,
    /// FSM only: encoding of the policy used (the winner for `fsm-best`).
    pub encoding: Option<String>,
    /// FSM only: episodes trained.
    pub episodes: Option<u32>,
    /// FSM only: why training stopped (`lower-bound` or `budget`).
    pub stop_reason: Option<String>,
    /// FSM only: states in the policy.
    pub states: Option<usize>,
    /// FSM only: training wall time, seconds (trainings may run in parallel:
    /// indicative; kind `training` times them alone).
    pub train_s: Option<f64>,
    /// With an `optimise` block: batches of the trace's best-known schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_known: Option<u64>,
    /// With an `optimise` block: the trace's certified lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certified_bound: Option<u64>,
    /// What gave the certified bound (`a3`, `scs`, `piece`, `exact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_method: Option<String>,
    /// Whether the optimiser ran every width and the bound every step before
    /// the budget (else the two numbers depend on the machine's speed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimise_complete: Option<bool>,
    /// With an `optimise` block: how the optimiser's search went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimise: Option<OptimiseMetrics>,
    /// FSM only: episode count when the kept table was found (0: the prior).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_episode: Option<u32>,
    /// FSM only: batches of the prior (typewise, as an FSM) on the
    /// training trace: the learning curve's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_batches: Option<u64>,
    /// FSM only: batches of the FSM on its training trace (`batches` is
    /// on the evaluated trace, which may be another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_batches: Option<u64>,
    /// FSM only: the heuristic that replaced a learned table worse than it
    /// on the training trace (its table is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// `fsm-teacher` only: batches of the teacher schedule (the training
    /// trace's best-known) it was distilled from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_batches: Option<u64>,
    /// FSM only: the learning curve of the kept encoding, a point per
    /// greedy rollout (every 50 episodes by default) and at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve: Option<Vec<CurvePoint>>,
    /// `optimal` only: whether the search finished (`batches` is then the
    /// optimum; else the best schedule found within the expansion budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proved: Option<bool>,
    /// `optimal` only: node expansions of the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expanded: Option<u64>,
}

/// One point of a learning curve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Episodes trained before it.
    pub episode: u32,
    /// Fewest batches of a rollout so far.
    pub best: u64,
}

/// The offline optimiser's search on a trace (kind `policies` with an
/// `optimise` block; `search optimise --json` reports the same).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimiseMetrics {
    /// The best heuristic (the search's first incumbent), first of the
    /// best in `engine::sched::HEURISTICS` order.
    pub heuristic: String,
    /// Its batches.
    pub heuristic_batches: u64,
    /// Widest beam pass that ran to its end (0: none did).
    pub widest_pass: usize,
    /// Widest pass allowed: `max_width`, or less where a wider pass's states
    /// would not fit the optimiser's memory.
    pub width_limit: usize,
    /// Why it stopped: `target` (met the certified bound), `max-width`, `budget`.
    pub stop: String,
    /// With `optimise.timed`: wall seconds of the bound and the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// With `optimise.timed`: process CPU seconds of the same (all threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
}

/// One training run (median over repeats).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingMetrics {
    /// Trace nodes.
    pub nodes: usize,
    /// Lower bound.
    pub lower_bound: u64,
    /// Batches of the trained FSM on the training trace.
    pub batches: u64,
    /// `batches / lower_bound`.
    pub ratio: f64,
    /// Episodes run.
    pub episodes: u32,
    /// Episode of the kept rollout.
    pub best_episode: u32,
    /// `lower-bound` or `budget`.
    pub stop_reason: String,
    /// States in the policy.
    pub states: usize,
    /// Median training seconds.
    pub train_s: f64,
    /// Node executions per second (median run).
    pub node_steps_per_s: f64,
}

/// Planner accounting for one cell (as `planner layout --json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerMemoryMetrics {
    /// Ops in the cell.
    pub ops: usize,
    /// Lower bound on in-cell batches.
    pub lower_bound: usize,
    /// Batches of the chosen schedule.
    pub batches: usize,
    /// Whether the schedule search was exhaustive.
    pub exhaustive: bool,
    /// Minimum-batch schedules enumerated.
    pub schedules: usize,
    /// The enumeration cap was hit.
    pub schedules_truncated: bool,
    /// Distinct compositions planned.
    pub compositions: usize,
    /// `pq-tree` or `dynet-fallback`.
    pub layout_source: String,
    /// Arena bytes.
    pub arena_bytes: u64,
    /// Planned layout totals.
    pub planned: TotalsEntry,
    /// DyNet-order layout totals.
    pub baseline: TotalsEntry,
    /// Baseline ÷ planned copy bytes (null when planned is 0).
    pub ratio_copy_bytes: Option<f64>,
    /// Baseline ÷ planned memory kernels (null when planned is 0).
    pub ratio_memory_kernels: Option<f64>,
    /// Paper style (`planner layout`'s `ratios.paper_bytes_per_instance_weights`):
    /// baseline ÷ planned `paper_bytes_per_instance_weights` (null when planned is 0).
    pub ratio_paper_bytes: Option<f64>,
}

/// Planner compile time for one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerCompileMetrics {
    /// Batches of the chosen schedule.
    pub batches: usize,
    /// Planned copy bytes (a check that every repeat planned the same).
    pub copy_bytes: u64,
    /// Median seconds of `plan_cell`.
    pub compile_s: f64,
}

/// One executor on one trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayMetrics {
    /// Trace nodes.
    pub nodes: usize,
    /// Instances (samples) in the batch.
    pub instances: usize,
    /// Batches executed.
    pub batches: u64,
    /// Kernels launched.
    pub kernels: u64,
    /// Bytes gathered.
    pub bytes_gathered: u64,
    /// Bytes scattered.
    pub bytes_scattered: u64,
    /// Median construction seconds.
    pub construction_s: f64,
    /// Median scheduling seconds.
    pub scheduling_s: f64,
    /// Median execution seconds.
    pub execution_s: f64,
    /// Median total seconds.
    pub total_s: f64,
    /// `instances / total_s`.
    pub instances_per_s: f64,
    /// Largest relative difference from the reference (null without check).
    pub max_rel_error: Option<f64>,
    /// FSM fallback decisions.
    pub policy_misses: u64,
    /// The batching policy used (`fsm(<encoding>)`, a heuristic, or null).
    pub policy: Option<String>,
    /// CUDA only: median GPU seconds from the run's first to its last kernel
    /// (CUDA events); null on the CPU.
    #[serde(default)]
    pub device_s: Option<f64>,
    /// Median process CPU seconds per timed run (all threads); beside
    /// `total_s` it shows contention (null where the OS does not tell).
    #[serde(default)]
    pub cpu_s: Option<f64>,
    /// Most minor page faults of a timed run (null where unknown).
    #[serde(default)]
    pub page_faults: Option<u64>,
    /// CPU worker threads the session ran on (null on CUDA).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Training runs: the backward pass's measurements (null for
    /// inference).
    #[serde(default)]
    pub train: Option<TrainMetrics>,
}

/// The backward half of a training step (kind `replay` with `train`);
/// `total_s`, `instances_per_s` and the counters of the row cover the whole
/// step / the forward pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainMetrics {
    /// The mini-batch loss.
    pub loss: f64,
    /// Backward batches.
    pub backward_batches: u64,
    /// Lower bound of the reversed graph (ED-Batch A.3).
    pub backward_lower_bound: u64,
    /// Backward kernels (products, row passes, weight-gradient products).
    pub backward_kernels: u64,
    /// Median forward seconds.
    pub forward_s: f64,
    /// Median backward seconds.
    pub backward_s: f64,
    /// Bytes kept for the backward pass.
    pub kept_bytes: u64,
}
