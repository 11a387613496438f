//! # paper-repro — the papers' figures and tables, regenerated
//!
//! `paper-repro [run|measure|report] [--quick] [--only fig7,table2,...]
//! [--out DIR]` regenerates, from scratch and beside the published numbers,
//! ED-Batch's Fig. 7 (batches per policy vs the lower bound), Table 2
//! (planner memory copies), Table 4 (RL training), Table 5 (planner compile
//! time), Fig. 6 (throughput per workload, executor and hidden size), Fig. 9
//! (time decomposition) and Table 6 (against the unbatched reference); Cavs
//! Fig. 8-style throughput curves (inference: we do not train); and
//! VPPS-style small-batch curves on a CUDA device. It writes PNG + SVG
//! figures, CSV tables and `REPORT.md` (`docs/paper-repro.md`).
//!
//! Measuring and reporting are separate steps (rebar style):
//!
//! - [`specs`]: the experiment specs, embedded (or `--specs DIR`), all
//!   loaded and checked before any run starts.
//! - [`measure`]: `experiments::run_spec` per selected item into the rows
//!   folder, resuming; `<rows>/measure.json` records the sweeps.
//! - [`report`]: rows → figures (`figs`, one builder per item, drawn with
//!   the `figures` crate), CSVs and `REPORT.md`, with the papers' numbers
//!   from [`published`].
//! - [`peers_env`]: the peers' Python environment (item `peers`: the real
//!   DyNet and PyTorch beside batchlab's executors, `docs/peers.md`).
//! - [`cli`]: the command line; [`summary`]: the `--json` summary.
#![warn(missing_docs)]

pub mod cli;
pub mod error;
mod figs;
pub mod items;
pub mod measure;
pub mod model;
pub mod peers_env;
pub mod published;
pub mod report;
pub mod rows;
pub mod specs;
pub mod summary;
pub mod training_curve;

pub use error::{ReproError, Result};
