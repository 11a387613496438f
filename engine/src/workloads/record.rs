//! The recorder: unrolls B input samples of a workload into one instance-level
//! graph (one node per cell invocation, lookups and losses included, one final
//! non-batchable loss sum), optionally expanded to primitive ops.
//!
//! When the samples are annotated (real data with labels and ids, see
//! `data/README.md`), cell-level traces also carry each node's run-time data:
//! the token id of a lookup node, the gold label of a loss node. Which node
//! reads which annotation is decided by the builders in `build`.

use std::path::PathBuf;

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use thiserror::Error;

use super::build::{self, Leaf, TreeLoss};
use super::expand;
use super::spec::{DefaultData, WorkloadSpec, type_name};
use crate::cells::{CellError, CellLibrary};
use crate::data::{
    self, DataError, Dataset, StructureKind, Structures, SyntheticError, UnknownDataset, synthetic,
};
use crate::graph::{GraphBuilder, GraphError, NodeId, TypeId};
use crate::trace::{Level, NodeData, Trace, TraceMeta};

/// Where the recorder takes its structures from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataChoice {
    /// The workload's default (real data where the paper used real data).
    Default,
    /// A shipped real data set.
    Real(Dataset),
    /// Seeded synthetic structures.
    Synthetic,
    /// A fixture file of the user's (format by extension, see data/README.md).
    File(PathBuf),
}

impl DataChoice {
    /// Parses `synthetic`, `default`, a data set name, or a path to a fixture file
    /// (anything containing a `/` or a `.`).
    pub fn parse(s: &str) -> Result<DataChoice, UnknownDataset> {
        match s {
            "synthetic" => Ok(DataChoice::Synthetic),
            "default" => Ok(DataChoice::Default),
            path if path.contains('/') || path.contains('.') => Ok(DataChoice::File(path.into())),
            other => other.parse().map(DataChoice::Real),
        }
    }
}

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// The workload.
    pub workload: &'static WorkloadSpec,
    /// Data source.
    pub data: DataChoice,
    /// Number of samples (instances) in the mini-batch.
    pub batch: usize,
    /// Hidden size of every cell.
    pub hidden: usize,
    /// Cell level or primitive-op level.
    pub level: Level,
    /// Seed for sample choice and every random draw.
    pub seed: u64,
}

/// Recording errors.
#[derive(Debug, Error)]
pub enum RecordError {
    /// Batch size or hidden size of zero.
    #[error("{what} must be at least 1")]
    Zero {
        /// `--batch` or `--hidden`.
        what: &'static str,
    },
    /// The data set holds another kind of structure than the workload needs.
    #[error("workload {workload} needs {needed:?} but data set {dataset} holds {found:?}")]
    WrongData {
        /// Workload name.
        workload: &'static str,
        /// What it needs.
        needed: StructureKind,
        /// The data set.
        dataset: String,
        /// What the data set holds.
        found: StructureKind,
    },
    /// The data set is empty.
    #[error("data set {0} has no samples")]
    EmptyData(String),
    /// Loading shipped data failed.
    #[error(transparent)]
    Data(#[from] DataError),
    /// A synthetic structure could not be generated.
    #[error(transparent)]
    Synthetic(#[from] SyntheticError),
    /// A cell failed to instantiate or bind.
    #[error(transparent)]
    Cell(#[from] CellError),
    /// The produced graph is invalid (a recorder bug; reported, never ignored).
    #[error("recorded graph is invalid: {0}")]
    Graph(#[from] GraphError),
    /// Expansion to op level failed.
    #[error(transparent)]
    Expand(#[from] expand::ExpandError),
}

/// Recording state shared by the structure builders.
pub(super) struct Rec {
    spec: &'static WorkloadSpec,
    hidden: usize,
    builder: GraphBuilder,
    role_types: Vec<Option<TypeId>>,
    losses: Vec<NodeId>,
    instance: u32,
    pub(super) rng: Xoshiro256PlusPlus,
    /// Recorded data by node id; only as long as the last node that has some.
    data: Vec<NodeData>,
}

impl Rec {
    /// Adds a node of `role` (interning its type on first use) for the current instance.
    pub(super) fn node(&mut self, role: &str, args: &[NodeId]) -> NodeId {
        let ty = self.role_type(role);
        self.builder.add_node(ty, args, Some(self.instance))
    }

    /// Adds a loss node; every loss feeds the final sum.
    pub(super) fn loss(&mut self, role: &str, arg: NodeId) -> NodeId {
        let l = self.node(role, &[arg]);
        self.losses.push(l);
        l
    }

    /// Records the token id node `v`'s lookups read, when the sample has one.
    pub(super) fn set_id(&mut self, v: NodeId, id: Option<u32>) {
        if id.is_some() {
            self.data_mut(v).id = id;
        }
    }

    /// Records the gold label node `v`'s loss reads, when the sample has one.
    pub(super) fn set_label(&mut self, v: NodeId, label: Option<u32>) {
        if label.is_some() {
            self.data_mut(v).label = label;
        }
    }

    fn data_mut(&mut self, v: NodeId) -> &mut NodeData {
        if self.data.len() <= v.index() {
            self.data.resize(v.index() + 1, NodeData::default());
        }
        &mut self.data[v.index()]
    }

    fn role_type(&mut self, role: &str) -> TypeId {
        // Roles come from the static workload table; a missing one is a bug in
        // that table, caught by the test that records every workload.
        let idx = self
            .spec
            .roles
            .iter()
            .position(|r| r.role == role)
            .unwrap_or_else(|| panic!("workload {} has no role {role}", self.spec.name));
        if let Some(t) = self.role_types[idx] {
            return t;
        }
        let spec = &self.spec.roles[idx];
        let name = type_name(spec.role, self.hidden);
        // Role names are unique within a workload, so interning cannot conflict.
        let t = self
            .builder
            .types_mut()
            .intern(&name, spec.batchable)
            .unwrap_or_else(|e| panic!("{e}"));
        self.role_types[idx] = Some(t);
        t
    }
}

/// Records one mini-batch. Same options, same bytes.
pub fn record(opts: &RecordOptions, cells: &CellLibrary) -> Result<Trace, RecordError> {
    if opts.batch == 0 {
        return Err(RecordError::Zero { what: "batch" });
    }
    if opts.hidden == 0 {
        return Err(RecordError::Zero { what: "hidden" });
    }
    let w = opts.workload;
    // Check every role's cell exists and its port table matches before building.
    for r in w.roles {
        cells.instantiate(r.cell, opts.hidden)?;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed);
    let (structures, dataset_name) = load_structures(w, &opts.data, opts.batch, &mut rng)?;
    let picks = pick_samples(structures.len(), opts.batch, &mut rng);
    unroll(opts, cells, &structures, &picks, dataset_name, rng)
}

/// Records exactly `samples`, in order, as one mini-batch (`opts.batch` and
/// `opts.data` are ignored): for tests and for tools that choose samples themselves.
pub fn record_samples(
    opts: &RecordOptions,
    cells: &CellLibrary,
    samples: &Structures,
) -> Result<Trace, RecordError> {
    let w = opts.workload;
    if samples.kind() != w.structure {
        return Err(RecordError::WrongData {
            workload: w.name,
            needed: w.structure,
            dataset: "(given samples)".to_string(),
            found: samples.kind(),
        });
    }
    let picks: Vec<usize> = (0..samples.len()).collect();
    let rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed);
    let opts = RecordOptions {
        batch: samples.len(),
        ..opts.clone()
    };
    unroll(
        &opts,
        cells,
        samples,
        &picks,
        "(given samples)".to_string(),
        rng,
    )
}

fn unroll(
    opts: &RecordOptions,
    cells: &CellLibrary,
    structures: &Structures,
    picks: &[usize],
    dataset_name: String,
    rng: Xoshiro256PlusPlus,
) -> Result<Trace, RecordError> {
    let w = opts.workload;
    let mut rec = Rec {
        spec: w,
        hidden: opts.hidden,
        builder: GraphBuilder::new(),
        role_types: vec![None; w.roles.len()],
        losses: Vec::new(),
        instance: 0,
        rng,
        data: Vec::new(),
    };
    for (instance, &i) in picks.iter().enumerate() {
        rec.instance = instance as u32;
        build_sample(&mut rec, w, structures, i);
    }
    let losses = std::mem::take(&mut rec.losses);
    let sum_ty = rec.role_type("loss.sum");
    rec.builder.add_node(sum_ty, &losses, None);
    let cell_graph = rec.builder.finish()?;
    // Op-level traces carry no data: their nodes are primitive ops, which no
    // executor replays from a trace (see docs/trace-format.md).
    let (graph, mut data) = match opts.level {
        Level::Cell => (cell_graph, rec.data),
        Level::Op => (
            expand::to_op_level(w, &cell_graph, cells, opts.hidden)?,
            Vec::new(),
        ),
    };
    if !data.is_empty() {
        data.resize(graph.len(), NodeData::default());
    }
    Ok(Trace {
        workload: w.name.to_string(),
        meta: TraceMeta {
            batch_size: Some(opts.batch as u32),
            hidden: Some(opts.hidden as u32),
            dataset: Some(dataset_name),
            seed: Some(opts.seed),
            level: Some(opts.level),
            extra: Default::default(),
        },
        graph,
        data,
    })
}

fn build_sample(rec: &mut Rec, w: &WorkloadSpec, s: &Structures, i: usize) {
    match (w.name, s) {
        ("bilstm-tagger", Structures::Sentences(v)) => build::tagger(rec, &v[i], false),
        ("bilstm-tagger-char", Structures::Sentences(v)) => build::tagger(rec, &v[i], true),
        ("fixed-lstm" | "var-lstm", Structures::Sentences(v)) => build::language_model(rec, &v[i]),
        ("lstm-nmt", Structures::Pairs(v)) => build::nmt(rec, &v[i]),
        ("lattice-lstm" | "lattice-gru", Structures::Lattices(v)) => build::lattice(rec, &v[i]),
        (name, Structures::Trees(v)) => {
            let t = &v[i];
            match name {
                "tree-lstm" => build::tree(
                    rec,
                    t,
                    Leaf::EmbedThenCell("tree_lstm.leaf"),
                    &mut |_| "tree_lstm.internal",
                    TreeLoss::EveryNode,
                ),
                "tree-gru" => build::tree(
                    rec,
                    t,
                    Leaf::EmbedThenCell("tree_gru.leaf"),
                    &mut |_| "tree_gru.internal",
                    TreeLoss::EveryNode,
                ),
                "mv-rnn" => build::tree(
                    rec,
                    t,
                    Leaf::Cell("mv.leaf"),
                    &mut |_| "mv.internal",
                    TreeLoss::EveryNode,
                ),
                "tree-lstm-2type" => build::tree(
                    rec,
                    t,
                    Leaf::EmbedThenCell("tree_lstm.leaf"),
                    &mut build::two_type_internal,
                    TreeLoss::EveryNode,
                ),
                "tree-fc" => build::tree(rec, t, Leaf::Embed, &mut |_| "tree_fc", TreeLoss::Root),
                "rvnn" => build::tree(
                    rec,
                    t,
                    Leaf::EmbedThenCell("rvnn.leaf"),
                    &mut |_| "rvnn.internal",
                    TreeLoss::Root,
                ),
                "td-rnn" => build::time_delay(rec, t, None, "td_rnn.combine"),
                "td-lstm" => build::time_delay(rec, t, Some("td_lstm.leaf"), "td_lstm.combine"),
                other => panic!("workload {other} has no tree builder"),
            }
        }
        (name, _) => panic!("workload {name} got structures of the wrong kind"),
    }
}

/// Loads the structures for `choice`, checking their kind.
fn load_structures(
    w: &'static WorkloadSpec,
    choice: &DataChoice,
    batch: usize,
    rng: &mut Xoshiro256PlusPlus,
) -> Result<(Structures, String), RecordError> {
    let (s, name) = match (choice, w.default_data) {
        (DataChoice::Real(d), _) => (data::load_embedded(*d)?, d.name().to_string()),
        (DataChoice::Default, DefaultData::Real(d)) => {
            (data::load_embedded(d)?, d.name().to_string())
        }
        (DataChoice::File(path), _) => (data::load_fixture_file(path)?, path.display().to_string()),
        (DataChoice::Synthetic, _) | (DataChoice::Default, DefaultData::Synthetic) => {
            return Ok((synthesize(w, batch, rng)?, "synthetic".to_string()));
        }
    };
    if s.kind() != w.structure {
        return Err(RecordError::WrongData {
            workload: w.name,
            needed: w.structure,
            dataset: name,
            found: s.kind(),
        });
    }
    if s.is_empty() {
        return Err(RecordError::EmptyData(name));
    }
    Ok((s, name))
}

/// Synthetic structures, one per sample. Parameters follow the papers where they
/// give them (64-step chains for Fixed-LSTM, 256-leaf complete trees for Tree-FC)
/// and SST/WikiNER-like sizes otherwise.
fn synthesize(
    w: &WorkloadSpec,
    batch: usize,
    rng: &mut Xoshiro256PlusPlus,
) -> Result<Structures, RecordError> {
    use synthetic::LengthDist;
    let words = LengthDist::Uniform { min: 5, max: 40 };
    Ok(match w.structure {
        StructureKind::Sentences => {
            let len = if w.name == "fixed-lstm" {
                LengthDist::Fixed(64)
            } else {
                words
            };
            Structures::Sentences(synthetic::sentences(rng, batch, len, 0.1))
        }
        StructureKind::Pairs => Structures::Pairs(synthetic::pairs(rng, batch, words, words)),
        StructureKind::Trees if w.name == "tree-fc" => {
            let t = synthetic::complete_tree(256)?;
            Structures::Trees(vec![t; batch])
        }
        StructureKind::Trees => Structures::Trees(
            (0..batch)
                .map(|_| {
                    let leaves = rng.random_range(2..=40u32);
                    synthetic::random_tree(rng, leaves)
                })
                .collect(),
        ),
        StructureKind::Lattices => Structures::Lattices(
            (0..batch)
                .map(|_| {
                    let nodes = rng.random_range(5..=60u32);
                    synthetic::random_lattice(rng, nodes, 0.3, 4)
                })
                .collect(),
        ),
    })
}

/// Chooses `batch` sample indices out of `n`: a seeded Fisher–Yates shuffle, taking
/// a prefix; when `batch > n` further shuffles are appended (every sample is used
/// before any repeats).
fn pick_samples(n: usize, batch: usize, rng: &mut Xoshiro256PlusPlus) -> Vec<usize> {
    let mut picks = Vec::with_capacity(batch);
    while picks.len() < batch {
        let mut idx: Vec<usize> = (0..n).collect();
        let take = (batch - picks.len()).min(n);
        for i in 0..take {
            let j = rng.random_range(i..n);
            idx.swap(i, j);
        }
        picks.extend_from_slice(&idx[..take]);
    }
    picks
}

#[cfg(test)]
pub(super) fn pick_samples_for_test(
    n: usize,
    batch: usize,
    rng: &mut Xoshiro256PlusPlus,
) -> Vec<usize> {
    pick_samples(n, batch, rng)
}
