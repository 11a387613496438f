//! # search — offline search for batching policies
//!
//! ED-Batch (`shared/papers/ed-batch.txt` §2, appendix A) casts dynamic batching
//! as a finite state machine: a state encodes the graph's frontier, a policy maps
//! it to the type to batch next. This crate learns such policies offline by
//! tabular Q-learning with N-step bootstrapping ([`trainer`]: ED-Batch's scheme,
//! and by default one that measures whole FSMs and improves on its typewise
//! prior, optionally distilling a teacher schedule). For reference it finds
//! exact optima of small graphs by branch and bound ([`optimal`]), best-known
//! schedules of large ones by an anytime parallel beam search ([`optimise`]),
//! and certified lower bounds tighter than ED-Batch A.3 ([`bound`]), so every
//! schedule gets a certified gap. [`schedule_file`] stores schedules,
//! [`synth`] makes seeded random multi-type DAGs. The runtime side (frontier,
//! encodings, the FSM lookup, the remaining lower bound) lives in
//! `engine::sched`, because the replay loop runs it.
//!
//! ```
//! use engine::cells::CellLibrary;
//! use engine::graph::lower_bound;
//! use engine::sched::{Encoding, FsmPolicy, SameTypeDag, run_policy};
//! use engine::trace::Level;
//! use engine::workloads::{self, DataChoice, RecordOptions};
//! use search::trainer::{TrainConfig, default_hyperparameters, train};
//!
//! let trace = workloads::record(
//!     &RecordOptions {
//!         workload: workloads::workload("tree-lstm").unwrap(),
//!         data: DataChoice::Default,
//!         batch: 8,
//!         hidden: 16,
//!         level: Level::Cell,
//!         seed: 1,
//!     },
//!     &CellLibrary::builtin().unwrap(),
//! )
//! .unwrap();
//! let st = SameTypeDag::new(&trace.graph);
//! let cfg = TrainConfig { encoding: Encoding::Sort, hyper: default_hyperparameters(), seed: 1 };
//! let trained = train(&trace.graph, &st, &cfg, &mut |_, _| {});
//! let file = search::export::policy_file(&trained, &trace, "t.json", &cfg.hyper, cfg.seed);
//! let mut fsm = FsmPolicy::new(file).unwrap();
//! let (schedule, _) = run_policy(&trace.graph, &st, &mut fsm).unwrap();
//! assert_eq!(schedule.len() as u64, trained.report.best_batches);
//! assert!(schedule.len() as u64 >= lower_bound(&trace.graph).total);
//! ```
#![warn(missing_docs)]

pub mod bound;
pub mod export;
pub mod optimal;
pub mod optimise;
pub mod qtable;
pub use engine::sched::schedule_file;
pub mod synth;
pub mod trainer;

#[cfg(test)]
mod tests;
