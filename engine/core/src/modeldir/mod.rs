//! Model folders: a model recorded outside batchlab (by `batchlab_torch`,
//! `engine/torch`, from a user's own PyTorch code; `docs/torch.md`), in a
//! form every tool reads wherever it reads a zoo workload:
//!
//! ```text
//! DIR/model.json            manifest: name, roles (cell, trace type, port feeders, loss)
//! DIR/trace.json            the recorded trace (docs/trace-format.md)
//! DIR/cells/<cell>.yaml     the roles' cells (docs/cells.md)
//! DIR/weights.safetensors   the parameters, by the cells' parameter names
//! DIR/expected.safetensors  the recording framework's own outputs (optional)
//! ```
//!
//! [`ModelDir::open`] checks the folder as a whole: the manifest's fields,
//! every role's cell file (its name, its ports against the manifest's
//! feeders, each feeder's outputs against the port's inputs, a loss a
//! scalar nothing reads), the trace against the manifest and the roles
//! (counts, batchability, each node's instance and arguments), the weights
//! against the cells. Every tool opens a folder this way, so a folder one
//! refuses, all refuse, with the same message. Its [`ModelDir::cells`] holds the
//! folder's cells and defines its workload, so `Model::new` (engine-replay)
//! and the op-level expansion resolve the trace's types as they do a zoo
//! trace's.

mod check;
mod manifest;
pub mod tensors;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use thiserror::Error;

pub use manifest::{Files, Manifest, RoleEntry};
pub use tensors::{Tensor, Tensors, TensorsError};

use crate::cells::{CellError, CellLibrary};
use crate::trace::{Trace, TraceError};
use crate::workloads::{Role, Workload};

/// The manifest's file name.
pub const MANIFEST: &str = "model.json";
/// `format` of a manifest.
pub const FORMAT: &str = "batchlab-model";
/// The manifest version this build reads.
pub const VERSION: u64 = 1;

/// Why a model folder cannot be used; every variant names the file.
#[derive(Debug, Error)]
pub enum ModelDirError {
    /// The path is not a model folder.
    #[error("{path}: {why}; record a model folder with batchlab_torch (docs/torch.md)")]
    NotAFolder {
        /// The path given.
        path: String,
        /// What it is instead.
        why: String,
    },
    /// A file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// File name.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The manifest is not JSON of its shape.
    #[error("{file}:{line}:{column}: {message}")]
    Json {
        /// File name.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong (led by the field).
        message: String,
    },
    /// A manifest field with a bad value.
    #[error("{file}: field `{field}`: {message}")]
    Field {
        /// File name.
        file: String,
        /// The field's path.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A cell file is missing or invalid.
    #[error(transparent)]
    Cell(#[from] CellError),
    /// The trace file is invalid.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The trace and the manifest or cells disagree.
    #[error("{file}: {message}")]
    Mismatch {
        /// The file that disagrees.
        file: String,
        /// How.
        message: String,
    },
    /// A tensor file is missing, damaged or lacks a tensor.
    #[error(transparent)]
    Tensors(#[from] TensorsError),
}

/// An opened, checked model folder.
#[derive(Debug, Clone)]
pub struct ModelDir {
    /// The folder.
    pub path: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// Its cells only, with its workload defined.
    pub cells: CellLibrary,
    /// Its workload (also in `cells`).
    pub workload: Workload,
    /// Its trace.
    pub trace: Trace,
    /// Its parameters, read and checked against the cells when opened.
    weights: Tensors,
}

impl ModelDir {
    /// Whether `path` is a folder holding a manifest.
    pub fn is_model_dir(path: &Path) -> bool {
        path.join(MANIFEST).is_file()
    }

    /// Opens and checks the folder at `path` (see the module docs).
    pub fn open(path: &Path) -> Result<ModelDir, ModelDirError> {
        let shown = path.display().to_string();
        if !path.is_dir() {
            return Err(ModelDirError::NotAFolder {
                path: shown,
                why: if path.exists() {
                    "not a folder".into()
                } else {
                    "no such folder".into()
                },
            });
        }
        let mpath = path.join(MANIFEST);
        if !mpath.is_file() {
            return Err(ModelDirError::NotAFolder {
                path: shown,
                why: format!("a folder without {MANIFEST}"),
            });
        }
        let manifest = Manifest::read(&mpath)?;
        let mfile = mpath.display().to_string();
        let field = |field: &str, message: String| ModelDirError::Field {
            file: mfile.clone(),
            field: field.to_string(),
            message,
        };
        let mut cells = CellLibrary::new();
        let mut roles = Vec::with_capacity(manifest.roles.len());
        // Looked up per feeder and per trace type: sets, so that a model of
        // many roles opens in linear time (not a scan of the roles each).
        let role_names: HashSet<&str> = manifest.roles.iter().map(|r| r.role.as_str()).collect();
        // Each cell instantiated once however many roles use it.
        let mut instantiated: check::Cells = BTreeMap::new();
        for (i, r) in manifest.roles.iter().enumerate() {
            if cells.spec(&r.cell).is_none() {
                let cpath = path.join("cells").join(format!("{}.yaml", r.cell));
                if !cpath.is_file() {
                    return Err(field(
                        &format!("roles[{i}].cell"),
                        format!("no cell file {} for cell `{}`", cpath.display(), r.cell),
                    ));
                }
                let shown = cpath.display().to_string();
                let text =
                    crate::io::read_to_string(&cpath).map_err(|source| ModelDirError::Io {
                        file: shown.clone(),
                        source,
                    })?;
                let name = crate::cells::CellSpec::parse(&text, &shown)?
                    .name()
                    .to_string();
                if name != r.cell {
                    return Err(ModelDirError::Mismatch {
                        file: shown,
                        message: format!(
                            "the file defines cell `{name}`, but its name and roles[{i}].cell say `{}`",
                            r.cell
                        ),
                    });
                }
                cells.add_yaml(&text, &shown)?;
            }
            let ports = match instantiated.get(r.cell.as_str()) {
                Some(cell) => cell.ports.len(),
                None => {
                    let cell = cells.instantiate(&r.cell, manifest.hidden.max(1) as usize)?;
                    let n = cell.ports.len();
                    instantiated.insert(&r.cell, cell);
                    n
                }
            };
            if ports != r.ports.len() {
                return Err(field(
                    &format!("roles[{i}].ports"),
                    format!(
                        "lists {} ports, but cell `{}` has {}",
                        r.ports.len(),
                        r.cell,
                        ports
                    ),
                ));
            }
            for (p, feeders) in r.ports.iter().enumerate() {
                for f in feeders {
                    if !role_names.contains(f.as_str()) {
                        return Err(field(
                            &format!("roles[{i}].ports[{p}]"),
                            format!("`{f}` is not a role of the model"),
                        ));
                    }
                }
            }
            roles.push(Role {
                role: r.role.clone(),
                cell: r.cell.clone(),
                batchable: r.batchable,
                loss: r.loss,
                ports: r.ports.clone(),
                type_name: Some(r.type_name.clone()),
            });
        }
        check::roles(&manifest, &mfile, &instantiated)?;
        let workload = Workload {
            name: manifest.name.clone(),
            roles,
            imported: true,
        };
        cells.define_workload(workload.clone());
        let tpath = path.join(&manifest.files.trace);
        let trace = Trace::read(&tpath)?;
        let tfile = tpath.display().to_string();
        if trace.workload != manifest.name {
            return Err(ModelDirError::Mismatch {
                file: tfile,
                message: format!(
                    "the trace's workload is `{}`, but {MANIFEST} names the model `{}`",
                    trace.workload, manifest.name
                ),
            });
        }
        let type_names: HashSet<&str> = manifest
            .roles
            .iter()
            .map(|r| r.type_name.as_str())
            .collect();
        for (_, ty) in trace.graph.types().iter() {
            // What `workload.type_role(&ty.name, _)` accepts for an imported
            // workload, without its scan of the roles.
            if !type_names.contains(ty.name.as_str()) {
                return Err(ModelDirError::Mismatch {
                    file: tfile,
                    message: format!(
                        "type `{}` is the type of no role in {MANIFEST} (roles: {})",
                        ty.name,
                        workload
                            .roles
                            .iter()
                            .map(|r| r.type_name.as_deref().unwrap_or(&r.role))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        check::trace(&manifest, &mfile, &tfile, &trace, &workload, &instantiated)?;
        let weights = check::weights(&path.join(&manifest.files.weights), &instantiated)?;
        Ok(ModelDir {
            path: path.to_path_buf(),
            manifest,
            cells,
            workload,
            trace,
            weights,
        })
    }

    /// The parameters (`weights.safetensors`), every cell's present at its
    /// shape.
    pub fn weights(&self) -> &Tensors {
        &self.weights
    }

    /// The recording framework's own numbers (`expected.safetensors`), when
    /// the folder has them.
    pub fn expected(&self) -> Result<Option<Tensors>, ModelDirError> {
        match &self.manifest.files.expected {
            Some(f) => Ok(Some(Tensors::read(&self.path.join(f))?)),
            None => Ok(None),
        }
    }

    /// The files of the model folder at `dir` that are the recording (its
    /// manifest, trace, weights, expected outputs and `cells/` folder), for
    /// [`crate::io::distinct_outputs`]: no output may land on one. The
    /// manifest's file names when it parses, the recorder's otherwise. The
    /// user's other files in the folder (a policy, layouts, a report) are
    /// not among them.
    pub fn own_files(dir: &Path) -> Vec<PathBuf> {
        let named = Manifest::read(&dir.join(MANIFEST)).ok().map(|m| m.files);
        let (trace, weights, expected) = match named {
            Some(f) => (f.trace, f.weights, f.expected),
            None => (
                "trace.json".into(),
                "weights.safetensors".into(),
                Some("expected.safetensors".into()),
            ),
        };
        let mut files = vec![dir.join(MANIFEST), dir.join(trace), dir.join(weights)];
        files.extend(expected.map(|e| dir.join(e)));
        files.push(dir.join("cells"));
        files
    }

    /// [`ModelDir::own_files`] of the model folder `file` lies in, with
    /// `file`; just `file` when its folder is not a model folder. For an
    /// input given as a file (`--trace DIR/trace.json`): the rest of its
    /// folder is the recording too.
    pub fn with_its_folder(file: &Path) -> Vec<PathBuf> {
        let mut files = vec![file.to_path_buf()];
        if let Some(dir) = file.parent()
            && ModelDir::is_model_dir(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            })
        {
            files.extend(ModelDir::own_files(dir));
        }
        files
    }

    /// The manifest's path, for messages.
    pub fn manifest_path(&self) -> PathBuf {
        self.path.join(MANIFEST)
    }
}

#[cfg(test)]
mod tests;
