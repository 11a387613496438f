//! `search bench`: the FSM training time per workload of docs/benchmarks.md's
//! "Policy search" section, end to end with process CPU time beside wall
//! time (the two schemes interleaved). The hot paths inside it (environment
//! steps, FSM decisions, the remaining bound, the optimiser) are criterion's:
//! `cargo bench -p search --bench policy`.

use anyhow::{Context, bail};
use engine::cells::CellLibrary;
use engine::sched::{Encoding, Hyperparameters, SameTypeDag};
use engine::trace::{Level, Trace};
use engine::workloads::{self, DataChoice, RecordOptions};
use search::trainer::{TrainConfig, default_hyperparameters, reference_hyperparameters, train};
use serde::Serialize;

/// Arguments of `search bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workloads whose training time to measure (repeatable; default: all).
    #[arg(long = "workload")]
    workloads: Vec<String>,
    /// Mini-batch size of every trace. [range: 1 to 1000000]
    #[arg(long, default_value_t = 32, value_parser = engine::tool::int_in(engine::tool::ranges::BATCH))]
    batch: usize,
    /// Timed repetitions of each training run (interleaved, the order of
    /// the schemes rotating each round); the median is reported. [range: 1 to 100000]
    #[arg(long, default_value_t = 5, value_parser = engine::tool::int_in(engine::tool::ranges::REPEAT))]
    repeat: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Training time of one workload, for the default scheme (sort-crit, key
/// exploration, bound reward) and the reference one (sort, ε-greedy per
/// step, Eq. 1) — ED-Batch Table 4's setting.
#[derive(Serialize)]
struct Training {
    workload: String,
    nodes: usize,
    lower_bound: u64,
    /// Default scheme, default settings (early stop on).
    best_batches: u64,
    episodes: u32,
    best_episode: u32,
    stop_reason: &'static str,
    seconds: f64,
    /// Default scheme, exactly 1000 episodes (early stop off): median wall
    /// seconds and median process CPU seconds.
    seconds_1000_episodes: f64,
    cpu_seconds_1000_episodes: f64,
    /// Reference scheme, exactly 1000 episodes: median wall and CPU seconds.
    reference_seconds_1000_episodes: f64,
    reference_cpu_seconds_1000_episodes: f64,
    /// Batches of each scheme's policy after 1000 episodes.
    batches_1000_episodes: u64,
    reference_batches_1000_episodes: u64,
}

/// CPU seconds used by this process so far (Linux `/proc/self/stat`, user +
/// system, at the kernel's fixed 100 ticks per second); 0 elsewhere.
fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = stat.rsplit_once(')').map_or("", |r| r.1);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// `search bench --json` output.
#[derive(Serialize)]
struct Report {
    batch: usize,
    hidden: usize,
    training: Vec<Training>,
}

const HIDDEN: usize = 64;
/// The engine's default record seed, as in docs/results/policies.md.
const RECORD_SEED: u64 = 7;
fn record(name: &str, batch: usize) -> anyhow::Result<Trace> {
    let Some(w) = workloads::workload(name) else {
        bail!("unknown workload {name:?}");
    };
    let cells = CellLibrary::builtin()?;
    Ok(workloads::record(
        &RecordOptions {
            workload: w,
            data: DataChoice::Default,
            batch,
            hidden: HIDDEN,
            level: Level::Cell,
            seed: RECORD_SEED,
        },
        &cells,
    )?)
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let names: Vec<String> = if a.workloads.is_empty() {
        workloads::WORKLOADS
            .iter()
            .map(|w| w.name.to_string())
            .collect()
    } else {
        a.workloads.clone()
    };
    let mut training = Vec::new();
    for n in &names {
        training.push(training_time(n, a.batch, a.repeat).with_context(|| n.clone())?);
    }
    let r = Report {
        batch: a.batch,
        hidden: HIDDEN,
        training,
    };
    if a.json {
        return super::print_json(&r);
    }
    print_report(&r);
    Ok(())
}

fn training_time(name: &str, batch: usize, repeat: usize) -> anyhow::Result<Training> {
    let trace = record(name, batch)?;
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let train_one = |encoding: Encoding, hyper: Hyperparameters| {
        let cfg = TrainConfig {
            encoding,
            hyper,
            seed: 1,
        };
        let cpu = process_cpu_seconds();
        let t = train(g, &st, &cfg, &mut |_, _| {});
        (t.report.seconds, process_cpu_seconds() - cpu, t)
    };
    let full = |h: Hyperparameters| Hyperparameters {
        stop_ratio: 0.0,
        max_episodes: 1000,
        ..h
    };
    let schemes = [
        (Encoding::SortCrit, full(default_hyperparameters())),
        (Encoding::Sort, full(reference_hyperparameters())),
    ];
    let mut wall = [Vec::new(), Vec::new()];
    let mut cpu = [Vec::new(), Vec::new()];
    let mut batches = [0u64; 2];
    for round in 0..repeat {
        for k in 0..2 {
            let i = (round + k) % 2;
            let (w, c, t) = train_one(schemes[i].0, schemes[i].1.clone());
            wall[i].push(w);
            cpu[i].push(c);
            batches[i] = t.report.best_batches;
        }
    }
    let mut default_wall = Vec::with_capacity(repeat);
    let mut kept = None;
    for _ in 0..repeat {
        let (w, _, t) = train_one(Encoding::SortCrit, default_hyperparameters());
        default_wall.push(w);
        kept = Some(t);
    }
    let Some(t) = kept else {
        bail!("no training run");
    };
    let r = &t.report;
    let [w0, w1] = wall;
    let [c0, c1] = cpu;
    Ok(Training {
        workload: name.to_string(),
        nodes: g.len(),
        lower_bound: r.lower_bound,
        best_batches: r.best_batches,
        episodes: r.episodes,
        best_episode: r.best_episode,
        stop_reason: r.stop_reason.name(),
        seconds: super::median(default_wall),
        seconds_1000_episodes: super::median(w0),
        cpu_seconds_1000_episodes: super::median(c0),
        reference_seconds_1000_episodes: super::median(w1),
        reference_cpu_seconds_1000_episodes: super::median(c1),
        batches_1000_episodes: batches[0],
        reference_batches_1000_episodes: batches[1],
    })
}

fn print_report(r: &Report) {
    engine::outln!(
        "{:<20} {:>6} {:>5} {:>8} {:>8} {:>8} {:<12} {:>9} | {:>18} {:>18}",
        "training",
        "nodes",
        "lb",
        "batches",
        "episodes",
        "best@ep",
        "stop",
        "seconds",
        "1000 ep wall/cpu",
        "reference wall/cpu"
    );
    for t in &r.training {
        engine::outln!(
            "{:<20} {:>6} {:>5} {:>8} {:>8} {:>8} {:<12} {:>9.4} | {:>8.4}/{:<9.3} {:>8.4}/{:<9.3}",
            t.workload,
            t.nodes,
            t.lower_bound,
            t.best_batches,
            t.episodes,
            t.best_episode,
            t.stop_reason,
            t.seconds,
            t.seconds_1000_episodes,
            t.cpu_seconds_1000_episodes,
            t.reference_seconds_1000_episodes,
            t.reference_cpu_seconds_1000_episodes
        );
    }
}
