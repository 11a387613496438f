//! `search train`: Q-learning on one trace, one encoding or all of them in
//! parallel (rayon; each run is deterministic for its seed, so running them
//! side by side changes only wall time), writing the best policy file.
//! `--teacher` distils a schedule into the FSM first: a schedule file, or
//! `optimise` to compute the best-known one here (`search optimise`).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use engine::sched::{Encoding, Exploration, Hyperparameters, Reward, SameTypeDag};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use rayon::prelude::*;
use search::bound::{BoundConfig, certify};
use search::export::policy_file;
use search::optimise::{OptimiseConfig, optimise};
use search::schedule_file::ScheduleFile;
use search::trainer::{
    Rollout, Teacher, TrainConfig, Trained, default_hyperparameters, reference_hyperparameters,
    train_with,
};
use serde::Serialize;

/// Arguments of `search train`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The pass to batch: `forward`, or `backward` — the trace's graph
    /// reversed (a node's gradient is ready once all its users have run), the
    /// schedule the backward pass of `engine train` batches.
    #[arg(long, default_value = "forward", value_parser = ["forward", "backward"])]
    pass: String,
    /// Trace to train on (engine record output).
    #[arg(long)]
    trace: PathBuf,
    /// State encoding: base, max, sort, sort-cond, sort-phase, sort-crit,
    /// sort-crit-ratio, or `all` (train them all in parallel and keep the one
    /// with fewest batches; ties go to the earlier in that list).
    #[arg(long, default_value = "sort", value_parser = parse_encodings)]
    encoding: Encodings,
    /// Q update step size [default: 0.4]. [range: above 0 to 1]
    #[arg(long, value_parser = engine::tool::real_in(0.0, true, 1.0))]
    learning_rate: Option<f64>,
    /// Discount γ [default: 1.0]. [range: 0 to 1]
    #[arg(long, value_parser = engine::tool::real_in(0.0, false, 1.0))]
    gamma: Option<f64>,
    /// Exploration rate of the first episode [default: 0.5]. [range: 0 to 1]
    #[arg(long, value_parser = engine::tool::real_in(0.0, false, 1.0))]
    epsilon: Option<f64>,
    /// Factor applied to ε after every episode [default: 0.9]. [range: 0 to 1]
    #[arg(long, value_parser = engine::tool::real_in(0.0, false, 1.0))]
    epsilon_decay: Option<f64>,
    /// Lowest ε [default: 0.05]. [range: 0 to 1]
    #[arg(long, value_parser = engine::tool::real_in(0.0, false, 1.0))]
    epsilon_floor: Option<f64>,
    /// Bootstrapping horizon N of N-step Q-learning [default: 10]. [range: 1 to 10000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::N_STEP))]
    n_step: Option<u32>,
    /// Episode budget [default: 1000]. [range: 1 to 100000000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::EPISODES))]
    episodes: Option<u32>,
    /// A greedy rollout (and early-stop check) every this many episodes [default: 50]. [range: 1 to 100000000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::ROLLOUT_EVERY))]
    rollout_every: Option<u32>,
    /// Weight α of the sufficient-condition term of the reward, ED-Batch Eq. 1 [default: 0.5]. [range: 0 to 1000]
    #[arg(long, value_parser = engine::tool::real_in(0.0, false, 1000.0))]
    alpha: Option<f64>,
    /// Stop once a rollout has at most stop-ratio × lower bound batches [default: 1.01]. [range: 0 to 1000]
    #[arg(long, value_parser = engine::tool::real_in(0.0, false, 1000.0))]
    stop_ratio: Option<f64>,
    /// Reward: `bound` (−1 shaped by the remaining lower bound) or `eq1`
    /// (ED-Batch Eq. 1) [default: bound].
    #[arg(long, value_parser = parse_reward)]
    reward: Option<Reward>,
    /// Exploration: `key` (every episode runs one perturbed FSM, kept when
    /// no worse) or `step` (ε-greedy per decision, the reference scheme)
    /// [default: key].
    #[arg(long, value_parser = parse_exploration)]
    exploration: Option<Exploration>,
    /// The reference implementation's settings (Eq. 1 reward, step
    /// exploration); other flags still override them.
    #[arg(long)]
    reference: bool,
    /// Schedule to distil into the FSM first: a schedule file (`search
    /// optimise --out`) of this trace, or `optimise` to compute the best-known
    /// schedule here within --teacher-budget. Training then also stops when
    /// the FSM reaches the schedule's certified bound.
    #[arg(long)]
    teacher: Option<String>,
    /// Time for `--teacher optimise` (bound and search together). [range: 0s to 168h]
    #[arg(long, default_value = "10s", value_parser = engine::tool::duration_in(engine::tool::ranges::BUDGET_S))]
    teacher_budget: std::time::Duration,
    /// Seed of the exploration stream. [range: any 64-bit number]
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

fn parse_reward(s: &str) -> Result<Reward, String> {
    match s {
        "bound" => Ok(Reward::Bound),
        "eq1" => Ok(Reward::Eq1),
        _ => Err(format!("unknown reward {s:?}: expected bound or eq1")),
    }
}

fn parse_exploration(s: &str) -> Result<Exploration, String> {
    match s {
        "key" => Ok(Exploration::Key),
        "step" => Ok(Exploration::Step),
        _ => Err(format!("unknown exploration {s:?}: expected key or step")),
    }
}

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
        let mut h = if self.reference {
            reference_hyperparameters()
        } else {
            default_hyperparameters()
        };
        h.reward = self.reward.unwrap_or(h.reward);
        h.exploration = self.exploration.unwrap_or(h.exploration);
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
        // Each value was checked in range by its flag's parser.
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
    prior_batches: u64,
    teacher_batches: Option<u64>,
    best_heuristic: String,
    best_heuristic_batches: u64,
    fallback: Option<String>,
    stop_reason: &'static str,
    states: usize,
    seconds: f64,
    node_steps_per_s: f64,
    curve: Vec<Rollout>,
}

/// `search train --json` output: the kept run's fields, plus every run.
#[derive(Serialize)]
struct Summary {
    out: String,
    trace: String,
    workload: String,
    nodes: usize,
    seed: u64,
    teacher: Option<TeacherInfo>,
    #[serde(flatten)]
    chosen: Run,
    runs: Vec<Run>,
}

/// Where the teacher came from, in `--json` output.
#[derive(Clone, Serialize)]
struct TeacherInfo {
    source: String,
    batches: u64,
    certified_bound: u64,
    seconds: f64,
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
        prior_batches: r.prior_batches,
        teacher_batches: r.teacher.as_ref().map(|t| t.batches),
        best_heuristic: r.best_heuristic.0.clone(),
        best_heuristic_batches: r.best_heuristic.1,
        fallback: r.fallback.clone(),
        curve: r.rollouts.clone(),
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

/// The teacher named by `--teacher`, and what to report about it.
fn teacher(
    a: &Args,
    trace: &engine::trace::Trace,
    st: &SameTypeDag,
) -> anyhow::Result<Option<(Teacher, TeacherInfo)>> {
    let Some(spec) = &a.teacher else {
        return Ok(None);
    };
    let g = &trace.graph;
    let started = std::time::Instant::now();
    let spinner = if !a.json && std::io::stderr().is_terminal() {
        let b = ProgressBar::new_spinner();
        b.set_message(format!(
            "--teacher {spec}: best-known schedule and certified bound"
        ));
        b.enable_steady_tick(std::time::Duration::from_millis(200));
        b
    } else {
        ProgressBar::hidden()
    };
    let (schedule, bound, source) = if spec == "optimise" {
        let b = certify(
            g,
            &BoundConfig {
                budget: a.teacher_budget.mul_f64(0.25),
                known: search::optimise::heuristic_batches(g, st),
                ..BoundConfig::default()
            },
        );
        let cfg = OptimiseConfig {
            budget: a.teacher_budget.saturating_sub(started.elapsed()),
            target: b.bound,
            ..OptimiseConfig::default()
        };
        let r = optimise(g, st, &cfg, &mut |_, _| {})
            .with_context(|| format!("--teacher optimise on {}", a.trace.display()))?;
        (r.schedule, b.bound, "optimise".to_string())
    } else {
        let file = ScheduleFile::read(std::path::Path::new(spec))?;
        let s = file.to_schedule(g, spec)?;
        (s, file.certified_bound, spec.clone())
    };
    spinner.finish_and_clear();
    let info = TeacherInfo {
        source: source.clone(),
        batches: schedule.len() as u64,
        certified_bound: bound,
        seconds: started.elapsed().as_secs_f64(),
    };
    let t = Teacher {
        types: schedule.batches().map(|(t, _)| t).collect(),
        source,
        bound: Some(bound),
    };
    Ok(Some((t, info)))
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let hyper = a.hyperparameters()?;
    // The trace and, when it is a model folder's, the rest of that folder.
    let traces = engine::modeldir::ModelDir::with_its_folder(&a.trace);
    let mut inputs: Vec<(&str, &std::path::Path)> =
        traces.iter().map(|p| ("--trace", p.as_path())).collect();
    if let Some(t) = a.teacher.as_deref().filter(|t| *t != "optimise") {
        inputs.push(("--teacher", std::path::Path::new(t)));
    }
    engine::io::distinct_outputs(&inputs, &[("--out", &a.out)])?;
    let mut trace = super::load::trace(&a.trace)?;
    if a.pass == "backward" {
        trace.graph = trace.graph.reversed();
    }
    search::trainer::check_trainable(&trace.graph)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.trace.display()))?;
    let st = SameTypeDag::new(&trace.graph);
    let teacher = teacher(&a, &trace, &st)?;
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
            let t = train_with(
                &trace.graph,
                &st,
                &cfg,
                teacher.as_ref().map(|t| &t.0),
                &mut progress,
            );
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
        .map(|t| {
            let mut f = policy_file(t, &trace, &trace_name, &hyper, a.seed);
            f.pass = (a.pass == "backward").then(|| "backward".to_string());
            f
        })
        .collect();
    write_policy(&files[best_idx], &a.out)?;
    let summary = Summary {
        out: a.out.display().to_string(),
        trace: trace_name,
        workload: trace.workload.clone(),
        nodes: trace.graph.len(),
        seed: a.seed,
        teacher: teacher.as_ref().map(|t| t.1.clone()),
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
    if let Some(t) = &s.teacher {
        engine::outln!(
            "teacher {}: {} batches, certified bound {} ({:.2} s)",
            t.source,
            t.batches,
            t.certified_bound,
            t.seconds
        );
    }
    engine::outln!(
        "{:<15} {:>8} {:>6} {:>8} {:>7} {:>8} {:<12} {:>7} {:>8}  curve (best every rollout)",
        "encoding",
        "episodes",
        "prior",
        "batches",
        "ratio",
        "best@ep",
        "stop",
        "states",
        "seconds",
    );
    for r in &s.runs {
        let curve: Vec<String> = r.curve.iter().map(|p| p.best.to_string()).collect();
        let mut curve = curve.join(" ");
        if curve.len() > 60 {
            curve.truncate(57);
            curve.push_str("...");
        }
        engine::outln!(
            "{:<15} {:>8} {:>6} {:>8} {:>7.3} {:>8} {:<12} {:>7} {:>8.4}  {}{}",
            r.encoding,
            r.episodes,
            r.prior_batches,
            r.best_batches,
            r.ratio,
            r.best_episode,
            r.stop_reason,
            r.states,
            r.seconds,
            curve,
            r.fallback
                .as_ref()
                .map(|f| format!(" (worse than {f}: its fallback, empty table)"))
                .unwrap_or_default()
        );
    }
    engine::outln!(
        "wrote {} (encoding {}, {} batches, {} states; best heuristic {} {})",
        s.out,
        s.chosen.encoding,
        s.chosen.best_batches,
        s.chosen.states,
        s.chosen.best_heuristic,
        s.chosen.best_heuristic_batches
    );
}
