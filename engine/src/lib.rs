//! # engine — batchlab's graph IR, trace format, cells, workloads and recorder
//!
//! See the crate README and `docs/` for the full tour.
#![warn(missing_docs)]

pub mod cells;
pub mod data;
pub mod device;
pub mod dot;
pub mod export;
pub mod fieldpath;
pub mod graph;
pub mod io;
pub mod layout;
pub mod memory;
pub mod replay;
pub mod sched;
pub mod tool;
pub mod trace;
pub mod workloads;
pub mod yaml;
