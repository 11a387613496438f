//! Schedule files (JSON, `docs/schedule-format.md`): a schedule of one trace
//! with its certified lower bound — what `search optimise --out` and `engine
//! schedule` write, and `search train --teacher` and `batchlab_torch.run` read.

use std::path::Path;

use super::{Schedule, validate_schedule};
use crate::graph::{Graph, NodeId, TypeId};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Value of the `format` field.
pub const SCHEDULE_FORMAT: &str = "batchlab-schedule";
/// The version this build reads and writes.
pub const SCHEDULE_VERSION: u32 = 1;

/// A schedule file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleFile {
    /// Always `batchlab-schedule`.
    pub format: String,
    /// Always 1.
    pub version: u32,
    /// The trace's path as given to the tool that wrote it.
    pub trace: String,
    /// The trace's workload.
    pub workload: String,
    /// The trace's node count (checked when read against a trace).
    pub nodes: u64,
    /// Number of batches.
    pub batches: u64,
    /// A certified lower bound of the trace (no schedule has fewer batches).
    pub certified_bound: u64,
    /// What wrote it (e.g. `search optimise`).
    pub source: String,
    /// Type name of every batch.
    pub schedule: Vec<String>,
    /// Node ids of every batch.
    pub batch_nodes: Vec<Vec<u32>>,
}

/// Errors reading or checking a schedule file. Every variant names the file.
#[derive(Debug, Error)]
pub enum ScheduleFileError {
    /// I/O failure.
    #[error("{file}: {source}")]
    Io {
        /// File.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Not JSON of the right shape.
    #[error("{file}:{line}:{column}: {message}")]
    Json {
        /// File.
        file: String,
        /// Line (1-based).
        line: usize,
        /// Column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// Parses, but is wrong for this build or this trace.
    #[error("{file}: {message}")]
    Invalid {
        /// File.
        file: String,
        /// What is wrong.
        message: String,
    },
}

impl ScheduleFile {
    /// The file for `schedule` of `g`.
    pub fn new(
        g: &Graph,
        schedule: &Schedule,
        trace: &str,
        workload: &str,
        certified_bound: u64,
        source: &str,
    ) -> Self {
        ScheduleFile {
            format: SCHEDULE_FORMAT.into(),
            version: SCHEDULE_VERSION,
            trace: trace.into(),
            workload: workload.into(),
            nodes: g.len() as u64,
            batches: schedule.len() as u64,
            certified_bound,
            source: source.into(),
            schedule: schedule
                .batches()
                .map(|(t, _)| g.types().name(t).to_string())
                .collect(),
            batch_nodes: schedule
                .batches()
                .map(|(_, n)| n.iter().map(|v| v.0).collect())
                .collect(),
        }
    }

    /// Parses JSON; `file` names the source in errors.
    pub fn from_json(text: &str, file: &str) -> Result<Self, ScheduleFileError> {
        let s: ScheduleFile = serde_json::from_str(text).map_err(|e| ScheduleFileError::Json {
            file: file.into(),
            line: e.line(),
            column: e.column(),
            message: crate::fieldpath::json_message(&e, text),
        })?;
        let invalid = |message: String| ScheduleFileError::Invalid {
            file: file.into(),
            message,
        };
        if s.format != SCHEDULE_FORMAT {
            return Err(invalid(format!(
                "field `format`: expected \"{SCHEDULE_FORMAT}\", found {:?}",
                s.format
            )));
        }
        if s.version != SCHEDULE_VERSION {
            return Err(invalid(format!(
                "field `version`: unsupported version {} (this build reads {SCHEDULE_VERSION})",
                s.version
            )));
        }
        if s.schedule.len() != s.batch_nodes.len() || s.batches != s.schedule.len() as u64 {
            return Err(invalid(format!(
                "fields `batches`, `schedule`, `batch_nodes` disagree ({}, {} and {} batches)",
                s.batches,
                s.schedule.len(),
                s.batch_nodes.len()
            )));
        }
        // A lower bound is at most any schedule's length, this one's too:
        // a larger one would make `search train --teacher` stop early,
        // claiming the optimum.
        if s.certified_bound > s.batches {
            return Err(invalid(format!(
                "field `certified_bound`: {} exceeds the file's own schedule of {} batches (a lower bound is at most any schedule's length)",
                s.certified_bound, s.batches
            )));
        }
        Ok(s)
    }

    /// Reads a schedule file.
    pub fn read(path: &Path) -> Result<Self, ScheduleFileError> {
        let file = path.display().to_string();
        let text = crate::io::read_to_string(path).map_err(|source| ScheduleFileError::Io {
            file: file.clone(),
            source,
        })?;
        Self::from_json(&text, &file)
    }

    /// Writes the JSON atomically.
    pub fn write(&self, path: &Path) -> Result<(), ScheduleFileError> {
        let mut text =
            serde_json::to_string_pretty(self).map_err(|e| ScheduleFileError::Invalid {
                file: path.display().to_string(),
                message: e.to_string(),
            })?;
        text.push('\n');
        crate::io::write_atomic(path, text.as_bytes()).map_err(|source| ScheduleFileError::Io {
            file: path.display().to_string(),
            source,
        })
    }

    /// The schedule on `g` (`file` names this file in errors): checks the node
    /// count, that every batch's type name is its nodes' type, and that the
    /// schedule is valid.
    pub fn to_schedule(&self, g: &Graph, file: &str) -> Result<Schedule, ScheduleFileError> {
        let invalid = |message: String| ScheduleFileError::Invalid {
            file: file.into(),
            message,
        };
        if self.nodes != g.len() as u64 {
            return Err(invalid(format!(
                "written for a trace of {} nodes, this one has {}",
                self.nodes,
                g.len()
            )));
        }
        let mut s = Schedule::new();
        for (i, (name, nodes)) in self.schedule.iter().zip(&self.batch_nodes).enumerate() {
            let t: TypeId = g
                .types()
                .get(name)
                .ok_or_else(|| invalid(format!("schedule[{i}]: no type {name:?} in the trace")))?;
            let ids: Vec<NodeId> = nodes.iter().map(|&v| NodeId(v)).collect();
            if let Some(v) = ids
                .iter()
                .find(|v| v.index() < g.len() && g.node_type(**v) != t)
            {
                return Err(invalid(format!(
                    "batch {i}: node {} is not of type {name:?}",
                    v.0
                )));
            }
            s.push(t, &ids);
        }
        validate_schedule(g, &s).map_err(|e| invalid(e.to_string()))?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::ed_batch_fig1 as fig1;
    use crate::sched::{SameTypeDag, TypewisePolicy, run_policy};

    #[test]
    fn round_trips_and_refuses_what_does_not_fit_the_trace() {
        let g = fig1();
        let st = SameTypeDag::new(&g);
        let (s, _) = run_policy(&g, &st, &mut TypewisePolicy).unwrap();
        let f = ScheduleFile::new(&g, &s, "fig1.json", "fig1", 6, "test");
        let text = serde_json::to_string(&f).unwrap();
        let back = ScheduleFile::from_json(&text, "s.json").unwrap();
        assert_eq!(back, f);
        assert_eq!(back.to_schedule(&g, "s.json").unwrap(), s);
        let e = ScheduleFile::from_json(&text.replace("\"version\":1", "\"version\":9"), "s.json")
            .unwrap_err();
        assert!(e.to_string().starts_with("s.json: field `version`"), "{e}");
        let e = ScheduleFile::from_json(&text.replace("\"batches\":6", "\"batches\":5"), "s.json")
            .unwrap_err();
        assert!(e.to_string().contains("disagree"), "{e}");
        let e = ScheduleFile::from_json("{\"format\":", "s.json").unwrap_err();
        assert!(e.to_string().starts_with("s.json:1:"), "{e}");
        let mut bad = f.clone();
        bad.batch_nodes.swap(0, 1);
        let e = bad.to_schedule(&g, "s.json").unwrap_err().to_string();
        assert!(e.starts_with("s.json: batch 0: node"), "{e}");
        let mut short = f.clone();
        short.nodes = 3;
        let e = short.to_schedule(&g, "s.json").unwrap_err().to_string();
        assert!(e.contains("trace of 3 nodes"), "{e}");
    }

    /// A teacher whose bound exceeded its own batch count made `search
    /// train --teacher` stop early, claiming the optimum.
    #[test]
    fn certified_bound_above_its_own_batch_count_is_refused() {
        let g = fig1();
        let st = SameTypeDag::new(&g);
        let (s, _) = run_policy(&g, &st, &mut TypewisePolicy).unwrap();
        let mut f = ScheduleFile::new(&g, &s, "fig1.json", "fig1", 6, "test");
        f.certified_bound = f.batches + 1;
        let text = serde_json::to_string(&f).unwrap();
        let e = ScheduleFile::from_json(&text, "s.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!(
                "s.json: field `certified_bound`: {} exceeds",
                f.batches + 1
            )),
            "{e}"
        );
        f.certified_bound = f.batches;
        let text = serde_json::to_string(&f).unwrap();
        assert!(ScheduleFile::from_json(&text, "s.json").is_ok());
    }
}
