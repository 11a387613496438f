//! The ED-Batch executors' inputs, obtained in-process: what `engine replay
//! --policy auto --layouts auto` would mean if the engine could depend on
//! `search` and `planner` (it cannot: `engine` is at the bottom of the
//! dependency graph).
//!
//! - [`policy_for`]: the FSM policy of a workload. Rule: record a training
//!   trace of the workload (by default batch 32, hidden 64, record seed 1,
//!   the workload's default data, cell level), train every encoding of the
//!   rule with `search::trainer` (default hyper-parameters, the rule's episode
//!   budget and trainer seed; encodings in parallel with rayon, each
//!   deterministic), keep the one with fewest batches, ties to the earlier of
//!   `Encoding::ALL` (base, max, sort, …, sort-crit-ratio) — exactly `search train
//!   --encoding all`. Policies match types by name with the hidden size
//!   abstracted, so one FSM serves every hidden size and batch size.
//! - [`layouts_for`]: the planned and DyNet-order layout files of every
//!   built-in cell at a hidden size (`planner layout --all --hidden H --batch
//!   8 --out-dir DIR`), ready for `engine::executor::compile_layouts`.
//!
//! ```
//! use engine::cells::CellLibrary;
//! use engine::executor::{Executor, compile_layouts};
//! use engine::{model, session};
//! use engine::sched::FsmPolicy;
//! use experiments::auto::{layouts_for, policy_for, record};
//! use experiments::config::FsmRule;
//!
//! let cells = CellLibrary::builtin().unwrap();
//! let rule = FsmRule { batch: Some(4), hidden: Some(8), seed: Some(1), trainer_seed: 1,
//!                      episodes: 50, encodings: vec!["sort".into()], nodes: None,
//!                      teacher_budget_ms: None };
//! let fsm = policy_for("tree-lstm", &rule, &cells).unwrap();
//! let layouts = layouts_for(&cells, 16, 8).unwrap();
//! let trace = record("tree-lstm", 4, 16, 7, &cells).unwrap();
//! let model = model::model(&trace, &cells, 7).unwrap();
//! let programs = compile_layouts(&model, &layouts.planned).unwrap();
//! let policy = Box::new(FsmPolicy::new(fsm.file.clone()).unwrap());
//! let (run, _outputs) =
//!     session::replay(&trace, &model, &cells, &mut Executor::EdBatch(policy, programs)).unwrap();
//! assert!(run.counters.batches > 0);
//! ```

use engine::cells::CellLibrary;
use engine::layout::LayoutFile;
use engine::sched::{Encoding, Hyperparameters, PolicyFile, SameTypeDag};
use engine::trace::{Level, Trace};
use engine::workloads::{self, DataChoice, RecordOptions};
use rayon::prelude::*;
use search::trainer::{Teacher, TrainConfig, TrainReport, default_hyperparameters, train_with};

use crate::config::FsmRule;
use crate::error::RunFailure;

/// Records a cell-level trace of `workload` on its default data.
pub fn record(
    workload: &str,
    batch: usize,
    hidden: usize,
    seed: u64,
    cells: &CellLibrary,
) -> Result<Trace, RunFailure> {
    record_data(workload, batch, hidden, seed, "default", cells)
}

/// Records a cell-level trace of `workload` on `data` (`default`,
/// `synthetic` or a shipped data set, as `engine record --data`).
pub fn record_data(
    workload: &str,
    batch: usize,
    hidden: usize,
    seed: u64,
    data: &str,
    cells: &CellLibrary,
) -> Result<Trace, RunFailure> {
    let spec = workloads::workload(workload)
        .ok_or_else(|| RunFailure::Message(format!("unknown workload {workload:?}")))?;
    let data = DataChoice::parse(data).map_err(|e| RunFailure::Message(e.to_string()))?;
    let opts = RecordOptions {
        workload: spec,
        data,
        batch,
        hidden,
        level: Level::Cell,
        seed,
    };
    Ok(workloads::record(&opts, cells)?)
}

/// A trained FSM and how it was obtained.
#[derive(Clone, Debug)]
pub struct AutoPolicy {
    /// The policy file of the kept encoding.
    pub file: PolicyFile,
    /// Its encoding.
    pub encoding: Encoding,
    /// Its training report.
    pub report: TrainReport,
    /// Every encoding's report, in the order trained.
    pub runs: Vec<TrainReport>,
}

/// Trains each of `encodings` on `trace` (in parallel) and keeps the one with
/// fewest batches, ties to the earlier in `encodings`. `trace_name` goes into
/// the policy file's provenance. `None` when `encodings` is empty.
pub fn train_best(
    trace: &Trace,
    trace_name: &str,
    encodings: &[Encoding],
    trainer_seed: u64,
    episodes: u32,
) -> Option<AutoPolicy> {
    train_best_with(trace, trace_name, encodings, trainer_seed, episodes, None)
}

/// [`train_best`] with a teacher schedule of `trace` (`search train --teacher`).
pub fn train_best_with(
    trace: &Trace,
    trace_name: &str,
    encodings: &[Encoding],
    trainer_seed: u64,
    episodes: u32,
    teacher: Option<&Teacher>,
) -> Option<AutoPolicy> {
    let mut hyper = default_hyperparameters();
    hyper.max_episodes = episodes;
    train_best_hyper(trace, trace_name, encodings, &hyper, trainer_seed, teacher)
}

/// [`train_best_with`] with the trainer's hyper-parameters given (e.g.
/// `search::trainer::reference_hyperparameters`, ED-Batch's scheme).
pub fn train_best_hyper(
    trace: &Trace,
    trace_name: &str,
    encodings: &[Encoding],
    hyper: &Hyperparameters,
    trainer_seed: u64,
    teacher: Option<&Teacher>,
) -> Option<AutoPolicy> {
    let st = SameTypeDag::new(&trace.graph);
    let trained: Vec<_> = encodings
        .par_iter()
        .map(|&encoding| {
            let cfg = TrainConfig {
                encoding,
                hyper: hyper.clone(),
                seed: trainer_seed,
            };
            train_with(&trace.graph, &st, &cfg, teacher, &mut |_, _| {})
        })
        .collect();
    let best = (0..trained.len()).min_by_key(|&i| trained[i].report.best_batches)?;
    let t = &trained[best];
    Some(AutoPolicy {
        file: search::export::policy_file(t, trace, trace_name, hyper, trainer_seed),
        encoding: t.report.encoding,
        report: t.report.clone(),
        runs: trained.iter().map(|t| t.report.clone()).collect(),
    })
}

/// Parses encoding names (unknown ones are skipped: specs are checked first).
pub fn encodings(names: &[String]) -> Vec<Encoding> {
    names.iter().filter_map(|n| Encoding::parse(n)).collect()
}

/// The FSM policy of `workload` by `rule` (see the module docs). The rule's
/// training-trace sizes default to batch 32, hidden 64, seed 1 when `None`;
/// no encodings means all of them.
pub fn policy_for(
    workload: &str,
    rule: &FsmRule,
    cells: &CellLibrary,
) -> Result<AutoPolicy, RunFailure> {
    let (b, h, s) = (
        rule.batch.unwrap_or(32),
        rule.hidden.unwrap_or(64),
        rule.seed.unwrap_or(1),
    );
    let trace = record(workload, b, h, s, cells)?;
    let mut encs = encodings(&rule.encodings);
    if encs.is_empty() {
        encs = Encoding::ALL.to_vec();
    }
    let name = format!("auto:{workload}:b{b}:h{h}:s{s}");
    train_best(&trace, &name, &encs, rule.trainer_seed, rule.episodes)
        .ok_or_else(|| RunFailure::Message("no encoding to train".into()))
}

/// Layout files of every built-in cell at one hidden size, named as
/// `planner layout --out-dir` names them.
#[derive(Clone, Debug)]
pub struct Layouts {
    /// `<cell>.json`: the planned (PQ-tree) layouts.
    pub planned: Vec<(String, LayoutFile)>,
    /// `<cell>.baseline.json`: the DyNet declaration-order layouts.
    pub baseline: Vec<(String, LayoutFile)>,
}

/// Plans every cell of `cells` at `hidden` for `batch` instances (the layout's
/// contiguity does not depend on the batch size the replay runs at).
pub fn layouts_for(
    cells: &CellLibrary,
    hidden: usize,
    batch: usize,
) -> Result<Layouts, RunFailure> {
    let mut out = Layouts {
        planned: Vec::new(),
        baseline: Vec::new(),
    };
    for name in cells.names() {
        let cell = cells.instantiate(name, hidden)?;
        let plan = planner::plan_cell(&cell, batch, &planner::PlanOptions::default())?;
        out.planned.push((
            format!("{name}.json"),
            planner::layout_file::planned_file(&cell, &plan),
        ));
        out.baseline.push((
            format!("{name}.baseline.json"),
            planner::layout_file::baseline_file(&cell, &plan),
        ));
    }
    Ok(out)
}
