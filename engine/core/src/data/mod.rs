//! Benchmark inputs: the real ED-Batch data sets as fixtures of their
//! shapes and integer annotations, and seeded synthetic generators.
//!
//! Dynamic-batching workloads depend only on input *shapes*: parse trees
//! (TreeLSTM & co.), sentence and word lengths (BiLSTM taggers), sequence
//! pair lengths (LSTM-NMT) and character/word lattices (LatticeLSTM/GRU).
//! Training also needs what the cells read: labels, tags and token ids. The
//! raw corpora are third-party text, so the repository ships compact fixtures
//! in `data/` holding those shapes and, where the corpus has them, labels,
//! tags and frequency-rank ids as integers (format v2), never the text; they
//! are compiled into the binary ([`load_embedded`]) so nothing outside the
//! binary is read at run time. [`convert`] regenerates them from the raw files
//! and [`synthetic`] makes (unannotated) inputs of any size from a seed.
//!
//! Layout (private submodules, re-exported here): `structures` defines the
//! shapes and their invariants, `fixtures` the text format (parse and
//! format, exact inverses), `dataset` and `embedded` the shipped data sets,
//! `summary` descriptive statistics, `error` the error types.

pub mod convert;
mod dataset;
mod embedded;
mod error;
mod fixtures;
mod structures;
mod summary;
pub mod synthetic;

pub use dataset::Dataset;
pub use embedded::{embedded_text, load_embedded};
pub use error::{DataError, StructureError, SyntheticError, UnknownDataset};
pub use fixtures::{
    FIXTURE_MAGIC, FIXTURE_MAGIC_V2, MAX_LATTICE_NODES, fixture_header, format_fixture,
    load_fixture_file, parse_fixture,
};
pub use structures::{Lattice, Pair, Sentence, StructureKind, Structures, Tree, TreeNode, Word};
pub use summary::{AnnotationSummary, Measure, SizeStats, Summary};
