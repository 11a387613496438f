//! `engine train`: train a workload's model on its real data (forward and
//! backward by any executor, SGD or Adam), evaluate on the dev split every
//! epoch, checkpoint atomically, resume.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{Context, bail};
use engine::backend::cpu::CpuOptions;
use engine::cells::CellLibrary;
use engine::data::Dataset;
use engine::executor::Executor;
use engine::model::Model;
use engine::run::TrainOptions;
use engine::sched::BatchPolicy;
use engine::train::checkpoint::EpochRecord;
use engine::train::optim::{Optimizer, Rule};
use engine::train::run::{TrainConfig, dev_split, majority, train};
use engine::workloads::{self, DefaultData};
use serde::Serialize;

/// Arguments of `engine train`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workload to train (`engine workloads`); its data must carry labels
    /// (SST trees, WikiNER tags).
    #[arg(long, required_unless_present = "model", conflicts_with = "model")]
    workload: Option<String>,
    /// A model folder (docs/torch.md): train its model, from its weights,
    /// on its own recorded samples (--batch samples per mini-batch; no dev
    /// split).
    #[arg(long, conflicts_with_all = ["data", "dev", "hidden"])]
    model: Option<PathBuf>,
    /// Training split (default: the workload's real data set).
    #[arg(long)]
    data: Option<String>,
    /// Evaluation split (default: the training split's dev split; `none`).
    #[arg(long)]
    dev: Option<String>,
    /// Epochs to reach (a resumed run continues up to this many). [range: 1 to 100000]
    #[arg(long, default_value_t = 1, value_parser = engine::tool::int_in(engine::tool::ranges::EPOCHS))]
    epochs: u32,
    /// Samples per mini-batch. [range: 1 to 1000000]
    #[arg(long, default_value_t = 25, value_parser = engine::tool::int_in(engine::tool::ranges::BATCH))]
    batch: usize,
    /// Hidden size. [range: 1 to 65536]
    #[arg(long, default_value_t = 64, value_parser = engine::tool::int_in(engine::tool::ranges::HIDDEN))]
    hidden: usize,
    /// At most this many mini-batches per epoch, at least 1 (default: the
    /// whole split). [range: 1 to 100000000]
    #[arg(long, value_parser = parse_max_batches)]
    max_batches: Option<usize>,
    /// Executor, `NAME[:POLICY]` as `engine replay --executor` takes it:
    /// reference, dynet, cavs, policy, edbatch, edbatch-nolayout.
    #[arg(long, default_value = "cavs")]
    executor: String,
    /// Forward batching policy (as `engine replay --policy`).
    #[arg(long)]
    policy: Option<String>,
    /// Backward batches: `reverse` (the forward batches in reverse order, as
    /// Cavs and DyNet do; the default), a heuristic on the reversed graph, or
    /// an FSM from `search train --pass backward`.
    #[arg(long, default_value = "reverse")]
    backward_policy: String,
    /// Layout folder for edbatch* (as `engine replay --layouts`).
    #[arg(long)]
    layouts: Option<PathBuf>,
    /// `adam` or `sgd`.
    #[arg(long, default_value = "adam", value_parser = ["adam", "sgd"])]
    optimizer: String,
    /// Learning rate. [range: above 0 to 1e38]
    #[arg(long, default_value_t = 0.01, value_parser = parse_lr)]
    lr: f32,
    /// Rescale gradients whose global L2 norm exceeds this (0: never).
    /// [range: 0 to 1e38]
    #[arg(long, default_value_t = 5.0, value_parser = parse_clip)]
    clip: f32,
    /// Weight-gradient products per batch instead of once per parameter at
    /// the end of the backward pass (the lazy-batching ablation).
    #[arg(long)]
    eager: bool,
    /// Row passes per in-cell batch instead of fused per instance.
    #[arg(long)]
    no_fuse: bool,
    /// CPU threads (default: the machine's parallelism). [range: 1 to 4096]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::THREADS))]
    threads: Option<usize>,
    /// Seed of the weights and of the shuffling. [range: any 64-bit number]
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Checkpoint file, written atomically after every epoch.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Continue from --checkpoint (same model and settings).
    #[arg(long, requires = "checkpoint")]
    resume: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    workload: String,
    /// With --model: the folder.
    model: Option<String>,
    data: String,
    dev: Option<String>,
    executor: String,
    optimizer: String,
    lr: f32,
    batch: usize,
    hidden: usize,
    lazy: bool,
    fused: bool,
    threads: usize,
    /// The dev split's majority-class accuracy (root, all nodes): the
    /// baseline a trained model must beat.
    dev_majority: Option<Majority>,
    epochs: Vec<EpochRecord>,
    seconds: f64,
}

#[derive(Serialize)]
struct Majority {
    root: f64,
    node: f64,
}

fn dataset(name: &str, flag: &str) -> anyhow::Result<Dataset> {
    Dataset::ALL
        .into_iter()
        .find(|d| d.name() == name)
        .with_context(|| {
            let names: Vec<&str> = Dataset::ALL.iter().map(|d| d.name()).collect();
            format!(
                "{flag} {name}: unknown data set (expected one of {})",
                names.join(", ")
            )
        })
}

pub fn run(a: Args) -> anyhow::Result<()> {
    // The checkpoint may not land on what the run reads. (With --resume it
    // is read and rewritten: it is the run's own file, not an input.)
    if let Some(checkpoint) = &a.checkpoint {
        let mut owned = super::source_inputs(&a.model, &None);
        owned.extend(a.layouts.clone().map(|l| ("--layouts", l)));
        owned.extend(super::policy_input("--policy", a.policy.as_deref()));
        owned.extend(super::policy_input(
            "--backward-policy",
            Some(&a.backward_policy),
        ));
        engine::io::distinct_outputs(&super::pairs(&owned), &[("--checkpoint", checkpoint)])?;
    }
    if let Some(dir) = a.model.clone() {
        return run_folder(a, &dir);
    }
    let name = a.workload.clone().unwrap_or_default();
    let Some(w) = workloads::workload(&name) else {
        bail!("--workload {name}: unknown workload (see `engine workloads`)");
    };
    let data = match &a.data {
        Some(d) => dataset(d, "--data")?,
        None => match w.default_data {
            DefaultData::Real(d) => d,
            DefaultData::Synthetic => bail!(
                "--workload {}: its data is synthetic (no labels to learn); give --data with a labelled data set",
                w.name
            ),
        },
    };
    let dev = match a.dev.as_deref() {
        Some("none") => None,
        Some(d) => Some(dataset(d, "--dev")?),
        None => dev_split(data),
    };
    let cells = CellLibrary::builtin()?;
    let cpu = CpuOptions {
        threads: a.threads,
        fuse: !a.no_fuse,
    };
    let settings = format!(
        "workload {} data {} batch {} hidden {} executor {} optimizer {} lr {} clip {} seed {}",
        w.name,
        data.name(),
        a.batch,
        a.hidden,
        a.executor,
        a.optimizer,
        a.lr,
        a.clip,
        a.seed
    );
    let cfg = TrainConfig {
        workload: w,
        data,
        dev,
        batch: a.batch,
        hidden: a.hidden,
        epochs: a.epochs,
        max_batches: a.max_batches,
        seed: a.seed,
        cpu,
        train: TrainOptions { lazy: !a.eager },
        checkpoint: a.checkpoint.clone(),
        resume: a.resume,
        settings,
    };
    let optimizer = optimizer(&a);
    let backward = super::replay::backward_policy(&a.backward_policy)?;
    let replay_args =
        super::replay::Args::for_training(&a.executor, a.policy.clone(), a.layouts.clone());
    type Made = (Executor, Option<Box<dyn BatchPolicy + Send>>);
    let mut make = |model: &Model| -> Result<Made, String> {
        let ex = super::replay::executor(&replay_args, model).map_err(|e| format!("{e:#}"))?;
        let back = match &backward {
            Some(arg) => Some(arg.instantiate().map_err(|e| e.to_string())?),
            None => None,
        };
        Ok((ex, back))
    };
    let bar = bar(a.json)?;
    let mut progress = |epoch: u32, done: usize, total: usize, loss: f64| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_prefix(epoch.to_string());
        bar.set_message(format!("loss {loss:.4}"));
    };
    let t0 = std::time::Instant::now();
    let history = train(&cfg, &cells, &mut make, optimizer, &mut progress)?;
    bar.finish_and_clear();
    let dev_majority = match dev {
        Some(d) => {
            let (root, node) = majority(&cfg, &cells, &engine::data::load_embedded(d)?)?;
            Some(Majority { root, node })
        }
        None => None,
    };
    let report = Report {
        workload: w.name.into(),
        model: None,
        data: data.name().into(),
        dev: dev.map(|d| d.name().to_string()),
        executor: a.executor.clone(),
        optimizer: a.optimizer.clone(),
        lr: a.lr,
        batch: a.batch,
        hidden: a.hidden,
        lazy: !a.eager,
        fused: !a.no_fuse,
        threads: cpu.thread_count(),
        dev_majority,
        epochs: history,
        seconds: t0.elapsed().as_secs_f64(),
    };
    print(&report, a.json)
}

/// The optimiser the flags ask for.
fn optimizer(a: &Args) -> Optimizer {
    let rule = if a.optimizer == "sgd" {
        Rule::Sgd
    } else {
        Optimizer::adam(a.lr, None).rule
    };
    Optimizer::new(rule, a.lr, (a.clip > 0.0).then_some(a.clip))
}

/// A progress bar on a terminal (hidden under --json or in a pipe).
fn bar(json: bool) -> anyhow::Result<indicatif::ProgressBar> {
    Ok(if !json && std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "epoch {prefix} {bar:30} {pos}/{len} mini-batches {msg}",
            )
            .context("progress template")?,
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    })
}

/// `engine train --model DIR`: the folder's model on its own samples.
fn run_folder(a: Args, dir: &std::path::Path) -> anyhow::Result<()> {
    let folder = engine::modeldir::ModelDir::open(dir)?;
    let cpu = CpuOptions {
        threads: a.threads,
        fuse: !a.no_fuse,
    };
    let settings = format!(
        "model {} batch {} executor {} optimizer {} lr {} clip {} seed {}",
        folder.manifest.name, a.batch, a.executor, a.optimizer, a.lr, a.clip, a.seed
    );
    let cfg = engine::train::run::FolderConfig {
        trace: folder.trace.clone(),
        weights: folder.weights().clone(),
        batch: a.batch,
        epochs: a.epochs,
        max_batches: a.max_batches,
        seed: a.seed,
        cpu,
        train: TrainOptions { lazy: !a.eager },
        checkpoint: a.checkpoint.clone(),
        resume: a.resume,
        settings,
    };
    let backward = super::replay::backward_policy(&a.backward_policy)?;
    let replay_args =
        super::replay::Args::for_training(&a.executor, a.policy.clone(), a.layouts.clone());
    type Made = (Executor, Option<Box<dyn BatchPolicy + Send>>);
    let mut make = |model: &Model| -> Result<Made, String> {
        let ex = super::replay::executor(&replay_args, model).map_err(|e| format!("{e:#}"))?;
        let back = match &backward {
            Some(arg) => Some(arg.instantiate().map_err(|e| e.to_string())?),
            None => None,
        };
        Ok((ex, back))
    };
    let bar = bar(a.json)?;
    let mut progress = |epoch: u32, done: usize, total: usize, loss: f64| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_prefix(epoch.to_string());
        bar.set_message(format!("loss {loss:.4}"));
    };
    let t0 = std::time::Instant::now();
    let history = engine::train::run::train_folder(
        &cfg,
        &folder.cells,
        &mut make,
        optimizer(&a),
        &mut progress,
    )?;
    bar.finish_and_clear();
    let report = Report {
        workload: folder.manifest.name.clone(),
        model: Some(dir.display().to_string()),
        data: "recorded".into(),
        dev: None,
        executor: a.executor.clone(),
        optimizer: a.optimizer.clone(),
        lr: a.lr,
        batch: a.batch,
        hidden: folder.manifest.hidden as usize,
        lazy: !a.eager,
        fused: !a.no_fuse,
        threads: cpu.thread_count(),
        dev_majority: None,
        epochs: history,
        seconds: t0.elapsed().as_secs_f64(),
    };
    print(&report, a.json)
}

fn print(report: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        return crate::cli::print_json(report);
    }
    if let Some(m) = &report.dev_majority {
        engine::outln!(
            "dev majority class: {:.1} % at the roots, {:.1} % over all nodes",
            100.0 * m.root,
            100.0 * m.node
        );
    }
    for e in &report.epochs {
        let acc = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1} %", 100.0 * v));
        if report.dev.is_none() {
            engine::outln!(
                "epoch {:>3}: train loss {:.4} per sample; {:.2} s",
                e.epoch,
                e.train_loss,
                e.seconds
            );
            continue;
        }
        engine::outln!(
            "epoch {:>3}: train loss {:.4} per sample; dev accuracy {} at the roots, {} over all nodes; {:.1} s",
            e.epoch,
            e.train_loss,
            acc(e.dev_accuracy),
            acc(e.dev_node_accuracy),
            e.seconds
        );
    }
    Ok(())
}

/// `--lr`: finite and above 0 (NaN or inf would train to a non-finite
/// checkpoint; 0 or less trains nothing or the wrong way).
fn parse_lr(s: &str) -> Result<f32, String> {
    engine::tool::real_in(0.0, true, 1e38)(s)
        .map(|v| v as f32)
        .map_err(|e| format!("{e}: not a learning rate"))
}

/// `--clip`: finite and 0 or more (0: never clip).
fn parse_clip(s: &str) -> Result<f32, String> {
    engine::tool::real_in(0.0, false, 1e38)(s)
        .map(|v| v as f32)
        .map_err(|e| format!("{e}: not a gradient norm (0: never clip)"))
}

/// `--max-batches`: at least 1 (0 would train nothing and report a loss).
fn parse_max_batches(s: &str) -> Result<usize, String> {
    if s.trim() == "0" {
        return Err(
            "0 trains nothing: give at least 1 (or leave it out for the whole split)".into(),
        );
    }
    engine::tool::int_in(engine::tool::ranges::MAX_BATCHES)(s)
}
