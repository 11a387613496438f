//! # experiments — experiment specs and the sweep runner
//!
//! batchlab measures in one step and reports in another (rebar style): this
//! crate **measures**. An experiment spec (YAML, `experiments/specs/*.yaml`,
//! format in `docs/experiments.md`) names a grid — workloads × batch sizes ×
//! hidden sizes × policies or executors × devices × seeds, with repeats — and
//! the runner executes every point and writes one result row per run:
//! `<out>/<spec>.jsonl` (appended and flushed after every run), then
//! `<out>/<spec>.csv` and `<out>/<spec>.json`. The figures crate draws from
//! those rows.
//!
//! - [`load_spec`] / [`parse_spec`]: read and check a spec. Everything that
//!   can be checked is checked before any run starts — unknown fields,
//!   unknown workloads, cells, policies, executors, devices, batch or hidden
//!   0 or too large, a hidden size a cell cannot take, a field the kind does
//!   not use — and the error names the file, line and column.
//! - [`expand()`]: the spec's runs in a stated order, each with a stable
//!   [`hash::config_hash`].
//! - [`run_spec`]: runs them. Untimed kinds (`policies`, `planner-memory`) run
//!   in parallel with rayon (a `policies` spec whose optimiser is timed, one
//!   trace at a time); timed kinds (`training`, `planner-compile`, `replay`)
//!   one at a time. A failed run is an error row, never an abort;
//!   a sweep that is run again skips the runs that already have a successful
//!   row and reruns failed ones.
//! - [`auto`]: the FSM policy and layouts of the ED-Batch executors, in-process
//!   (`--policy auto --layouts auto` for library users).
//!
//! Design notes. The kind is a plain `kind:` field of one flat, span-keeping
//! spec struct rather than an internally tagged enum, because serde loses
//! every YAML location inside internally tagged enums (see [`spec`]); fields a
//! kind does not use are rejected by [`validate`] at their line instead. The
//! quick mode is a `quick:` block in the same file that replaces named fields,
//! so a figure's full and quick grids sit side by side and cannot drift.
//!
//! ```
//! use experiments::{RunOptions, expand, parse_spec, run_spec};
//!
//! let yaml = "
//! kind: policies
//! name: tiny
//! workloads: [tree-lstm]
//! batches: [2]
//! hiddens: [8]
//! policies: [depth, typewise, fsm-sort]
//! fsm: { episodes: 50 }
//! ";
//! let spec = parse_spec(yaml, "tiny.yaml", false)?;
//! let runs = expand(&spec);
//! assert_eq!(runs.len(), 3);
//!
//! let dir = std::env::temp_dir().join(format!("batchlab-doc-{}", std::process::id()));
//! let _ = std::fs::remove_dir_all(&dir);
//! let mut opts = RunOptions::new(&dir);
//! opts.quiet = true;
//! let report = run_spec(&spec, &opts)?;
//! assert_eq!((report.ran, report.failed), (3, 0));
//! let csv = std::fs::read_to_string(&report.csv)?;
//! assert_eq!(csv.lines().count(), 1 + 3); // header + one line per run
//!
//! // Again: every run already has its row.
//! let again = run_spec(&spec, &opts)?;
//! assert_eq!((again.ran, again.skipped), (0, 3));
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod auto;
mod cache;
pub mod config;
pub mod error;
pub mod expand;
pub mod hash;
pub mod output;
pub mod peers;
pub mod progress;
pub mod provenance;
pub mod rows;
mod run_planner;
mod run_policies;
pub mod run_replay;
mod run_training;
pub mod runner;
pub mod spec;
pub mod validate;

pub use config::{RunConfig, Spec};
pub use error::{RunError, RunFailure, SpecError};
pub use expand::{Run, expand};
pub use progress::{Event, Observer};
pub use rows::Row;
pub use runner::{RunOptions, RunReport, run_spec};
pub use spec::Kind;
pub use validate::{load_spec, parse_spec};
