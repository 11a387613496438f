//! Scheduling: the batching environment (ED-Batch Algorithm 1), state encodings,
//! runtime policies and schedules.
//!
//! A [`Frontier`] tracks which nodes are ready and, per type t, |Frontier_t(G)|
//! and |Frontier(G^t)| (type-t nodes with no unexecuted type-t ancestor, via the
//! precomputed [`SameTypeDag`]), so one step costs O(batch + out-edges). A
//! [`BatchPolicy`] picks the next type; [`run_policy`] loops until the graph is
//! done and returns a [`Schedule`], which [`validate_schedule`] checks. The loop
//! itself is [`PolicyRun`], one decision per call, for executors that decide
//! ahead of the batches they run (the schedule depends on the graph alone).
//!
//! ```
//! use engine_core::cells::CellLibrary;
//! use engine_core::sched::{SameTypeDag, TypewisePolicy, run_policy, validate_schedule};
//! use engine_core::trace::Level;
//! use engine_core::workloads::{self, DataChoice, RecordOptions};
//!
//! let trace = workloads::record(
//!     &RecordOptions {
//!         workload: workloads::workload("tree-lstm").unwrap(),
//!         data: DataChoice::Default,
//!         batch: 4,
//!         hidden: 16,
//!         level: Level::Cell,
//!         seed: 1,
//!     },
//!     &CellLibrary::builtin().unwrap(),
//! )
//! .unwrap();
//! let st = SameTypeDag::new(&trace.graph);
//! let (schedule, stats) = run_policy(&trace.graph, &st, &mut TypewisePolicy).unwrap();
//! validate_schedule(&trace.graph, &schedule).unwrap();
//! assert_eq!(stats.batches as usize, schedule.len());
//! ```

mod encoding;
mod executor_name;
mod frontier;
mod fsm;
mod heuristics;
mod policy;
mod policy_arg;
mod policy_file;
mod remaining;
mod same_type;
mod schedule;
pub mod schedule_file;

pub use encoding::{
    COMPLETE, CRITICAL, Encoding, MAX_POLICY_TYPES, PHASE, PHASES, RATIO, RATIO_BUCKETS,
    RATIO_SHIFT, StateEncoder, TYPE_MASK, UNKNOWN,
};
pub use executor_name::{ExecutorKind, ExecutorName, ExecutorNameError};
pub use frontier::Frontier;
pub use fsm::{DEFER, DEFER_ACTION, FsmPolicy, key_to_tokens, tokens_to_key};
pub use heuristics::{AgendaPolicy, CavsPolicy, DepthPolicy, TypewisePolicy, typewise_choice};
pub use policy::{
    BatchPolicy, Choice, PolicyError, PolicyRun, RunDags, RunStats, run_policy,
    run_policy_on_demand,
};
pub use policy_arg::{PolicyArg, PolicyArgError};
pub use policy_file::{
    Exploration, Hyperparameters, POLICY_FORMAT, POLICY_VERSION, POLICY_VERSIONS_READ, PolicyFile,
    PolicyFileError, Provenance, Reward, StateEntry, TeacherSummary, TrainingSummary,
};
pub use remaining::RemainingBound;
pub use same_type::SameTypeDag;
pub use schedule::{Schedule, ScheduleError, validate_schedule};

/// A heuristic policy by name: `depth`, `agenda`, `agenda-updated`, `cavs`, `typewise`.
pub fn heuristic(name: &str) -> Option<Box<dyn BatchPolicy + Send>> {
    Some(match name {
        "depth" => Box::new(DepthPolicy::default()),
        "agenda" => Box::new(AgendaPolicy::fixed()),
        "agenda-updated" => Box::new(AgendaPolicy::updated()),
        "cavs" => Box::new(CavsPolicy::default()),
        "typewise" => Box::new(TypewisePolicy),
        _ => return None,
    })
}

/// Names accepted by [`heuristic`].
pub const HEURISTICS: [&str; 5] = ["depth", "agenda", "agenda-updated", "cavs", "typewise"];

#[cfg(test)]
mod tests;
