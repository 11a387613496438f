//! Training checkpoints: the model's parameters, the optimiser's state and
//! the progress, in one versioned binary file (postcard), written
//! atomically so an interrupted run never leaves a torn file. A checkpoint
//! names the model it belongs to (workload, hidden size, the parameter
//! shapes); resuming another model's is an error naming the difference.

use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::optim::{Optimizer, Tensors};
use crate::model::Model;

/// Magic of the file.
pub const CHECKPOINT_FORMAT: &str = "batchlab-checkpoint";
/// Version of the layout below.
pub const CHECKPOINT_VERSION: u32 = 1;

/// One epoch's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// Epoch number (from 1).
    pub epoch: u32,
    /// Mean training loss per sample.
    pub train_loss: f64,
    /// Dev accuracy (root labels), where evaluated.
    pub dev_accuracy: Option<f64>,
    /// Dev accuracy over every labelled node, where evaluated.
    pub dev_node_accuracy: Option<f64>,
    /// Seconds of the epoch.
    pub seconds: f64,
}

/// A checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// [`CHECKPOINT_FORMAT`].
    pub format: String,
    /// [`CHECKPOINT_VERSION`].
    pub version: u32,
    /// Workload.
    pub workload: String,
    /// Hidden size.
    pub hidden: usize,
    /// Per role: its name and its parameter shapes (value id, floats).
    pub shapes: Vec<(String, Vec<(usize, usize)>)>,
    /// Parameters.
    pub params: Tensors,
    /// Optimiser and its state.
    pub optimizer: Optimizer,
    /// Epochs finished.
    pub epochs_done: u32,
    /// Per finished epoch.
    pub history: Vec<EpochRecord>,
    /// The command-line settings that shaped the run (for `--resume` checks).
    pub settings: String,
}

/// Checkpoint failures.
#[derive(Debug, Error)]
pub enum CheckpointError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Not a checkpoint, or a damaged one.
    #[error("{path}: not a batchlab checkpoint ({reason})")]
    Format {
        /// File.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A checkpoint of another model.
    #[error("{path}: a checkpoint of another model: {reason}")]
    OtherModel {
        /// File.
        path: String,
        /// The difference.
        reason: String,
    },
}

/// Parameter shapes of `model` as a checkpoint records them.
pub fn shapes(model: &Model) -> Vec<(String, Vec<(usize, usize)>)> {
    model
        .roles
        .iter()
        .map(|r| {
            let s = r
                .params
                .iter()
                .enumerate()
                .filter(|(_, p)| !p.is_empty())
                .map(|(v, p)| (v, p.len()))
                .collect();
            (r.role.role.to_string(), s)
        })
        .collect()
}

impl Checkpoint {
    /// Writes the checkpoint atomically.
    pub fn write(&self, path: &Path) -> Result<(), CheckpointError> {
        let bytes = postcard::to_allocvec(self).map_err(|e| CheckpointError::Format {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| CheckpointError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        crate::io::write_atomic(path, &bytes).map_err(|source| CheckpointError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// Reads a checkpoint and checks that it belongs to `model` (workload,
    /// hidden size, parameter shapes).
    pub fn read_for(path: &Path, model: &Model) -> Result<Checkpoint, CheckpointError> {
        let p = path.display().to_string();
        let bytes = crate::io::read(path).map_err(|source| CheckpointError::Io {
            path: p.clone(),
            source,
        })?;
        let c: Checkpoint = postcard::from_bytes(&bytes).map_err(|e| CheckpointError::Format {
            path: p.clone(),
            reason: e.to_string(),
        })?;
        if c.format != CHECKPOINT_FORMAT || c.version != CHECKPOINT_VERSION {
            return Err(CheckpointError::Format {
                path: p,
                reason: format!(
                    "format {:?} version {} (expected {CHECKPOINT_FORMAT:?} version {CHECKPOINT_VERSION})",
                    c.format, c.version
                ),
            });
        }
        let other = |reason: String| CheckpointError::OtherModel {
            path: p.clone(),
            reason,
        };
        if c.workload != model.workload.name {
            return Err(other(format!(
                "workload {} (this run trains {})",
                c.workload, model.workload.name
            )));
        }
        if c.hidden != model.hidden {
            return Err(other(format!(
                "hidden size {} (this run has {})",
                c.hidden, model.hidden
            )));
        }
        if c.shapes != shapes(model) {
            return Err(other(
                "its parameter shapes differ from this model's".into(),
            ));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::CellLibrary;
    use crate::trace::Level;
    use crate::workloads::{self, DataChoice, RecordOptions};

    fn model(w: &str, hidden: usize) -> Model {
        let cells = CellLibrary::builtin().unwrap();
        let t = workloads::record(
            &RecordOptions {
                workload: workloads::workload(w).unwrap(),
                data: DataChoice::Default,
                batch: 1,
                hidden,
                level: Level::Cell,
                seed: 1,
            },
            &cells,
        )
        .unwrap();
        crate::model::model(&t, &cells, 1).unwrap()
    }

    #[test]
    fn round_trip_and_other_models_are_refused() {
        let m = model("tree-lstm", 4);
        let dir = std::env::temp_dir().join(format!("batchlab-ckpt-{}", std::process::id()));
        let path = dir.join("c.bin");
        let c = Checkpoint {
            format: CHECKPOINT_FORMAT.into(),
            version: CHECKPOINT_VERSION,
            workload: "tree-lstm".into(),
            hidden: 4,
            shapes: shapes(&m),
            params: m.roles.iter().map(|r| r.params.clone()).collect(),
            optimizer: Optimizer::adam(0.01, None),
            epochs_done: 2,
            history: Vec::new(),
            settings: "x".into(),
        };
        c.write(&path).unwrap();
        assert_eq!(Checkpoint::read_for(&path, &m).unwrap(), c);
        let e = Checkpoint::read_for(&path, &model("tree-lstm", 8))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("another model") && e.contains("hidden size 4"),
            "{e}"
        );
        let e = Checkpoint::read_for(&path, &model("tree-gru", 4))
            .unwrap_err()
            .to_string();
        assert!(e.contains("workload tree-lstm"), "{e}");
        std::fs::write(&path, b"garbage").unwrap();
        let e = Checkpoint::read_for(&path, &m).unwrap_err().to_string();
        assert!(e.contains("not a batchlab checkpoint"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
