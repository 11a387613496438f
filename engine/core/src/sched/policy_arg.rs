//! A policy named on a command line: a heuristic name or a policy file. Shared
//! by every tool that runs policies (`search eval/compare`, `engine replay`),
//! so they resolve names and read files the same way.

use std::path::Path;

use thiserror::Error;

use super::fsm::FsmPolicy;
use super::policy::BatchPolicy;
use super::policy_file::{PolicyFile, PolicyFileError};
use super::{HEURISTICS, heuristic};

/// A resolved policy argument.
pub enum PolicyArg {
    /// One of [`HEURISTICS`].
    Heuristic(&'static str),
    /// A policy file.
    File {
        /// The path as given.
        path: String,
        /// Its contents.
        file: Box<PolicyFile>,
    },
}

/// Why a policy argument cannot be used.
#[derive(Debug, Error)]
pub enum PolicyArgError {
    /// Neither a heuristic name nor an existing file.
    #[error("unknown policy {arg:?}: not a heuristic ({}) and no such policy file", HEURISTICS.join(", "))]
    Unknown {
        /// The argument.
        arg: String,
    },
    /// The policy file could not be read.
    #[error(transparent)]
    File(#[from] PolicyFileError),
}

impl PolicyArg {
    /// Resolves `arg`: a heuristic name, else a policy file. An argument that
    /// looks like a path (has a separator or a YAML extension) is always read as
    /// a file, so a typo in a file name reports the missing file, not an
    /// unknown name.
    pub fn parse(arg: &str) -> Result<PolicyArg, PolicyArgError> {
        if let Some(&name) = HEURISTICS.iter().find(|h| **h == arg) {
            return Ok(PolicyArg::Heuristic(name));
        }
        let looks_like_path = arg.contains(std::path::MAIN_SEPARATOR)
            || arg.contains('/')
            || arg.ends_with(".yaml")
            || arg.ends_with(".yml");
        if !looks_like_path && !Path::new(arg).exists() {
            return Err(PolicyArgError::Unknown {
                arg: arg.to_string(),
            });
        }
        let file = PolicyFile::read(Path::new(arg))?;
        Ok(PolicyArg::File {
            path: arg.to_string(),
            file: Box::new(file),
        })
    }

    /// Row label: the heuristic name, or `fsm(<encoding>) <path>`.
    pub fn label(&self) -> String {
        match self {
            PolicyArg::Heuristic(n) => (*n).to_string(),
            PolicyArg::File { path, file } => format!("fsm({}) {path}", file.encoding.name()),
        }
    }

    /// The pass a policy file batches (`forward` or `backward`; `any` for
    /// a heuristic, which batches either graph).
    pub fn trained_pass(&self) -> &str {
        match self {
            PolicyArg::File { file, .. } => file.pass.as_deref().unwrap_or("forward"),
            _ => "any",
        }
    }

    /// The workload a policy file was trained on (`None` for heuristics).
    pub fn trained_workload(&self) -> Option<&str> {
        match self {
            PolicyArg::Heuristic(_) => None,
            PolicyArg::File { file, .. } => Some(&file.workload),
        }
    }

    /// A fresh runtime policy.
    pub fn instantiate(&self) -> Result<Box<dyn BatchPolicy + Send>, PolicyFileError> {
        Ok(match self {
            // Every name in HEURISTICS is built in; typewise stands in for none.
            PolicyArg::Heuristic(n) => {
                heuristic(n).unwrap_or_else(|| Box::new(super::TypewisePolicy))
            }
            PolicyArg::File { file, .. } => Box::new(FsmPolicy::new((**file).clone())?),
        })
    }
}
