//! Error types of the data module.
//!
//! Every failure that comes from a file (a fixture, a raw data set) is a
//! [`DataError`] naming the file and the 1-based line, so a user can jump
//! straight to the offending input. Line 0 stands for "the whole file" (I/O
//! failures, a missing sample count at end of file, ...).

use std::fmt;

/// A failure while reading, parsing or writing data files.
///
/// `Display` always starts with `file:line: `, e.g.
/// `data/sst-train.trees:12: expected ')' at column 7`.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// Reading or writing a file failed.
    #[error("{file}:{line}: {source}")]
    Io {
        /// The path involved, as given by the caller.
        file: String,
        /// Always 0: I/O errors concern the whole file.
        line: usize,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The content of a file is malformed.
    #[error("{file}:{line}: {message}")]
    Parse {
        /// The file name used in messages (e.g. `data/sst-dev.trees`).
        file: String,
        /// 1-based line number; 0 when the problem concerns the whole file.
        line: usize,
        /// What is wrong, including the column or item where it helps.
        message: String,
    },
}

impl DataError {
    /// Builds a [`DataError::Parse`].
    pub fn parse(file: &str, line: usize, message: impl Into<String>) -> Self {
        DataError::Parse {
            file: file.to_owned(),
            line,
            message: message.into(),
        }
    }

    /// Builds a [`DataError::Io`] for `file`.
    pub fn io(file: &str, source: std::io::Error) -> Self {
        DataError::Io {
            file: file.to_owned(),
            line: 0,
            source,
        }
    }

    /// The file the error is about.
    pub fn file(&self) -> &str {
        match self {
            DataError::Io { file, .. } | DataError::Parse { file, .. } => file,
        }
    }

    /// The 1-based line the error is about (0 = whole file).
    pub fn line(&self) -> usize {
        match self {
            DataError::Io { line, .. } | DataError::Parse { line, .. } => *line,
        }
    }
}

/// A structure violates its documented invariants (see
/// [`crate::data::Tree::validate`] and friends).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StructureError(pub String);

/// A dataset name that [`crate::data::Dataset`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownDataset {
    /// The name that was given.
    pub given: String,
}

impl fmt::Display for UnknownDataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown dataset '{}'; valid names are: ", self.given)?;
        for (i, ds) in crate::data::Dataset::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(ds.name())?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownDataset {}

/// A synthetic generator was asked for something it cannot build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntheticError {
    /// `complete_tree` needs a power-of-two leaf count.
    #[error("a complete binary tree needs a power-of-two number of leaves, got {leaves}")]
    NotPowerOfTwo {
        /// The requested leaf count.
        leaves: u32,
    },
    /// The request exceeds [`crate::data::synthetic::MAX_TREE_LEAVES`].
    #[error("{leaves} leaves requested, at most {max} are supported")]
    TooLarge {
        /// The requested leaf count.
        leaves: u32,
        /// The supported maximum.
        max: u32,
    },
}
