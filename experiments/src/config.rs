//! A checked spec ([`Spec`]) and one run's parameters ([`RunConfig`]), plus
//! the names a spec may use for policies and executors.

use engine::sched::{Encoding, HEURISTICS};
use serde::{Deserialize, Serialize};

use crate::spec::Kind;

/// A checked spec, with the quick overrides applied when `quick` is set.
#[derive(Clone, Debug)]
pub struct Spec {
    /// What it measures.
    pub kind: Kind,
    /// Name (output file stem).
    pub name: String,
    /// Free text.
    pub description: String,
    /// Where it was read from (for messages).
    pub file: String,
    /// Whether the quick overrides were applied.
    pub quick: bool,
    /// The grid.
    pub grid: Grid,
}

/// The grid of a spec; each kind reads the fields it uses (see
/// `docs/experiments.md`), the others keep their defaults.
#[derive(Clone, Debug)]
pub struct Grid {
    /// Record seeds.
    pub seeds: Vec<u64>,
    /// Timed repetitions.
    pub repeats: usize,
    /// Workloads.
    pub workloads: Vec<String>,
    /// Batch sizes.
    pub batches: Vec<usize>,
    /// Hidden sizes.
    pub hiddens: Vec<usize>,
    /// Cells (planner kinds).
    pub cells: Vec<String>,
    /// `fixed_inputs` settings (planner kinds).
    pub fixed_inputs: Vec<bool>,
    /// Policy names (kind `policies`), checked by [`parse_policy`].
    pub policies: Vec<String>,
    /// Encodings (kind `training`).
    pub encodings: Vec<String>,
    /// Executor names (kind `replay`), checked by [`parse_executor`].
    pub executors: Vec<String>,
    /// Devices (kind `replay`).
    pub devices: Vec<String>,
    /// Check against the reference (kind `replay`).
    pub check: bool,
    /// Training steps instead of inference (kind `replay`).
    pub train: bool,
    /// Lazy weight-gradient settings (kind `replay` with `train`).
    pub lazy: Vec<bool>,
    /// CPU fusion settings (kind `replay`).
    pub fuse: Vec<bool>,
    /// Planner batch of the replay layouts.
    pub layout_batch: usize,
    /// FSM training rule.
    pub fsm: FsmRule,
    /// CPU thread counts (kinds `replay` and `peers`), as given; absent:
    /// `replay` uses the machine's available parallelism, `peers` one thread.
    pub threads: Option<Vec<usize>>,
    /// Systems (kind `peers`), checked by [`crate::peers::parse_system`].
    pub systems: Vec<String>,
    /// Rounds (kinds `peers`, default 3, and `replay`, default 1).
    pub rounds: usize,
    /// Optimiser rule (kind `policies`; `None` without an `optimise` block).
    pub optimise: Option<OptimiseRule>,
    /// The traces (kind `policies`): the union of these sets, in order. A
    /// spec without `traces` has one set, of its top-level axes; `workloads`,
    /// `batches`, `hiddens` and `seeds` above are then the union of the
    /// sets' values (what `exclude` is checked against).
    pub traces: Vec<TraceSet>,
    /// The generator of `random-dag` traces (kind `policies`).
    pub random_dag: DagShape,
    /// Grid points left out.
    pub exclude: Vec<Exclude>,
}

/// Workload name of the random multi-type DAG (`search::synth`), a trace
/// source of kind `policies` beside the workloads of the zoo.
pub const RANDOM_DAG: &str = search::synth::WORKLOAD;

/// One set of traces (kind `policies`): workloads × batches × hiddens × data
/// × seeds, and for `random-dag` nodes × seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSet {
    /// Workloads (`random-dag` included).
    pub workloads: Vec<String>,
    /// Batch sizes (not used by `random-dag`).
    pub batches: Vec<usize>,
    /// Hidden sizes (not used by `random-dag`).
    pub hiddens: Vec<usize>,
    /// Record seeds.
    pub seeds: Vec<u64>,
    /// Data (`default` is written as no `data` in the run's config; not
    /// used by `random-dag`).
    pub data: Vec<String>,
    /// Node counts (`random-dag` only).
    pub nodes: Vec<usize>,
    /// Traces with more nodes are not measured.
    pub max_nodes: Option<usize>,
}

/// The random DAG generator's parameters other than the node count and the
/// seed (`search::synth::DagParams`; defaults: issue 16's acceptance graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DagShape {
    /// Types.
    pub types: usize,
    /// Arguments are drawn among this many preceding nodes.
    pub window: usize,
    /// Most arguments per node.
    pub max_args: usize,
    /// Independent DAGs (samples) the nodes are split into: the trace's
    /// batch size.
    pub instances: usize,
}

impl Default for DagShape {
    fn default() -> Self {
        let d = search::synth::DagParams::default();
        DagShape {
            types: d.types,
            window: d.window,
            max_args: d.max_args,
            instances: d.instances,
        }
    }
}

/// A random DAG trace's generator parameters (kind `policies`, workload
/// `random-dag`); its seed is the run's `seed`, its instances the run's `batch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RandomDag {
    /// Nodes.
    pub nodes: usize,
    /// Types.
    pub types: usize,
    /// Window of argument draws.
    pub window: usize,
    /// Most arguments per node.
    pub max_args: usize,
}

/// An `exclude` entry: a run is left out when, for every field named, its
/// configuration's value is one of the listed values.
#[derive(Clone, Debug, PartialEq)]
pub struct Exclude {
    /// (configuration key, e.g. `executor`; values).
    pub fields: Vec<(String, Vec<serde_json::Value>)>,
}

impl Exclude {
    /// Whether `config` (a run configuration as JSON) is left out.
    pub fn matches(&self, config: &serde_json::Value) -> bool {
        self.fields
            .iter()
            .all(|(key, values)| values.contains(&config[key.as_str()]))
    }
}

/// How an FSM policy is obtained: trained with `search::trainer` on a trace of
/// the run's workload. `None` sizes mean "the evaluated trace's" (kind
/// `policies`); replay always names them (default batch 32, hidden 64, seed 1).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FsmRule {
    /// Training trace batch size.
    pub batch: Option<usize>,
    /// Training trace hidden size.
    pub hidden: Option<usize>,
    /// Training trace record seed.
    pub seed: Option<u64>,
    /// Exploration seed.
    pub trainer_seed: u64,
    /// Episode budget.
    pub episodes: u32,
    /// Encodings trained; the one with fewest batches is kept (ties to the
    /// earlier in `Encoding::ALL` order). Kind `policies`: those `fsm-best`
    /// and `fsm-teacher` choose from, `[]` = all.
    pub encodings: Vec<String>,
    /// Node count of the training trace of a `random-dag` trace (kind
    /// `policies`; `None`: the evaluated trace's). Absent from older rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
    /// Milliseconds of the optimiser whose schedule `fsm-teacher` distils
    /// (kind `policies`; `None`: the run's `optimise` budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher_budget_ms: Option<u64>,
}

/// How the best-known schedule and the certified bound of a trace are
/// computed (`search optimise`): the budget covers both, a quarter of it for
/// the bound.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OptimiseRule {
    /// Milliseconds per trace.
    pub budget_ms: u64,
    /// Widest beam.
    pub max_width: usize,
    /// Traces run one at a time and rows carry the optimiser's wall and
    /// process CPU seconds (absent: false, so older rows keep their hash).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed: bool,
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// One run's parameters: what its `config_hash` is computed over.
///
/// Each kind's parameters are a struct of their own, so a reader of rows
/// (`paper-repro`) can hold one kind's configuration by type. Serialised
/// internally tagged, a newtype variant of a struct writes `kind` and then
/// the struct's fields, exactly as the struct variants it replaced did: rows
/// and their `config_hash` do not change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RunConfig {
    /// One policy on one trace.
    Policies(PoliciesConfig),
    /// One training run, timed.
    Training(TrainingConfig),
    /// Planner accounting for one cell.
    PlannerMemory(PlannerMemoryConfig),
    /// Planner compile time for one cell.
    PlannerCompile(PlannerCompileConfig),
    /// One executor on one trace, timed.
    Replay(ReplayConfig),
    /// One system (a peer framework or a batchlab executor) on one trace,
    /// timed in its own processes, interleaved with the trace's other systems.
    Peers(PeersConfig),
}

impl RunConfig {
    /// The kind of run.
    pub fn kind(&self) -> Kind {
        match self {
            RunConfig::Policies(_) => Kind::Policies,
            RunConfig::Training(_) => Kind::Training,
            RunConfig::PlannerMemory(_) => Kind::PlannerMemory,
            RunConfig::PlannerCompile(_) => Kind::PlannerCompile,
            RunConfig::Replay(_) => Kind::Replay,
            RunConfig::Peers(_) => Kind::Peers,
        }
    }

    /// The device the run names (kinds `replay` and `peers`; the others run
    /// on the CPU and name none).
    pub fn device(&self) -> Option<&str> {
        match self {
            RunConfig::Replay(c) => Some(&c.device),
            RunConfig::Peers(c) => Some(&c.device),
            _ => None,
        }
    }
}

/// Kind `policies`: one policy on one trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoliciesConfig {
    /// Workload.
    pub workload: String,
    /// Batch size.
    pub batch: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Record seed.
    pub seed: u64,
    /// Policy name.
    pub policy: String,
    /// Training rule (FSM policies only).
    pub fsm: Option<FsmRule>,
    /// Optimiser rule (specs with an `optimise` block; absent from the
    /// hash otherwise, so older rows keep theirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimise: Option<OptimiseRule>,
    /// Data of the trace (absent: the workload's default data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// The random DAG's parameters (workload `random-dag` only; its
    /// `batch` is the instances, its `hidden` 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dag: Option<RandomDag>,
    /// A trace with more nodes is not measured: no row (absent: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<usize>,
}

/// Kind `training`: one training run, timed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingConfig {
    /// Workload.
    pub workload: String,
    /// Batch size.
    pub batch: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Record seed.
    pub seed: u64,
    /// Encoding.
    pub encoding: String,
    /// Exploration seed.
    pub trainer_seed: u64,
    /// Episode budget.
    pub episodes: u32,
    /// Timed repetitions.
    pub repeats: usize,
}

/// Kind `planner-memory`: planner accounting for one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerMemoryConfig {
    /// Cell.
    pub cell: String,
    /// Hidden size.
    pub hidden: usize,
    /// Instances per batch.
    pub batch: usize,
    /// Inputs pinned first.
    pub fixed_inputs: bool,
}

/// Kind `planner-compile`: planner compile time for one cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannerCompileConfig {
    /// Cell.
    pub cell: String,
    /// Hidden size.
    pub hidden: usize,
    /// Instances per batch.
    pub batch: usize,
    /// Inputs pinned first.
    pub fixed_inputs: bool,
    /// Timed repetitions.
    pub repeats: usize,
}

/// Kind `replay`: one executor on one trace, timed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayConfig {
    /// Workload.
    pub workload: String,
    /// Batch size.
    pub batch: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Record seed (also the weights' seed).
    pub seed: u64,
    /// Executor name.
    pub executor: String,
    /// Device name.
    pub device: String,
    /// Timed repetitions after one warm-up.
    pub repeats: usize,
    /// Rounds: the trace's runs are measured this many times, the
    /// executors' order rotated each round, and the row folds every
    /// round's samples (absent: 1, which keeps older rows' hashes).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub rounds: usize,
    /// Compared with the reference executor.
    pub check: bool,
    /// CPU worker threads (null: the machine's available parallelism;
    /// the row's `threads` metric says how many that was). Rows written
    /// before the field existed lack it: they read as null.
    #[serde(default)]
    pub threads: Option<usize>,
    /// How the FSM is trained (executors that use one).
    pub fsm: Option<FsmRule>,
    /// Planner batch of the layouts (`edbatch*`).
    pub layout_batch: Option<usize>,
    /// Training steps (forward + backward; absent: inference).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub train: bool,
    /// Weight gradients per batch instead of lazily (training only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub eager: bool,
    /// CPU row work per batch instead of fused per instance.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unfused: bool,
}

/// Kind `peers`: one system (a peer framework or a batchlab executor) on
/// one trace, timed in its own processes, interleaved with the trace's
/// other systems.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeersConfig {
    /// Workload.
    pub workload: String,
    /// Batch size.
    pub batch: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Record seed (also the weights' seed).
    pub seed: u64,
    /// Threads: batchlab's `--threads`, the peers' thread variables.
    pub threads: usize,
    /// System name (`docs/peers.md`).
    pub system: String,
    /// Timed runs per process, after one warm-up.
    pub repeats: usize,
    /// Processes per system (rounds, order rotated).
    pub rounds: usize,
    /// How the FSM is trained (`edbatch`, `policy:fsm`).
    pub fsm: Option<FsmRule>,
    /// Planner batch of the layouts (`edbatch*`).
    pub layout_batch: Option<usize>,
    /// Training steps (forward + backward, gradients checked against
    /// the reference's; absent: inference).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub train: bool,
    /// Device of every system (`cpu`, `cuda`, `cuda:N`); absent: `cpu`
    /// (so a CPU row's config, and its hash, are what they were).
    #[serde(default = "cpu", skip_serializing_if = "is_cpu")]
    pub device: String,
}

fn one() -> usize {
    1
}

fn cpu() -> String {
    "cpu".into()
}

fn is_cpu(device: &String) -> bool {
    device == "cpu"
}

/// How an FSM policy is trained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `search train`'s defaults: bound-shaped reward, key exploration.
    Default,
    /// ED-Batch's scheme (`search train --reference`): Eq. 1 reward,
    /// ε-greedy per decision.
    Reference,
}

impl Scheme {
    /// The trainer's hyper-parameters of this scheme, with `episodes`.
    pub fn hyperparameters(self, episodes: u32) -> engine::sched::Hyperparameters {
        let mut h = match self {
            Scheme::Default => search::trainer::default_hyperparameters(),
            Scheme::Reference => search::trainer::reference_hyperparameters(),
        };
        h.max_episodes = episodes;
        h
    }
}

/// A policy of kind `policies`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyChoice {
    /// One of [`HEURISTICS`].
    Heuristic(&'static str),
    /// An FSM trained with this encoding and scheme.
    Fsm(Encoding, Scheme),
    /// The best FSM over the rule's encodings (all by default).
    FsmBest(Scheme),
    /// The best FSM over the rule's encodings, each distilled from the
    /// best-known schedule of its training trace first (`search train
    /// --teacher`, default scheme).
    FsmTeacher,
    /// The offline optimiser's best-known schedule (`search optimise`).
    BestKnown,
    /// The exact optimum by branch and bound (`search optimal`; traces of
    /// at most [`search::optimal::NODE_LIMIT`] nodes).
    Optimal,
}

impl PolicyChoice {
    /// Whether it needs the spec's `optimise` block.
    pub fn needs_optimise(self) -> bool {
        matches!(self, PolicyChoice::FsmTeacher | PolicyChoice::BestKnown)
    }

    /// Whether it is a trained FSM.
    pub fn is_fsm(self) -> bool {
        matches!(
            self,
            PolicyChoice::Fsm(..) | PolicyChoice::FsmBest(_) | PolicyChoice::FsmTeacher
        )
    }
}

/// Suffix of a policy name trained with ED-Batch's scheme.
pub const REFERENCE_SUFFIX: &str = ":reference";

/// Parses a policy name: a heuristic, `fsm-<encoding>[:reference]`,
/// `fsm-best[:reference]`, `fsm-teacher`, `best-known` or `optimal`.
pub fn parse_policy(name: &str) -> Option<PolicyChoice> {
    if let Some(&h) = HEURISTICS.iter().find(|h| **h == name) {
        return Some(PolicyChoice::Heuristic(h));
    }
    match name {
        "best-known" => return Some(PolicyChoice::BestKnown),
        "optimal" => return Some(PolicyChoice::Optimal),
        "fsm-teacher" => return Some(PolicyChoice::FsmTeacher),
        _ => {}
    }
    let (fsm, scheme) = match name.strip_suffix(REFERENCE_SUFFIX) {
        Some(base) => (base, Scheme::Reference),
        None => (name, Scheme::Default),
    };
    match fsm.strip_prefix("fsm-")? {
        "best" => Some(PolicyChoice::FsmBest(scheme)),
        enc => Encoding::parse(enc).map(|e| PolicyChoice::Fsm(e, scheme)),
    }
}

/// What a policy name may be, for messages.
pub fn policy_names() -> String {
    let mut v: Vec<String> = HEURISTICS.iter().map(|s| s.to_string()).collect();
    v.extend(Encoding::ALL.iter().map(|e| format!("fsm-{}", e.name())));
    v.push("fsm-best".into());
    v.push(format!("any of those fsm-* with {REFERENCE_SUFFIX}"));
    v.push("fsm-teacher".into());
    v.push("best-known".into());
    v.push("optimal".into());
    v.join(", ")
}

/// An executor of kind `replay`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutorChoice {
    /// One node at a time.
    Reference,
    /// Primitive ops batched by this heuristic (agenda-updated by default).
    Dynet(&'static str),
    /// Cavs.
    Cavs,
    /// Cells batched by a heuristic (`Some`) or by the auto FSM (`None`).
    Policy(Option<&'static str>),
    /// The auto FSM with planned layouts (`true`) or DyNet-order layouts.
    EdBatch {
        /// Planned (true) or DyNet-order (false) layouts.
        planned: bool,
    },
    /// VPPS' persistent kernel (CUDA only), batches by this heuristic
    /// (`depth`, VPPS' own level order, by default).
    Vpps(&'static str),
}

impl ExecutorChoice {
    /// Whether it needs the auto FSM.
    pub fn needs_fsm(self) -> bool {
        matches!(
            self,
            ExecutorChoice::Policy(None) | ExecutorChoice::EdBatch { .. }
        )
    }
}

/// Parses an executor name in the one executor grammar
/// ([`engine::sched::ExecutorName`], `NAME[:POLICY]`) into what a spec can
/// run: `reference`, `dynet` (`dynet:agenda`, `dynet:depth`,
/// `dynet:agenda-updated`), `cavs`, `policy:<heuristic>`, `policy:fsm`,
/// `edbatch`, `edbatch-nolayout` (both by the runner's FSM), `vpps`
/// (`vpps:<heuristic>`; CUDA only). A spec names heuristics, not files: its
/// FSM is the one the runner trains.
pub fn parse_executor(name: &str) -> Option<ExecutorChoice> {
    use engine::sched::{ExecutorKind, ExecutorName};
    let heuristic = |h: &str| HEURISTICS.iter().find(|x| **x == h).copied();
    let e = ExecutorName::parse(name).ok()?;
    let policy = e.policy.as_deref();
    Some(match (e.kind, policy) {
        (ExecutorKind::Reference, _) => ExecutorChoice::Reference,
        (ExecutorKind::Cavs, _) => ExecutorChoice::Cavs,
        (ExecutorKind::Dynet, None) => ExecutorChoice::Dynet("agenda-updated"),
        (ExecutorKind::Dynet, Some(h @ ("agenda" | "agenda-updated" | "depth"))) => {
            ExecutorChoice::Dynet(heuristic(h)?)
        }
        (ExecutorKind::Dynet, Some(_)) => return None,
        (ExecutorKind::Policy, Some("fsm")) => ExecutorChoice::Policy(None),
        (ExecutorKind::Policy, Some(h)) => ExecutorChoice::Policy(Some(heuristic(h)?)),
        (ExecutorKind::Policy, None) => return None,
        (ExecutorKind::EdBatch, None) => ExecutorChoice::EdBatch { planned: true },
        (ExecutorKind::EdBatchNoLayout, None) => ExecutorChoice::EdBatch { planned: false },
        (ExecutorKind::EdBatch | ExecutorKind::EdBatchNoLayout, Some(_)) => return None,
        (ExecutorKind::Vpps, None) => ExecutorChoice::Vpps("depth"),
        (ExecutorKind::Vpps, Some(h)) => ExecutorChoice::Vpps(heuristic(h)?),
    })
}

/// What an executor name may be, for messages.
pub const EXECUTOR_NAMES: &str = "reference, dynet, dynet:agenda, dynet:depth, cavs, policy:<heuristic>, policy:fsm, edbatch, edbatch-nolayout, vpps, vpps:<heuristic> (CUDA only)";
