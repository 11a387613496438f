//! The spec file as written: serde types that mirror the YAML one to one
//! (`docs/experiments.md`). Every struct denies unknown fields, so a misspelt
//! key is a parse error with its file, line and column. Values that later
//! checks may reject are [`Spanned`], so those errors carry a line too.
//!
//! The kind is a plain field rather than an internally tagged enum on purpose:
//! serde buffers the body of an internally tagged enum, which loses every
//! span (serde-saphyr's documented limitation) and with it the line of an
//! unknown workload. One flat struct keeps all spans; [`crate::validate`]
//! then rejects a field that the kind does not use, at that field's line.

use serde::Deserialize;
use serde_saphyr::Spanned;

/// What a spec measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Batches per policy against the lower bound (ED-Batch Fig. 7).
    Policies,
    /// FSM training time and episodes (ED-Batch Table 4).
    Training,
    /// Planner copy bytes and kernels, planned vs DyNet order (ED-Batch Table 2).
    PlannerMemory,
    /// Planner compile time per cell (ED-Batch Table 5).
    PlannerCompile,
    /// Replay throughput and time split per executor (ED-Batch Fig. 6, 9,
    /// Table 6; Cavs Fig. 8).
    Replay,
    /// The real DyNet and PyTorch beside batchlab's executors, interleaved,
    /// each system in its own process (`docs/peers.md`).
    Peers,
}

impl Kind {
    /// The name used in spec files and rows.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Policies => "policies",
            Kind::Training => "training",
            Kind::PlannerMemory => "planner-memory",
            Kind::PlannerCompile => "planner-compile",
            Kind::Replay => "replay",
            Kind::Peers => "peers",
        }
    }

    /// Whether its runs measure time (and so run one at a time).
    pub fn is_timing(self) -> bool {
        matches!(
            self,
            Kind::Training | Kind::PlannerCompile | Kind::Replay | Kind::Peers
        )
    }
}

/// A located list.
pub type List<T> = Spanned<Vec<Spanned<T>>>;

/// A spec file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpec {
    /// What the spec measures.
    pub kind: Spanned<Kind>,
    /// Name: the output files are `<name>.jsonl`, `.csv`, `.json`.
    pub name: Spanned<String>,
    /// What it reproduces, and why the grid is what it is.
    #[serde(default)]
    pub description: String,
    /// Record seeds (trace samples and weights; a random DAG's draws).
    pub seeds: Option<List<u64>>,
    /// Timed repetitions per run (after one warm-up).
    pub repeats: Option<Spanned<u64>>,
    /// Workload names (`engine workloads`).
    pub workloads: Option<List<String>>,
    /// Batch sizes.
    pub batches: Option<List<u64>>,
    /// Hidden sizes.
    pub hiddens: Option<List<u64>>,
    /// Cell names (planner kinds; default: every built-in cell).
    pub cells: Option<List<String>>,
    /// Planner `--fixed-inputs` settings to sweep (default `[false]`).
    pub fixed_inputs: Option<List<bool>>,
    /// Policies (kind `policies`): heuristics and `fsm-<encoding>` / `fsm-best`.
    pub policies: Option<List<String>>,
    /// Data of the recorded traces (kind `policies`): `default`,
    /// `synthetic` or a shipped data set (default `[default]`).
    pub data: Option<List<String>>,
    /// Node counts of the `random-dag` traces (kind `policies`).
    pub nodes: Option<List<u64>>,
    /// Traces with more nodes are not measured (kind `policies`).
    pub max_nodes: Option<Spanned<u64>>,
    /// The generator of the `random-dag` traces (kind `policies`).
    pub random_dag: Option<Spanned<RawRandomDag>>,
    /// Trace sets (kind `policies`): the traces are the union of these
    /// sub-grids, each field missing from an entry taken from the top level.
    pub traces: Option<List<RawTraces>>,
    /// Encodings to train (kind `training`).
    pub encodings: Option<List<String>>,
    /// Executors (kind `replay`).
    pub executors: Option<List<String>>,
    /// Devices (kind `replay`; default `[cpu]`).
    pub devices: Option<List<String>>,
    /// CPU worker threads (kind `replay`: default the machine's available
    /// parallelism, recorded per row; kind `peers`: batchlab's `--threads`
    /// and the peers' thread variables).
    pub threads: Option<List<u64>>,
    /// Systems (kind `peers`): peers and batchlab executors.
    pub systems: Option<List<String>>,
    /// Rounds (kind `peers`): processes per system, order rotated each round.
    pub rounds: Option<Spanned<u64>>,
    /// Measure training steps (forward + backward) instead of inference
    /// (kind `replay`; default false).
    pub train: Option<Spanned<bool>>,
    /// Lazy batching of the weight gradients to sweep (kind `replay` with
    /// `train`; default `[true]`).
    pub lazy: Option<List<bool>>,
    /// CPU fusion of each cell's row work to sweep (kind `replay`; default
    /// `[true]`).
    pub fuse: Option<List<bool>>,
    /// Compare every run's outputs with the reference executor (kind
    /// `replay`; default true).
    pub check: Option<Spanned<bool>>,
    /// Batch size the planner lays cells out for (kind `replay`; default 8).
    pub layout_batch: Option<Spanned<u64>>,
    /// How FSM policies are trained.
    pub fsm: Option<Spanned<RawFsm>>,
    /// The offline optimiser and certified bound behind `best-known`,
    /// `fsm-teacher` and the rows' `best_known` / `certified_bound` (kind
    /// `policies`).
    pub optimise: Option<Spanned<RawOptimise>>,
    /// Overrides applied in quick mode.
    pub quick: Option<Spanned<RawQuick>>,
    /// Grid points left out: a run is skipped when, for every field an entry
    /// names, the run's value is in that entry's list.
    pub exclude: Option<List<RawExclude>>,
}

/// One `exclude` entry (see [`RawSpec::exclude`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExclude {
    /// Workloads.
    pub workloads: Option<List<String>>,
    /// Batch sizes.
    pub batches: Option<List<u64>>,
    /// Hidden sizes.
    pub hiddens: Option<List<u64>>,
    /// Seeds.
    pub seeds: Option<List<u64>>,
    /// Cells.
    pub cells: Option<List<String>>,
    /// `fixed_inputs` values.
    pub fixed_inputs: Option<List<bool>>,
    /// Policies.
    pub policies: Option<List<String>>,
    /// Encodings.
    pub encodings: Option<List<String>>,
    /// Executors.
    pub executors: Option<List<String>>,
    /// Devices.
    pub devices: Option<List<String>>,
}

/// The `fsm` block: how FSM policies are trained.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFsm {
    /// Batch size of the training trace (default: the evaluated trace's, or
    /// 32 for replay).
    pub batch: Option<Spanned<u64>>,
    /// Hidden size of the training trace (default: the evaluated trace's, or
    /// 64 for replay).
    pub hidden: Option<Spanned<u64>>,
    /// Record seed of the training trace (default: the evaluated trace's, or
    /// 1 for replay).
    pub seed: Option<Spanned<u64>>,
    /// Exploration seed of the trainer (default 1).
    pub trainer_seed: Option<Spanned<u64>>,
    /// Episode budget (default 1000).
    pub episodes: Option<Spanned<u64>>,
    /// Encodings to train, best kept (kinds `replay`, `peers`, and
    /// `policies` for `fsm-best` and `fsm-teacher`; default all).
    pub encodings: Option<List<String>>,
    /// Node count of the training trace of `random-dag` traces (kind
    /// `policies`; default: the evaluated trace's).
    pub nodes: Option<Spanned<u64>>,
    /// Seconds of the optimiser whose schedule `fsm-teacher` distils (kind
    /// `policies`; default: the `optimise` block's budget).
    pub teacher_budget: Option<Spanned<f64>>,
}

/// One entry of `traces`: a sub-grid of traces.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTraces {
    /// Workloads (`random-dag` for the random DAG).
    pub workloads: Option<List<String>>,
    /// Batch sizes (workloads other than `random-dag`).
    pub batches: Option<List<u64>>,
    /// Hidden sizes.
    pub hiddens: Option<List<u64>>,
    /// Record seeds.
    pub seeds: Option<List<u64>>,
    /// Data.
    pub data: Option<List<String>>,
    /// Node counts (`random-dag`).
    pub nodes: Option<List<u64>>,
    /// Traces with more nodes are not measured.
    pub max_nodes: Option<Spanned<u64>>,
}

/// The `random_dag` block: the generator's parameters other than the node
/// count and the seed (`search random-dag`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRandomDag {
    /// Types (default 5).
    pub types: Option<Spanned<u64>>,
    /// Arguments are drawn among this many preceding nodes (default 48).
    pub window: Option<Spanned<u64>>,
    /// Most arguments per node (default 2).
    pub max_args: Option<Spanned<u64>>,
    /// Independent DAGs the nodes are split into (default 1).
    pub instances: Option<Spanned<u64>>,
}

/// The `optimise` block (kind `policies`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOptimise {
    /// Seconds per trace for the bound and the search together (default 10).
    pub budget: Option<Spanned<f64>>,
    /// Widest beam (default 256): with it the search usually ends before
    /// the budget, so its result does not depend on the machine's speed.
    pub max_width: Option<Spanned<u64>>,
    /// Run the traces one at a time, so that the optimiser has the machine
    /// to itself, and record its wall and process CPU seconds (default false).
    pub timed: Option<Spanned<bool>>,
}

/// The `quick` block: replaces the fields it names in quick mode.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuick {
    /// Replaces `seeds`.
    pub seeds: Option<List<u64>>,
    /// Replaces `repeats`.
    pub repeats: Option<Spanned<u64>>,
    /// Replaces `workloads`.
    pub workloads: Option<List<String>>,
    /// Replaces `batches`.
    pub batches: Option<List<u64>>,
    /// Replaces `hiddens`.
    pub hiddens: Option<List<u64>>,
    /// Replaces `cells`.
    pub cells: Option<List<String>>,
    /// Replaces `policies`.
    pub policies: Option<List<String>>,
    /// Replaces `encodings`.
    pub encodings: Option<List<String>>,
    /// Replaces `executors`.
    pub executors: Option<List<String>>,
    /// Replaces `fsm.episodes`.
    pub episodes: Option<Spanned<u64>>,
    /// Replaces `threads`.
    pub threads: Option<List<u64>>,
    /// Replaces `systems`.
    pub systems: Option<List<String>>,
    /// Replaces `rounds`.
    pub rounds: Option<Spanned<u64>>,
    /// Replaces `optimise.budget` and `fsm.teacher_budget`.
    pub optimise_budget: Option<Spanned<f64>>,
    /// Replaces `traces`.
    pub traces: Option<List<RawTraces>>,
}

fn at<T>(v: &Option<Spanned<T>>) -> Option<serde_saphyr::Location> {
    v.as_ref().map(|s| s.referenced)
}

impl RawSpec {
    /// Every optional field present, with its location, by path (`seeds`,
    /// `fsm.batch`, `quick.batches`, `exclude[0].executors`...).
    pub fn present(&self) -> Vec<(String, serde_saphyr::Location)> {
        let mut out: Vec<(String, Option<serde_saphyr::Location>)> = vec![
            ("seeds".into(), at(&self.seeds)),
            ("repeats".into(), at(&self.repeats)),
            ("workloads".into(), at(&self.workloads)),
            ("batches".into(), at(&self.batches)),
            ("hiddens".into(), at(&self.hiddens)),
            ("cells".into(), at(&self.cells)),
            ("fixed_inputs".into(), at(&self.fixed_inputs)),
            ("policies".into(), at(&self.policies)),
            ("data".into(), at(&self.data)),
            ("nodes".into(), at(&self.nodes)),
            ("max_nodes".into(), at(&self.max_nodes)),
            ("random_dag".into(), at(&self.random_dag)),
            ("traces".into(), at(&self.traces)),
            ("encodings".into(), at(&self.encodings)),
            ("executors".into(), at(&self.executors)),
            ("devices".into(), at(&self.devices)),
            ("threads".into(), at(&self.threads)),
            ("train".into(), at(&self.train)),
            ("lazy".into(), at(&self.lazy)),
            ("fuse".into(), at(&self.fuse)),
            ("systems".into(), at(&self.systems)),
            ("rounds".into(), at(&self.rounds)),
            ("check".into(), at(&self.check)),
            ("layout_batch".into(), at(&self.layout_batch)),
            ("fsm".into(), at(&self.fsm)),
            ("optimise".into(), at(&self.optimise)),
        ];
        if let Some(o) = &self.optimise {
            out.push(("optimise.budget".into(), at(&o.value.budget)));
            out.push(("optimise.max_width".into(), at(&o.value.max_width)));
            out.push(("optimise.timed".into(), at(&o.value.timed)));
        }
        if let Some(f) = &self.fsm {
            let f = &f.value;
            out.push(("fsm.batch".into(), at(&f.batch)));
            out.push(("fsm.hidden".into(), at(&f.hidden)));
            out.push(("fsm.seed".into(), at(&f.seed)));
            out.push(("fsm.encodings".into(), at(&f.encodings)));
            out.push(("fsm.nodes".into(), at(&f.nodes)));
            out.push(("fsm.teacher_budget".into(), at(&f.teacher_budget)));
        }
        if let Some(q) = &self.quick {
            let q = &q.value;
            out.push(("quick.seeds".into(), at(&q.seeds)));
            out.push(("quick.repeats".into(), at(&q.repeats)));
            out.push(("quick.workloads".into(), at(&q.workloads)));
            out.push(("quick.batches".into(), at(&q.batches)));
            out.push(("quick.hiddens".into(), at(&q.hiddens)));
            out.push(("quick.cells".into(), at(&q.cells)));
            out.push(("quick.policies".into(), at(&q.policies)));
            out.push(("quick.encodings".into(), at(&q.encodings)));
            out.push(("quick.executors".into(), at(&q.executors)));
            out.push(("quick.episodes".into(), at(&q.episodes)));
            out.push(("quick.threads".into(), at(&q.threads)));
            out.push(("quick.systems".into(), at(&q.systems)));
            out.push(("quick.rounds".into(), at(&q.rounds)));
            out.push(("quick.optimise_budget".into(), at(&q.optimise_budget)));
            out.push(("quick.traces".into(), at(&q.traces)));
        }
        for (i, e) in self.exclude.iter().flat_map(|l| l.value.iter()).enumerate() {
            for (name, loc) in e.value.present() {
                out.push((format!("exclude[{i}].{name}"), Some(loc)));
            }
        }
        out.into_iter()
            .filter_map(|(name, loc)| loc.map(|l| (name, l)))
            .collect()
    }
}

impl RawExclude {
    /// The fields present, with their locations.
    pub fn present(&self) -> Vec<(&'static str, serde_saphyr::Location)> {
        [
            ("workloads", at(&self.workloads)),
            ("batches", at(&self.batches)),
            ("hiddens", at(&self.hiddens)),
            ("seeds", at(&self.seeds)),
            ("cells", at(&self.cells)),
            ("fixed_inputs", at(&self.fixed_inputs)),
            ("policies", at(&self.policies)),
            ("encodings", at(&self.encodings)),
            ("executors", at(&self.executors)),
            ("devices", at(&self.devices)),
        ]
        .into_iter()
        .filter_map(|(n, l)| l.map(|l| (n, l)))
        .collect()
    }
}

/// Parses spec YAML; `file` names the source in errors.
pub fn parse_raw(text: &str, file: &str) -> Result<RawSpec, crate::SpecError> {
    serde_saphyr::from_str(text).map_err(|e| {
        let (line, column, message) = engine::yaml::error_parts(&e, text);
        crate::SpecError::Yaml {
            file: file.to_string(),
            line,
            column,
            message,
        }
    })
}
