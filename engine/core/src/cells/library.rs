//! The set of cells a run can use: the embedded builtins plus user files.
//!
//! Cells are data so that a new model needs a YAML file, not a rebuild. Every
//! file is validated when it enters the library (by instantiating it at a small
//! `h`), so a bad user file fails at load with its line, not in the middle of a
//! recording. Names are kept in a `BTreeMap` so listing is sorted and stable.

use std::collections::BTreeMap;
use std::path::Path;

use super::cell::Cell;
use super::error::CellError;
use super::instantiate::instantiate;
use super::spec::CellSpec;
use crate::workloads::Workload;

/// Hidden size used to validate a file at load time (small, so cheap). A cell
/// valid at 8 but not at some other `h` (a constant dim that happens to equal 8)
/// still loads, and then fails at `instantiate` for that `h` with the reason.
const LOAD_CHECK_HIDDEN: usize = 8;

/// The embedded cell files as `(file name, text)`, sorted by file name.
const BUILTIN: &[(&str, &str)] = &[
    ("gru.yaml", include_str!("../../cells/gru.yaml")),
    (
        "lattice_gru.char.yaml",
        include_str!("../../cells/lattice_gru.char.yaml"),
    ),
    (
        "lattice_gru.word.yaml",
        include_str!("../../cells/lattice_gru.word.yaml"),
    ),
    (
        "lattice_lstm.char.yaml",
        include_str!("../../cells/lattice_lstm.char.yaml"),
    ),
    (
        "lattice_lstm.word.yaml",
        include_str!("../../cells/lattice_lstm.word.yaml"),
    ),
    ("lookup.yaml", include_str!("../../cells/lookup.yaml")),
    ("loss.sum.yaml", include_str!("../../cells/loss.sum.yaml")),
    ("lstm.yaml", include_str!("../../cells/lstm.yaml")),
    (
        "mv.internal.yaml",
        include_str!("../../cells/mv.internal.yaml"),
    ),
    ("mv.leaf.yaml", include_str!("../../cells/mv.leaf.yaml")),
    ("nmt.loss.yaml", include_str!("../../cells/nmt.loss.yaml")),
    (
        "rvnn.internal.yaml",
        include_str!("../../cells/rvnn.internal.yaml"),
    ),
    ("rvnn.leaf.yaml", include_str!("../../cells/rvnn.leaf.yaml")),
    (
        "sentiment.loss.yaml",
        include_str!("../../cells/sentiment.loss.yaml"),
    ),
    (
        "tagger.char_word.yaml",
        include_str!("../../cells/tagger.char_word.yaml"),
    ),
    (
        "tagger.loss.yaml",
        include_str!("../../cells/tagger.loss.yaml"),
    ),
    (
        "tagger.mlp.yaml",
        include_str!("../../cells/tagger.mlp.yaml"),
    ),
    (
        "td_lstm.combine.yaml",
        include_str!("../../cells/td_lstm.combine.yaml"),
    ),
    (
        "td_lstm.leaf.yaml",
        include_str!("../../cells/td_lstm.leaf.yaml"),
    ),
    (
        "td_rnn.combine.yaml",
        include_str!("../../cells/td_rnn.combine.yaml"),
    ),
    ("tree_fc.yaml", include_str!("../../cells/tree_fc.yaml")),
    (
        "tree_gru.internal.yaml",
        include_str!("../../cells/tree_gru.internal.yaml"),
    ),
    (
        "tree_gru.leaf.yaml",
        include_str!("../../cells/tree_gru.leaf.yaml"),
    ),
    (
        "tree_lstm.internal.yaml",
        include_str!("../../cells/tree_lstm.internal.yaml"),
    ),
    (
        "tree_lstm.leaf.yaml",
        include_str!("../../cells/tree_lstm.leaf.yaml"),
    ),
];

/// Cell specs by name, and the workloads defined over them outside the zoo.
#[derive(Debug, Clone, Default)]
pub struct CellLibrary {
    cells: BTreeMap<String, CellSpec>,
    /// Workloads a model folder defined (`crate::modeldir`), by name: a
    /// trace names its workload, and the library it is replayed with says
    /// what that name means.
    workloads: BTreeMap<String, Workload>,
}

impl CellLibrary {
    /// An empty library (no builtins).
    pub fn new() -> CellLibrary {
        CellLibrary::default()
    }

    /// A library holding every embedded cell file.
    pub fn builtin() -> Result<CellLibrary, CellError> {
        let mut lib = CellLibrary::new();
        for (file, text) in BUILTIN {
            lib.add_yaml(text, &format!("engine/core/cells/{file}"))?;
        }
        Ok(lib)
    }

    /// Reads, validates and adds a user cell file; returns the cell name.
    /// A name already in the library is an error (builtins cannot be shadowed,
    /// so a trace always means the same computation for the same name).
    pub fn load_file(&mut self, path: &Path) -> Result<String, CellError> {
        let shown = path.display().to_string();
        let text = crate::io::read_to_string(path).map_err(|source| CellError::Io {
            path: shown.clone(),
            source,
        })?;
        self.add_yaml(&text, &shown)
    }

    /// Parses, validates and adds one cell from YAML text; `source` names it in
    /// errors. Returns the cell name.
    pub fn add_yaml(&mut self, text: &str, source: &str) -> Result<String, CellError> {
        let spec = CellSpec::parse(text, source)?;
        if let Some(existing) = self.cells.get(spec.name()) {
            return Err(CellError::NameClash {
                name: spec.name().to_owned(),
                file: source.to_owned(),
                existing: existing.source().to_owned(),
            });
        }
        instantiate(&spec, LOAD_CHECK_HIDDEN)?;
        let name = spec.name().to_owned();
        self.cells.insert(name.clone(), spec);
        Ok(name)
    }

    /// Cell names in sorted order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.cells.keys().map(String::as_str)
    }

    /// The parsed spec of `name`.
    pub fn spec(&self, name: &str) -> Option<&CellSpec> {
        self.cells.get(name)
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether the library holds no cells.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Adds a workload defined outside the zoo (a model folder's roles). It
    /// takes precedence over a zoo workload of the same name, which
    /// `crate::modeldir` refuses anyway.
    pub fn define_workload(&mut self, w: Workload) {
        self.workloads.insert(w.name.clone(), w);
    }

    /// The workload a trace names: one defined in this library, else the
    /// zoo's.
    pub fn workload(&self, name: &str) -> Option<Workload> {
        match self.workloads.get(name) {
            Some(w) => Some(w.clone()),
            None => crate::workloads::workload(name).map(Workload::from),
        }
    }

    /// Validates and builds cell `name` at hidden size `hidden`.
    pub fn instantiate(&self, name: &str, hidden: usize) -> Result<Cell, CellError> {
        match self.cells.get(name) {
            Some(spec) => instantiate(spec, hidden),
            None => Err(CellError::UnknownCell {
                name: name.to_owned(),
                known: self.names().collect::<Vec<_>>().join(", "),
            }),
        }
    }
}
