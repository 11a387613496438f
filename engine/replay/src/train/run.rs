//! The training loop of `engine train`: epochs over a data set's samples in
//! seeded shuffled order, one mini-batch at a time — record its trace, build
//! its model with the current parameters, forward and backward by the chosen
//! executor ([`Session::train`]), one optimiser step — then an evaluation on
//! the dev split and an atomic checkpoint per epoch.

use std::path::PathBuf;
use std::time::Instant;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_xoshiro::Xoshiro256PlusPlus;
use thiserror::Error;

use super::checkpoint::{
    CHECKPOINT_FORMAT, CHECKPOINT_VERSION, Checkpoint, CheckpointError, EpochRecord, shapes,
};
use super::optim::{Optimizer, Tensors};
use crate::backend::cpu::CpuOptions;
use crate::cells::{CellLibrary, PrimOp};
use crate::data::{Dataset, Structures};
use crate::device::DeviceKind;
use crate::error::ReplayError;
use crate::executor::Executor;
use crate::graph::NodeId;
use crate::model::Model;
use crate::run::{BackwardSchedule, TrainOptions};
use crate::sched::BatchPolicy;
use crate::session::{Session, SessionOptions};
use crate::store::Store;
use crate::trace::{Level, Trace};
use crate::workloads::{RecordOptions, WorkloadSpec, record_samples};

/// Training failures.
#[derive(Debug, Error)]
pub enum TrainError {
    /// The data carries no labels: a loss against hashed labels teaches
    /// nothing.
    #[error(
        "{dataset}: the data carries no labels its loss can use; training needs real labels — {hint}"
    )]
    NoLabels {
        /// Data set.
        dataset: String,
        /// What has them.
        hint: &'static str,
    },
    /// The workload has no real data to train on.
    #[error("workload {0} has no shipped data set to train on (see `engine workloads`)")]
    NoData(String),
    /// The loss became NaN or infinite.
    #[error(
        "epoch {epoch}, mini-batch {batch}: the loss is {loss} — training diverged (lower --lr, or --clip); nothing was written"
    )]
    NonFinite {
        /// Epoch.
        epoch: u32,
        /// Mini-batch index within the epoch.
        batch: usize,
        /// The loss.
        loss: f64,
    },
    /// An update made a parameter NaN or infinite.
    #[error(
        "epoch {epoch}, mini-batch {batch}: the update made parameter `{param}` of role `{role}` non-finite — training diverged (lower --lr, or --clip); nothing was written"
    )]
    NonFiniteUpdate {
        /// Epoch.
        epoch: u32,
        /// Mini-batch index within the epoch.
        batch: usize,
        /// The role.
        role: String,
        /// The parameter's name in the role's cell.
        param: String,
    },
    /// Replay failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// Recording a mini-batch failed.
    #[error(transparent)]
    Record(#[from] crate::workloads::RecordError),
    /// The data failed to load.
    #[error(transparent)]
    Data(#[from] crate::data::DataError),
    /// A checkpoint failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The executor could not be built for a mini-batch.
    #[error("{0}")]
    Executor(String),
    /// A mini-batch of a model folder's samples could not be cut out.
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    /// A model folder's weights do not fit its cells.
    #[error(transparent)]
    Weights(#[from] crate::modeldir::TensorsError),
}

/// Builds the forward executor and the backward policy (`None`: the forward
/// batches reversed) for one mini-batch's model (policies are stateful per
/// run; layouts are compiled per model).
pub type ExecutorFactory<'a> =
    dyn FnMut(&Model) -> Result<(Executor, Option<Box<dyn BatchPolicy + Send>>), String> + 'a;

/// What to train.
pub struct TrainConfig {
    /// Workload.
    pub workload: &'static WorkloadSpec,
    /// Training split.
    pub data: Dataset,
    /// Evaluation split (none: no evaluation).
    pub dev: Option<Dataset>,
    /// Samples per mini-batch.
    pub batch: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Epochs to reach (a resumed run continues up to this many).
    pub epochs: u32,
    /// Mini-batches per epoch at most (none: the whole split).
    pub max_batches: Option<usize>,
    /// Weight initialisation and shuffling seed.
    pub seed: u64,
    /// CPU threads and fusion.
    pub cpu: CpuOptions,
    /// Lazy batching of the weight gradients.
    pub train: TrainOptions,
    /// Where to checkpoint after every epoch.
    pub checkpoint: Option<PathBuf>,
    /// Continue from the checkpoint.
    pub resume: bool,
    /// The settings line recorded in the checkpoint (checked on resume).
    pub settings: String,
}

/// Called after every mini-batch: (epoch, batch index, batches in the epoch,
/// running mean loss per sample).
pub type Progress<'a> = dyn FnMut(u32, usize, usize, f64) + 'a;

/// Which split evaluates `data`.
pub fn dev_split(data: Dataset) -> Option<Dataset> {
    match data {
        Dataset::SstTrain => Some(Dataset::SstDev),
        Dataset::WeiboTrain => Some(Dataset::WeiboDev),
        _ => None,
    }
}

/// The samples `idx` of `s`, in that order.
fn select(s: &Structures, idx: &[usize]) -> Structures {
    fn pick<T: Clone>(v: &[T], idx: &[usize]) -> Vec<T> {
        idx.iter().map(|&i| v[i].clone()).collect()
    }
    match s {
        Structures::Trees(v) => Structures::Trees(pick(v, idx)),
        Structures::Sentences(v) => Structures::Sentences(pick(v, idx)),
        Structures::Pairs(v) => Structures::Pairs(pick(v, idx)),
        Structures::Lattices(v) => Structures::Lattices(pick(v, idx)),
    }
}

/// Does the data carry the labels a loss needs?
fn labelled(s: &Structures) -> bool {
    match s {
        Structures::Trees(v) => v.iter().all(|t| !t.labels.is_empty()),
        Structures::Sentences(v) => v.iter().all(|t| !t.tags.is_empty()),
        // Weibo's 18 tags are not recorded against the 9-class NER loss
        // (data/README.md), IWSLT has no annotations.
        Structures::Lattices(_) | Structures::Pairs(_) => false,
    }
}

fn record(
    cfg: &TrainConfig,
    cells: &CellLibrary,
    s: &Structures,
    seed: u64,
) -> Result<Trace, TrainError> {
    Ok(record_samples(
        &RecordOptions {
            workload: cfg.workload,
            data: crate::workloads::DataChoice::Default,
            batch: s.len(),
            hidden: cfg.hidden,
            level: Level::Cell,
            seed,
        },
        cells,
        s,
    )?)
}

/// A model of `trace` carrying `params`.
fn model_with(
    trace: &Trace,
    cells: &CellLibrary,
    seed: u64,
    params: &Tensors,
) -> Result<Model, TrainError> {
    let mut m = crate::model::model(trace, cells, seed)?;
    for (rm, p) in m.roles.iter_mut().zip(params) {
        rm.params.clone_from(p);
    }
    Ok(m)
}

/// Accuracy on `data`'s samples: (at the roots, over every labelled node).
pub fn evaluate(
    cfg: &TrainConfig,
    cells: &CellLibrary,
    data: &Structures,
    params: &Tensors,
) -> Result<(f64, f64), TrainError> {
    let (mut root, mut roots, mut all, mut nodes) = (0usize, 0usize, 0usize, 0usize);
    let idx: Vec<usize> = (0..data.len()).collect();
    for chunk in idx.chunks(cfg.batch.max(1)) {
        let trace = record(cfg, cells, &select(data, chunk), cfg.seed)?;
        let model = model_with(&trace, cells, cfg.seed, params)?;
        let opts = SessionOptions { cpu: cfg.cpu };
        let mut ex = Executor::Cavs;
        let mut s = Session::open_with(DeviceKind::Cpu, &trace, &model, cells, &mut ex, &opts)?;
        s.run()?;
        for (pred, label, is_root) in predictions(&trace, &model, s.outputs()) {
            let ok = usize::from(pred == label);
            all += ok;
            nodes += 1;
            if is_root {
                root += ok;
                roots += 1;
            }
        }
    }
    let frac = |a: usize, n: usize| if n == 0 { 0.0 } else { a as f64 / n as f64 };
    Ok((frac(root, roots), frac(all, nodes)))
}

/// The majority-class baseline on `data`: the accuracy of always answering
/// the most frequent label, (at the roots, over every labelled node) —
/// what a model must clearly beat to have learned anything.
pub fn majority(
    cfg: &TrainConfig,
    cells: &CellLibrary,
    data: &Structures,
) -> Result<(f64, f64), TrainError> {
    use std::collections::BTreeMap;
    let (mut roots, mut all) = (BTreeMap::<u32, usize>::new(), BTreeMap::<u32, usize>::new());
    let idx: Vec<usize> = (0..data.len()).collect();
    for chunk in idx.chunks(cfg.batch.max(1)) {
        let trace = record(cfg, cells, &select(data, chunk), cfg.seed)?;
        let model = crate::model::model(&trace, cells, cfg.seed)?;
        for (label, is_root) in labels(&trace, &model) {
            *all.entry(label).or_default() += 1;
            if is_root {
                *roots.entry(label).or_default() += 1;
            }
        }
    }
    let rate = |m: &BTreeMap<u32, usize>| {
        let n: usize = m.values().sum();
        let top = m.values().copied().max().unwrap_or(0);
        if n == 0 { 0.0 } else { top as f64 / n as f64 }
    };
    Ok((rate(&roots), rate(&all)))
}

/// For every loss node: its label (taken modulo the classes its pick-loss
/// reads) and whether it scores a root (its producer feeds nothing but
/// losses), in node order.
pub fn labels(trace: &Trace, model: &Model) -> Vec<(u32, bool)> {
    let g = &trace.graph;
    let is_loss = |role: usize| {
        model.roles[role]
            .cell
            .ops
            .iter()
            .any(|o| o.kind == PrimOp::PickLoss)
    };
    let mut out = Vec::new();
    for v in g.nodes() {
        let role = model.type_role[g.node_type(v).index()];
        let rm = &model.roles[role];
        let Some(pick) = rm.cell.ops.iter().find(|o| o.kind == PrimOp::PickLoss) else {
            continue;
        };
        let width = rm.cell.values[pick.args[0].index()].shape[0].max(1);
        let label = model.node_data(v).1 % width as u32;
        let is_root = g.args(v).iter().all(|&u| {
            g.users(u)
                .iter()
                .all(|&w: &NodeId| is_loss(model.type_role[g.node_type(w).index()]))
        });
        out.push((label, is_root));
    }
    out
}

/// For every loss node: the predicted class (argmax of its pick-loss
/// input, recomputed from the loss cell's input in the store), its label,
/// and whether it scores a root (its producer feeds nothing but losses).
pub fn predictions(trace: &Trace, model: &Model, store: &Store) -> Vec<(u32, u32, bool)> {
    let g = &trace.graph;
    let mut out = Vec::new();
    let mut labelled = labels(trace, model).into_iter();
    for v in g.nodes() {
        let role = model.type_role[g.node_type(v).index()];
        let rm = &model.roles[role];
        let Some(pick) = rm.cell.ops.iter().find(|o| o.kind == PrimOp::PickLoss) else {
            continue;
        };
        let (label, is_root) = labelled.next().expect("one label per loss node");
        let logits = crate::check::cell_value(trace, model, store, v, pick.args[0].index());
        let width = rm.cell.values[pick.args[0].index()].shape[0].max(1);
        let pred = logits
            .iter()
            .take(width)
            .enumerate()
            .fold((0usize, f64::NEG_INFINITY), |b, (i, &x)| {
                if x > b.1 { (i, x) } else { b }
            })
            .0 as u32;
        out.push((pred, label, is_root));
    }
    out
}

/// One training step on `trace`: forward and backward by `make`'s
/// executor, then one optimiser step on `params` (parameters a model shares
/// between roles get the sum of their gradients and stay equal). Returns
/// the loss.
#[allow(clippy::too_many_arguments)]
fn step(
    trace: &Trace,
    cells: &CellLibrary,
    seed: u64,
    cpu: &CpuOptions,
    train: &TrainOptions,
    params: &mut Tensors,
    make: &mut ExecutorFactory<'_>,
    opt: &mut Optimizer,
) -> Result<f64, StepError> {
    let model = model_with(trace, cells, seed, params)?;
    let (mut ex, mut back) = make(&model).map_err(TrainError::Executor)?;
    let opts = SessionOptions { cpu: *cpu };
    let mut s = Session::open_with(DeviceKind::Cpu, trace, &model, cells, &mut ex, &opts)?;
    let order = match back.as_mut() {
        Some(p) => BackwardSchedule::Policy(p.as_mut()),
        None => BackwardSchedule::ReverseForward,
    };
    let run = s.train(order, train)?;
    if !run.loss.is_finite() {
        return Err(StepError::NonFinite(run.loss));
    }
    let mut grads = s.gradients().expect("a training run");
    let ties = model.tied_params();
    for group in &ties {
        let (r0, v0) = group[0];
        for &(r, v) in &group[1..] {
            let g = std::mem::take(&mut grads[r][v]);
            for (a, b) in grads[r0][v0].iter_mut().zip(&g) {
                *a += b;
            }
            grads[r][v] = vec![0.0; g.len()];
        }
    }
    opt.step(params, &grads);
    // A finite loss can still take a step to infinity (a huge --lr): stop
    // here, before a checkpoint could record it.
    for (role, ps) in params.iter().enumerate() {
        if let Some(v) = ps.iter().position(|p| p.iter().any(|x| !x.is_finite())) {
            let rm = &model.roles[role];
            let name = rm
                .cell
                .values
                .get(v)
                .map_or_else(|| v.to_string(), |i| i.name.clone());
            return Err(StepError::NonFiniteUpdate(rm.role.role.clone(), name));
        }
    }
    for group in &ties {
        let (r0, v0) = group[0];
        let p = params[r0][v0].clone();
        for &(r, v) in &group[1..] {
            params[r][v].clone_from(&p);
        }
    }
    Ok(run.loss)
}

/// A failed [`step`], placed by [`StepError::at`].
enum StepError {
    NonFinite(f64),
    NonFiniteUpdate(String, String),
    Other(Box<TrainError>),
}

impl<E: Into<TrainError>> From<E> for StepError {
    fn from(e: E) -> Self {
        StepError::Other(Box::new(e.into()))
    }
}

impl StepError {
    fn at(self, epoch: u32, batch: usize) -> TrainError {
        match self {
            StepError::NonFinite(loss) => TrainError::NonFinite { epoch, batch, loss },
            StepError::NonFiniteUpdate(role, param) => TrainError::NonFiniteUpdate {
                epoch,
                batch,
                role,
                param,
            },
            StepError::Other(e) => *e,
        }
    }
}

/// Trains; returns every epoch's record (resumed ones included).
pub fn train(
    cfg: &TrainConfig,
    cells: &CellLibrary,
    make: &mut ExecutorFactory<'_>,
    optimizer: Optimizer,
    progress: &mut Progress<'_>,
) -> Result<Vec<EpochRecord>, TrainError> {
    let train_data = crate::data::load_embedded(cfg.data)?;
    if !labelled(&train_data) {
        return Err(TrainError::NoLabels {
            dataset: cfg.data.name().into(),
            hint: "SST trees (tree-lstm, tree-gru, mv-rnn, tree-lstm-2type, ...) and WikiNER tags (bilstm-tagger) carry them",
        });
    }
    let dev_data = cfg.dev.map(crate::data::load_embedded).transpose()?;
    // The initial parameters: the seeded model of a one-sample trace.
    let first = record(cfg, cells, &select(&train_data, &[0]), cfg.seed)?;
    let init = crate::model::model(&first, cells, cfg.seed)?;
    let mut params: Tensors = init.roles.iter().map(|r| r.params.clone()).collect();
    let mut opt = optimizer;
    let mut history = Vec::new();
    let mut done = 0;
    if cfg.resume {
        let path = cfg.checkpoint.as_ref().ok_or(TrainError::Executor(
            "--resume needs --checkpoint FILE".into(),
        ))?;
        let c = Checkpoint::read_for(path, &init)?;
        if c.settings != cfg.settings {
            return Err(TrainError::Executor(format!(
                "{}: written with other settings ({}); this run: {}",
                path.display(),
                c.settings,
                cfg.settings
            )));
        }
        params = c.params;
        opt = c.optimizer;
        history = c.history;
        done = c.epochs_done;
    }
    for epoch in done + 1..=cfg.epochs {
        let t0 = Instant::now();
        let mut order: Vec<usize> = (0..train_data.len()).collect();
        order.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(
            cfg.seed ^ (u64::from(epoch) << 32),
        ));
        let mut batches: Vec<&[usize]> = order.chunks(cfg.batch.max(1)).collect();
        if let Some(m) = cfg.max_batches {
            batches.truncate(m);
        }
        let (mut loss_sum, mut samples) = (0.0, 0usize);
        for (bi, idx) in batches.iter().enumerate() {
            let seed = cfg.seed ^ ((u64::from(epoch) << 32) | bi as u64);
            let trace = record(cfg, cells, &select(&train_data, idx), seed)?;
            let loss = step(
                &trace,
                cells,
                cfg.seed,
                &cfg.cpu,
                &cfg.train,
                &mut params,
                make,
                &mut opt,
            )
            .map_err(|e| e.at(epoch, bi))?;
            loss_sum += loss;
            samples += idx.len();
            progress(
                epoch,
                bi + 1,
                batches.len(),
                loss_sum / samples.max(1) as f64,
            );
        }
        let (dev_accuracy, dev_node_accuracy) = match &dev_data {
            Some(d) => {
                let (r, a) = evaluate(cfg, cells, d, &params)?;
                (Some(r), Some(a))
            }
            None => (None, None),
        };
        history.push(EpochRecord {
            epoch,
            train_loss: loss_sum / samples.max(1) as f64,
            dev_accuracy,
            dev_node_accuracy,
            seconds: t0.elapsed().as_secs_f64(),
        });
        if let Some(path) = &cfg.checkpoint {
            Checkpoint {
                format: CHECKPOINT_FORMAT.into(),
                version: CHECKPOINT_VERSION,
                workload: cfg.workload.name.into(),
                hidden: cfg.hidden,
                shapes: shapes(&init),
                params: params.clone(),
                optimizer: opt.clone(),
                epochs_done: epoch,
                history: history.clone(),
                settings: cfg.settings.clone(),
            }
            .write(path)?;
        }
    }
    Ok(history)
}

/// What to train when the model is a model folder's (`engine train
/// --model DIR`): its recorded samples are the data, cut into mini-batches
/// of `batch` samples ([`Trace::select_instances`]); there is no dev split.
pub struct FolderConfig {
    /// The folder's trace (all its samples).
    pub trace: Trace,
    /// Its weights: the initial parameters.
    pub weights: crate::modeldir::Tensors,
    /// Samples per mini-batch.
    pub batch: usize,
    /// Epochs to reach.
    pub epochs: u32,
    /// Mini-batches per epoch at most.
    pub max_batches: Option<usize>,
    /// Shuffling seed (and the seed of data the trace does not record).
    pub seed: u64,
    /// CPU threads and fusion.
    pub cpu: CpuOptions,
    /// Lazy batching of the weight gradients.
    pub train: TrainOptions,
    /// Where to checkpoint after every epoch.
    pub checkpoint: Option<PathBuf>,
    /// Continue from the checkpoint.
    pub resume: bool,
    /// The settings line recorded in the checkpoint.
    pub settings: String,
}

/// Trains a model folder's model on its own samples; returns every epoch's
/// record (no dev accuracy).
pub fn train_folder(
    cfg: &FolderConfig,
    cells: &CellLibrary,
    make: &mut ExecutorFactory<'_>,
    optimizer: Optimizer,
    progress: &mut Progress<'_>,
) -> Result<Vec<EpochRecord>, TrainError> {
    let mut init = crate::model::model(&cfg.trace, cells, cfg.seed)?;
    init.load_weights(&cfg.weights)?;
    let instances = cfg.trace.instances();
    if instances.is_empty() {
        return Err(TrainError::Executor(
            "the model folder's trace has no samples (no node has an instance)".into(),
        ));
    }
    let mut params: Tensors = init.roles.iter().map(|r| r.params.clone()).collect();
    let mut opt = optimizer;
    let mut history = Vec::new();
    let mut done = 0;
    if cfg.resume {
        let path = cfg.checkpoint.as_ref().ok_or(TrainError::Executor(
            "--resume needs --checkpoint FILE".into(),
        ))?;
        let c = Checkpoint::read_for(path, &init)?;
        if c.settings != cfg.settings {
            return Err(TrainError::Executor(format!(
                "{}: written with other settings ({}); this run: {}",
                path.display(),
                c.settings,
                cfg.settings
            )));
        }
        params = c.params;
        opt = c.optimizer;
        history = c.history;
        done = c.epochs_done;
    }
    for epoch in done + 1..=cfg.epochs {
        let t0 = Instant::now();
        let mut order = instances.clone();
        order.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(
            cfg.seed ^ (u64::from(epoch) << 32),
        ));
        let mut batches: Vec<&[u32]> = order.chunks(cfg.batch.max(1)).collect();
        if let Some(m) = cfg.max_batches {
            batches.truncate(m);
        }
        let (mut loss_sum, mut samples) = (0.0, 0usize);
        for (bi, idx) in batches.iter().enumerate() {
            let trace = cfg.trace.select_instances(idx)?;
            let loss = step(
                &trace,
                cells,
                cfg.seed,
                &cfg.cpu,
                &cfg.train,
                &mut params,
                make,
                &mut opt,
            )
            .map_err(|e| e.at(epoch, bi))?;
            loss_sum += loss;
            samples += idx.len();
            progress(
                epoch,
                bi + 1,
                batches.len(),
                loss_sum / samples.max(1) as f64,
            );
        }
        history.push(EpochRecord {
            epoch,
            train_loss: loss_sum / samples.max(1) as f64,
            dev_accuracy: None,
            dev_node_accuracy: None,
            seconds: t0.elapsed().as_secs_f64(),
        });
        if let Some(path) = &cfg.checkpoint {
            Checkpoint {
                format: CHECKPOINT_FORMAT.into(),
                version: CHECKPOINT_VERSION,
                workload: cfg.trace.workload.clone(),
                hidden: init.hidden,
                shapes: shapes(&init),
                params: params.clone(),
                optimizer: opt.clone(),
                epochs_done: epoch,
                history: history.clone(),
                settings: cfg.settings.clone(),
            }
            .write(path)?;
        }
    }
    Ok(history)
}
