//! Typed errors of the library: what can go wrong choosing items, loading
//! specs, reading published data and rows, and writing the report.

use std::path::PathBuf;

use thiserror::Error;

/// Why `paper-repro` cannot do what it was asked.
#[derive(Debug, Error)]
pub enum ReproError {
    /// `--only` named an item that does not exist.
    #[error("unknown item {name:?} in --only; valid items: {valid}")]
    UnknownItem {
        /// The name given.
        name: String,
        /// The valid names, comma separated.
        valid: String,
    },
    /// `--only` was given but named nothing.
    #[error("--only names no item; valid items: {valid}")]
    EmptyOnly {
        /// The valid names, comma separated.
        valid: String,
    },
    /// A spec does not load or check (file, line and column inside).
    #[error(transparent)]
    Spec(#[from] experiments::SpecError),
    /// A file in `--specs DIR` names no item.
    #[error("{path}: no item uses a spec of this name; spec files are named after: {valid}")]
    StraySpec {
        /// The file.
        path: PathBuf,
        /// The valid stems.
        valid: String,
    },
    /// `--device` is not `cpu`, `cuda` or `cuda:N`.
    #[error("--device {0:?}: expected cpu, cuda or cuda:N")]
    BadDevice(String),
    /// A published-numbers file does not parse or check.
    #[error("{file}: {message}")]
    Published {
        /// The file.
        file: String,
        /// What is wrong (with line and column when known).
        message: String,
    },
    /// A published value the report needs is missing.
    #[error("published data: no value with id {0:?}")]
    MissingPublished(String),
    /// A rows file could not be read or parsed.
    #[error("{path}: {message}")]
    Rows {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The sweep runner stopped (output files).
    #[error(transparent)]
    Run(#[from] experiments::RunError),
    /// A figure could not be drawn or written.
    #[error("figure {stem}: {source}")]
    Figure {
        /// The figure's file stem.
        stem: String,
        /// The cause.
        source: figures::FigureError,
    },
    /// A file or folder could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// JSON (de)serialisation failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A bad command-line value (the message names the flag).
    #[error("{0}")]
    Usage(String),
    /// Some of a run's rows failed (the report is written and shows them).
    #[error("{0}")]
    RowsFailed(String),
    /// The peers' environment could not be made or used.
    #[error("peers: {0}")]
    Peers(String),
}

impl ReproError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ReproError {
        ReproError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result with [`ReproError`].
pub type Result<T, E = ReproError> = std::result::Result<T, E>;
