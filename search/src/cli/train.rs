//! `search train`: Q-learning on one trace, one encoding or all five in
//! parallel (rayon; each run is deterministic for its seed, so running them
//! side by side changes only wall time), writing the best policy file.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use engine::sched::{Encoding, Hyperparameters, SameTypeDag};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use rayon::prelude::*;
use search::export::policy_file;
use search::trainer::{TrainConfig, Trained, default_hyperparameters, train};
use serde::Serialize;

/// Arguments of `search train`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace to train on (engine record output).
    #[arg(long)]
    trace: PathBuf,
    /// State encoding: base, max, sort, sort-cond, sort-phase, or `all` (train
    /// the five in parallel and keep the one with fewest batches; ties go to
    /// the earlier in that list).
    #[arg(long, default_value = "sort", value_parser = parse_encodings)]
    encoding: Encodings,
    /// Q update step size [default: 0.4].
    #[arg(long)]
    learning_rate: Option<f64>,
    /// Discount γ [default: 1.0].
    #[arg(long)]
    gamma: Option<f64>,
    /// Exploration rate of the first episode [default: 0.5].
    #[arg(long)]
    epsilon: Option<f64>,
    /// Factor applied to ε after every episode [default: 0.9].
    #[arg(long)]
    epsilon_decay: Option<f64>,
    /// Lowest ε [default: 0.05].
    #[arg(long)]
    epsilon_floor: Option<f64>,
    /// Bootstrapping horizon N of N-step Q-learning [default: 10].
    #[arg(long)]
    n_step: Option<u32>,
    /// Episode budget [default: 1000].
    #[arg(long)]
    episodes: Option<u32>,
    /// A greedy rollout (and early-stop check) every this many episodes [default: 50].
    #[arg(long)]
    rollout_every: Option<u32>,
    /// Weight α of the sufficient-condition term of the reward, ED-Batch Eq. 1 [default: 0.5].
    #[arg(long)]
    alpha: Option<f64>,
    /// Stop once a rollout has at most stop-ratio × lower bound batches [default: 1.01].
    #[arg(long)]
    stop_ratio: Option<f64>,
    /// Seed of the exploration stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Policy file to write (YAML, atomically).
    #[arg(long)]
    out: PathBuf,
    /// Print JSON instead of text (and no progress bar).
    #[arg(long)]
    json: bool,
}

/// The `--encoding` value.
#[derive(Clone, Debug)]
pub struct Encodings(Vec<Encoding>);

fn parse_encodings(s: &str) -> Result<Encodings, String> {
    if s == "all" {
        return Ok(Encodings(Encoding::ALL.to_vec()));
    }
    Encoding::parse(s)
        .map(|e| Encodings(vec![e]))
        .ok_or_else(|| {
            let names: Vec<&str> = Encoding::ALL.iter().map(|e| e.name()).collect();
            format!(
                "unknown encoding {s:?}: expected one of {}, all",
                names.join(", ")
            )
        })
}

impl Args {
    /// Defaults overridden by the flags given, checked for sane ranges.
    fn hyperparameters(&self) -> anyhow::Result<Hyperparameters> {
        let mut h = default_hyperparameters();
        h.learning_rate = self.learning_rate.unwrap_or(h.learning_rate);
        h.gamma = self.gamma.unwrap_or(h.gamma);
        h.epsilon_start = self.epsilon.unwrap_or(h.epsilon_start);
        h.epsilon_decay = self.epsilon_decay.unwrap_or(h.epsilon_decay);
        h.epsilon_floor = self.epsilon_floor.unwrap_or(h.epsilon_floor);
        h.n_step = self.n_step.unwrap_or(h.n_step);
        h.max_episodes = self.episodes.unwrap_or(h.max_episodes);
        h.rollout_every = self.rollout_every.unwrap_or(h.rollout_every);
        h.alpha = self.alpha.unwrap_or(h.alpha);
        h.stop_ratio = self.stop_ratio.unwrap_or(h.stop_ratio);
        let unit = |name: &str, v: f64, lo_open: bool| -> anyhow::Result<()> {
            let ok = v.is_finite() && v <= 1.0 && if lo_open { v > 0.0 } else { v >= 0.0 };
            if !ok {
                let lo = if lo_open { "(0" } else { "[0" };
                bail!("--{name} must be in {lo}, 1], got {v}");
            }
            Ok(())
        };
        unit("learning-rate", h.learning_rate, true)?;
        unit("gamma", h.gamma, false)?;
        unit("epsilon", h.epsilon_start, false)?;
        unit("epsilon-decay", h.epsilon_decay, false)?;
        unit("epsilon-floor", h.epsilon_floor, false)?;
        if h.n_step == 0 {
            bail!("--n-step must be at least 1");
        }
        if h.rollout_every == 0 {
            bail!("--rollout-every must be at least 1");
        }
        if !(h.alpha.is_finite() && h.alpha >= 0.0) {
            bail!("--alpha must be a non-negative number, got {}", h.alpha);
        }
        if !(h.stop_ratio.is_finite() && h.stop_ratio >= 0.0) {
            bail!(
                "--stop-ratio must be a non-negative number, got {}",
                h.stop_ratio
            );
        }
        Ok(h)
    }
}

/// One training run in `--json` output.
#[derive(Serialize)]
struct Run {
    encoding: &'static str,
    episodes: u32,
    best_batches: u64,
    lower_bound: u64,
    ratio: f64,
    best_episode: u32,
    stop_reason: &'static str,
    states: usize,
    seconds: f64,
    node_steps_per_s: f64,
}

/// `search train --json` output: the kept run's fields, plus every run.
#[derive(Serialize)]
struct Summary {
    out: String,
    trace: String,
    workload: String,
    nodes: usize,
    seed: u64,
    #[serde(flatten)]
    chosen: Run,
    runs: Vec<Run>,
}

fn run_row(t: &Trained, states: usize) -> Run {
    let r = &t.report;
    Run {
        encoding: r.encoding.name(),
        episodes: r.episodes,
        best_batches: r.best_batches,
        lower_bound: r.lower_bound,
        ratio: super::ratio(r.best_batches, r.lower_bound),
        best_episode: r.best_episode,
        stop_reason: r.stop_reason.name(),
        states,
        seconds: r.seconds,
        node_steps_per_s: if r.seconds > 0.0 {
            r.node_steps as f64 / r.seconds
        } else {
            0.0
        },
    }
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let hyper = a.hyperparameters()?;
    let trace = super::load::trace(&a.trace)?;
    let st = SameTypeDag::new(&trace.graph);
    let show_bars = !a.json && std::io::stderr().is_terminal();
    let multi = MultiProgress::new();
    let style = ProgressStyle::with_template("{prefix:>10} {bar:30} {pos}/{len} episodes {msg}")
        .context("progress bar template")?;
    let encodings = &a.encoding.0;
    let bars: Vec<ProgressBar> = encodings
        .iter()
        .map(|e| {
            if !show_bars {
                return ProgressBar::hidden();
            }
            let b = multi.add(ProgressBar::new(u64::from(hyper.max_episodes)));
            b.set_style(style.clone());
            b.set_prefix(e.name());
            b
        })
        .collect();
    let results: Vec<Trained> = encodings
        .par_iter()
        .zip(bars.par_iter())
        .map(|(&encoding, bar)| {
            let cfg = TrainConfig {
                encoding,
                hyper: hyper.clone(),
                seed: a.seed,
            };
            let mut progress = |episode: u32, best: u64| {
                bar.set_position(u64::from(episode));
                bar.set_message(format!("best {best} batches"));
            };
            let t = train(&trace.graph, &st, &cfg, &mut progress);
            bar.finish();
            t
        })
        .collect();
    // Fewest batches; `min_by_key` keeps the first of equals, i.e. the earlier encoding.
    let Some(best_idx) = (0..results.len()).min_by_key(|&i| results[i].report.best_batches) else {
        bail!("no encoding to train");
    };
    let trace_name = a.trace.display().to_string();
    let files: Vec<_> = results
        .iter()
        .map(|t| policy_file(t, &trace, &trace_name, &hyper, a.seed))
        .collect();
    write_policy(&files[best_idx], &a.out)?;
    let summary = Summary {
        out: a.out.display().to_string(),
        trace: trace_name,
        workload: trace.workload.clone(),
        nodes: trace.graph.len(),
        seed: a.seed,
        chosen: run_row(&results[best_idx], files[best_idx].states.len()),
        runs: results
            .iter()
            .zip(&files)
            .map(|(t, f)| run_row(t, f.states.len()))
            .collect(),
    };
    if a.json {
        return super::print_json(&summary);
    }
    print_table(&summary);
    Ok(())
}

fn write_policy(file: &engine::sched::PolicyFile, out: &Path) -> anyhow::Result<()> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating output folder {}", dir.display()))?;
    }
    Ok(file.write(out)?)
}

fn print_table(s: &Summary) {
    engine::outln!(
        "{} ({}, {} nodes), lower bound {}, seed {}",
        s.trace,
        s.workload,
        s.nodes,
        s.chosen.lower_bound,
        s.seed
    );
    engine::outln!(
        "{:<11} {:>8} {:>8} {:>7} {:>9} {:<12} {:>7} {:>9} {:>12}",
        "encoding",
        "episodes",
        "batches",
        "ratio",
        "best@ep",
        "stop",
        "states",
        "seconds",
        "node steps/s"
    );
    for r in &s.runs {
        engine::outln!(
            "{:<11} {:>8} {:>8} {:>7.3} {:>9} {:<12} {:>7} {:>9.4} {:>12.3e}",
            r.encoding,
            r.episodes,
            r.best_batches,
            r.ratio,
            r.best_episode,
            r.stop_reason,
            r.states,
            r.seconds,
            r.node_steps_per_s
        );
    }
    engine::outln!(
        "wrote {} (encoding {}, {} batches, {} states)",
        s.out,
        s.chosen.encoding,
        s.chosen.best_batches,
        s.chosen.states
    );
}
