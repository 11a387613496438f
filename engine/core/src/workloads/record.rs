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

use super::build;
use super::expand;
use super::spec::{Builder, DefaultData, Synthetic, WorkloadSpec, type_name};
use crate::cells::{CellError, CellLibrary};
use crate::data::{
    self, DataError, Dataset, StructureKind, Structures, SyntheticError, UnknownDataset, synthetic,
};
use crate::graph::{GraphBuilder, GraphError, NodeId, TypeId};
use crate::memory::{Budget, Estimate, TooLarge};
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
        /// `batch` or `hidden` (the [`RecordOptions`] field; the tools
        /// name their flag, `--batch` or `--hidden`).
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
    /// The trace would not fit in memory.
    #[error(transparent)]
    TooLarge(#[from] Box<TooLarge>),
    /// The trace would have more nodes than a trace can number.
    #[error(
        "--batch {batch}: the trace would have about {nodes} nodes, more than the {} a trace can hold; lower --batch",
        u32::MAX
    )]
    TooManyNodes {
        /// The batch asked for.
        batch: usize,
        /// The estimated node count.
        nodes: u64,
    },
    /// The workload table names a role its builder does not know, or the
    /// other way round (a bug in the table, reported rather than a panic).
    #[error(
        "workload {workload}: its builder adds a node of role `{role}`, which the workload does not list"
    )]
    UnknownRole {
        /// Workload.
        workload: &'static str,
        /// The role.
        role: String,
    },
}

/// Bytes a trace holds per node while it is recorded and written: the
/// builder's and the graph's arrays and the JSON text (about 140 measured on
/// tree-lstm at cell and op level; rounded up).
const BYTES_PER_NODE: u64 = 160;

/// Samples recorded to learn a workload's nodes per sample.
const PROBE_SAMPLES: usize = 16;

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
    /// The first role the builder asked for that the workload lacks (the
    /// builders run on; the recording then fails with it).
    missing: Option<String>,
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
        // that table (the test that records every workload catches it), kept
        // as an error: the node gets a type of its own and the recording fails.
        let Some(idx) = self.spec.roles.iter().position(|r| r.role == role) else {
            self.missing.get_or_insert_with(|| role.to_string());
            return self.placeholder_type(role);
        };
        if let Some(t) = self.role_types[idx] {
            return t;
        }
        let spec = &self.spec.roles[idx];
        let name = type_name(spec.role, self.hidden);
        match self.builder.types_mut().intern(&name, spec.batchable) {
            Ok(t) => {
                self.role_types[idx] = Some(t);
                t
            }
            // Role names are unique within a workload, so this cannot conflict.
            Err(_) => {
                self.missing.get_or_insert_with(|| role.to_string());
                self.placeholder_type(role)
            }
        }
    }

    fn placeholder_type(&mut self, role: &str) -> TypeId {
        let types = self.builder.types_mut();
        let name = format!("{role}?");
        types
            .intern(&name, true)
            .or_else(|_| types.intern(&format!("{name}?"), false))
            .unwrap_or(TypeId(0))
    }
}

/// Records one mini-batch. Same options, same bytes. Refuses, before
/// building anything large, a trace that would not fit in what this machine
/// has left ([`Budget::detect`]); [`record_within`] takes the budget.
pub fn record(opts: &RecordOptions, cells: &CellLibrary) -> Result<Trace, RecordError> {
    record_within(opts, cells, Budget::detect(None).as_ref())
}

/// [`record`] within `budget` (`None`: no memory check).
pub fn record_within(
    opts: &RecordOptions,
    cells: &CellLibrary,
    budget: Option<&Budget>,
) -> Result<Trace, RecordError> {
    check_sizes(opts, cells)?;
    let w = opts.workload;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed);
    let real = load_real(w, &opts.data)?;
    let (est, nodes) = estimate_with(opts, cells, real.as_ref().map(|r| &r.0))?;
    if nodes > u64::from(u32::MAX) {
        return Err(RecordError::TooManyNodes {
            batch: opts.batch,
            nodes,
        });
    }
    crate::memory::check(format!("--batch {}", opts.batch), "the trace", est, budget)?;
    let (structures, dataset_name) = match real {
        Some(r) => r,
        None => (
            synthesize(w, opts.batch, &mut rng)?,
            "synthetic".to_string(),
        ),
    };
    let picks = pick_samples(structures.len(), opts.batch, &mut rng);
    unroll(opts, cells, &structures, &picks, dataset_name, rng)
}

/// What recording `opts` will hold in memory, and the trace's estimated
/// node count (from a few samples recorded alone).
pub fn estimate(opts: &RecordOptions, cells: &CellLibrary) -> Result<(Estimate, u64), RecordError> {
    check_sizes(opts, cells)?;
    let real = load_real(opts.workload, &opts.data)?;
    estimate_with(opts, cells, real.as_ref().map(|r| &r.0))
}

/// The number of samples the data of `opts` holds (`None` for synthetic
/// data, which draws as many as asked): a batch larger than this repeats
/// samples.
pub fn samples_available(opts: &RecordOptions) -> Result<Option<usize>, RecordError> {
    Ok(load_real(opts.workload, &opts.data)?.map(|(s, _)| s.len()))
}

fn check_sizes(opts: &RecordOptions, cells: &CellLibrary) -> Result<(), RecordError> {
    if opts.batch == 0 {
        return Err(RecordError::Zero { what: "batch" });
    }
    if opts.hidden == 0 {
        return Err(RecordError::Zero { what: "hidden" });
    }
    // Check every role's cell exists and its port table matches before building.
    for r in opts.workload.roles {
        cells.instantiate(r.cell, opts.hidden)?;
    }
    Ok(())
}

fn estimate_with(
    opts: &RecordOptions,
    cells: &CellLibrary,
    real: Option<&Structures>,
) -> Result<(Estimate, u64), RecordError> {
    let w = opts.workload;
    // A probe of evenly spaced real samples, or synthetic ones drawn from a
    // stream of their own (the recording's stream stays untouched).
    let probe = match real {
        Some(s) => {
            let k = PROBE_SAMPLES.min(s.len()).min(opts.batch);
            let idx: Vec<usize> = (0..k).map(|i| i * s.len() / k).collect();
            s.subset(&idx)
        }
        None => {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(opts.seed ^ 0x5EED_9A0B_E000_0001);
            synthesize(w, PROBE_SAMPLES.min(opts.batch), &mut rng)?
        }
    };
    let k = probe.len().max(1) as u64;
    let t = record_samples(opts, cells, &probe)?;
    let per_sample = (t.graph.len() as u64).div_ceil(k);
    let nodes = per_sample
        .saturating_mul(opts.batch as u64)
        .saturating_add(1);
    let mut e = Estimate::default();
    e.add("trace", nodes.saturating_mul(BYTES_PER_NODE));
    e.add("sample choice", (opts.batch as u64).saturating_mul(8));
    if real.is_none() {
        // One structure per sample: a few words of bookkeeping per node.
        e.add(
            "synthetic structures",
            nodes
                .saturating_mul(8)
                .saturating_add(opts.batch as u64 * 32),
        );
    }
    Ok((e, nodes))
}

/// Records exactly `samples`, in order, as one mini-batch (`opts.batch` and
/// `opts.data` are ignored): for tests and for tools that choose samples themselves.
pub fn record_samples(
    opts: &RecordOptions,
    cells: &CellLibrary,
    samples: &Structures,
) -> Result<Trace, RecordError> {
    let w = opts.workload;
    if samples.kind() != w.structure() {
        return Err(RecordError::WrongData {
            workload: w.name,
            needed: w.structure(),
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
        missing: None,
    };
    for (instance, &i) in picks.iter().enumerate() {
        rec.instance = instance as u32;
        build_sample(&mut rec, w, structures, i);
    }
    let losses = std::mem::take(&mut rec.losses);
    let sum_ty = rec.role_type("loss.sum");
    rec.builder.add_node(sum_ty, &losses, None);
    if let Some(role) = rec.missing.take() {
        return Err(RecordError::UnknownRole {
            workload: w.name,
            role,
        });
    }
    let cell_graph = rec.builder.finish()?;
    // Op-level traces carry no data: their nodes are primitive ops, which no
    // executor replays from a trace (see docs/trace-format.md).
    let (graph, mut data) = match opts.level {
        Level::Cell => (cell_graph, rec.data),
        Level::Op => (
            expand::to_op_level(&w.into(), &cell_graph, cells, opts.hidden)?,
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
    // The kinds match: the structures were checked against `w.structure()`.
    match (w.builder, s) {
        (Builder::Tagger { chars }, Structures::Sentences(v)) => build::tagger(rec, &v[i], chars),
        (Builder::LanguageModel, Structures::Sentences(v)) => build::language_model(rec, &v[i]),
        (Builder::Nmt, Structures::Pairs(v)) => build::nmt(rec, &v[i]),
        (Builder::Lattice, Structures::Lattices(v)) => build::lattice(rec, &v[i]),
        (
            Builder::Tree {
                leaf,
                internal,
                loss,
            },
            Structures::Trees(v),
        ) => build::tree(rec, &v[i], leaf, internal, loss),
        (Builder::TimeDelay { leaf, combine }, Structures::Trees(v)) => {
            build::time_delay(rec, &v[i], leaf, combine)
        }
        _ => {
            rec.missing.get_or_insert_with(|| {
                format!("(a {:?} builder given other structures)", w.builder)
            });
        }
    }
}

/// Loads the real structures for `choice` (`None` for synthetic data),
/// checking their kind.
fn load_real(
    w: &'static WorkloadSpec,
    choice: &DataChoice,
) -> Result<Option<(Structures, String)>, RecordError> {
    let (s, name) = match (choice, w.default_data) {
        (DataChoice::Real(d), _) => (data::load_embedded(*d)?, d.name().to_string()),
        (DataChoice::Default, DefaultData::Real(d)) => {
            (data::load_embedded(d)?, d.name().to_string())
        }
        (DataChoice::File(path), _) => (data::load_fixture_file(path)?, path.display().to_string()),
        (DataChoice::Synthetic, _) | (DataChoice::Default, DefaultData::Synthetic) => {
            return Ok(None);
        }
    };
    if s.kind() != w.structure() {
        return Err(RecordError::WrongData {
            workload: w.name,
            needed: w.structure(),
            dataset: name,
            found: s.kind(),
        });
    }
    if s.is_empty() {
        return Err(RecordError::EmptyData(name));
    }
    Ok(Some((s, name)))
}

/// Synthetic structures, one per sample, as the workload's table entry says
/// ([`Synthetic`]): the papers' parameters where they give them (64-step
/// chains for Fixed-LSTM, 256-leaf complete trees for Tree-FC) and
/// SST/WikiNER-like sizes otherwise.
fn synthesize(
    w: &WorkloadSpec,
    batch: usize,
    rng: &mut Xoshiro256PlusPlus,
) -> Result<Structures, RecordError> {
    use synthetic::LengthDist;
    let words = LengthDist::Uniform { min: 5, max: 40 };
    Ok(match (w.structure(), w.synthetic) {
        (StructureKind::Sentences, syn) => {
            let len = match syn {
                Synthetic::FixedLength(n) => LengthDist::Fixed(n),
                _ => words,
            };
            Structures::Sentences(synthetic::sentences(rng, batch, len, 0.1))
        }
        (StructureKind::Pairs, _) => Structures::Pairs(synthetic::pairs(rng, batch, words, words)),
        (StructureKind::Trees, Synthetic::CompleteTrees(leaves)) => {
            let t = synthetic::complete_tree(leaves)?;
            Structures::Trees(vec![t; batch])
        }
        (StructureKind::Trees, _) => Structures::Trees(
            (0..batch)
                .map(|_| {
                    let leaves = rng.random_range(2..=40u32);
                    synthetic::random_tree(rng, leaves)
                })
                .collect(),
        ),
        (StructureKind::Lattices, _) => Structures::Lattices(
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
