//! `search bench`: the figures of docs/benchmarks.md's "Policy search" section
//! without criterion — environment step throughput, FSM decision latency, and
//! training time per workload.

use std::time::Instant;

use anyhow::{Context, bail};
use engine::cells::CellLibrary;
use engine::graph::{Graph, TypeId};
use engine::sched::{
    BatchPolicy, Choice, Encoding, Frontier, FsmPolicy, Hyperparameters, SameTypeDag,
};
use engine::trace::{Level, Trace};
use engine::workloads::{self, DataChoice, RecordOptions};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use search::export::policy_file;
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

/// Environment throughput: random-policy episodes on lattice-lstm.
#[derive(Serialize)]
struct EnvStep {
    workload: &'static str,
    nodes: usize,
    episodes: u32,
    node_steps_per_s: f64,
    decisions_per_s: f64,
}

/// FSM decision latency on a trained policy.
#[derive(Serialize)]
struct Decision {
    workload: &'static str,
    encoding: &'static str,
    states: usize,
    misses_per_episode: u64,
    decisions_per_episode: u64,
    /// Per decision: choose() alone, on the frontier of every decision of
    /// an episode (snapshots taken beforehand).
    ns_per_choose: f64,
    /// Per decision: an FSM-driven episode minus the same episode replaying
    /// the recorded choices (only the steps); a cross-check, noisier.
    ns_per_choose_by_difference: f64,
    /// Per decision, including the step.
    ns_per_decision_with_step: f64,
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
    env_step: EnvStep,
    fsm_decision: Decision,
    training: Vec<Training>,
}

const HIDDEN: usize = 64;
/// The engine's default record seed, as in docs/results/policies.md.
const RECORD_SEED: u64 = 7;
const ENV_WORKLOAD: &str = "lattice-lstm";
/// The workload of the decision benchmark: the one whose trained policy
/// covers its trace (elsewhere typewise already gives the best rollout at
/// episode 0, the kept table is empty, and every decision is a fallback).
const FSM_WORKLOAD: &str = "tree-lstm-2type";

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
    let lattice = record(ENV_WORKLOAD, a.batch)?;
    let st = SameTypeDag::new(&lattice.graph);
    let env_step = env_step(&lattice.graph, &st);
    let fsm_trace = record(FSM_WORKLOAD, a.batch)?;
    let fsm_decision = decision(&fsm_trace, &SameTypeDag::new(&fsm_trace.graph))?;
    let mut training = Vec::new();
    for n in &names {
        training.push(training_time(n, a.batch, a.repeat).with_context(|| n.clone())?);
    }
    let r = Report {
        batch: a.batch,
        hidden: HIDDEN,
        env_step,
        fsm_decision,
        training,
    };
    if a.json {
        return super::print_json(&r);
    }
    print_report(&r);
    Ok(())
}

/// Random-policy episodes for at least half a second.
fn env_step(g: &Graph, st: &SameTypeDag) -> EnvStep {
    let mut f = Frontier::new(g, st);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut ready: Vec<TypeId> = Vec::new();
    let mut out = Vec::new();
    let (mut steps, mut decisions, mut episodes) = (0u64, 0u64, 0u32);
    let start = Instant::now();
    while episodes < 3 || start.elapsed().as_secs_f64() < 0.5 {
        f.reset();
        while !f.is_done() {
            ready.clear();
            ready.extend(f.ready_types());
            let t = ready[rng.random_range(0..ready.len())];
            out.clear();
            steps += f.step(t, &mut out) as u64;
            decisions += 1;
        }
        episodes += 1;
    }
    let s = start.elapsed().as_secs_f64();
    EnvStep {
        workload: ENV_WORKLOAD,
        nodes: g.len(),
        episodes,
        node_steps_per_s: steps as f64 / s,
        decisions_per_s: decisions as f64 / s,
    }
}

/// Replays a fixed choice sequence: the baseline that costs only the steps.
fn run_choices(f: &mut Frontier, choices: &[TypeId], out: &mut Vec<engine::graph::NodeId>) {
    f.reset();
    for &t in choices {
        out.clear();
        f.step(t, out);
    }
}

fn run_fsm(f: &mut Frontier, fsm: &mut FsmPolicy, out: &mut Vec<engine::graph::NodeId>) -> u64 {
    f.reset();
    let mut n = 0;
    while !f.is_done() {
        let t = match fsm.choose(f) {
            Choice::All(t) | Choice::AtDepth(t, _) => t,
        };
        out.clear();
        f.step(t, out);
        fsm.executed(f.graph(), out);
        n += 1;
    }
    n
}

/// The stateless encoding (one that does not follow the remaining bound, so
/// `choose()` can be timed on frontier snapshots) whose trained policy misses
/// least on its own trace (ties by encoding order), so the latency measured
/// is that of table hits. The sort-crit encodings' extra per-step work is
/// the criterion bench `remaining_bound`.
fn decision(trace: &Trace, st: &SameTypeDag) -> anyhow::Result<Decision> {
    let g = &trace.graph;
    let hyper = default_hyperparameters();
    let mut f = Frontier::new(g, st);
    let mut out = Vec::new();
    let mut best: Option<(u64, Encoding, FsmPolicy, Vec<TypeId>, usize)> = None;
    for encoding in Encoding::ALL.into_iter().filter(|e| !e.needs_bound()) {
        let cfg = TrainConfig {
            encoding,
            hyper: hyper.clone(),
            seed: 1,
        };
        let trained = train(g, st, &cfg, &mut |_, _| {});
        let file = policy_file(&trained, trace, "bench", &hyper, 1);
        let states = file.states.len();
        let mut fsm = FsmPolicy::new(file)?;
        fsm.prepare(g)?;
        // The choice sequence, for the replay baseline.
        let mut choices = Vec::new();
        f.reset();
        while !f.is_done() {
            let t = match fsm.choose(&f) {
                Choice::All(t) | Choice::AtDepth(t, _) => t,
            };
            choices.push(t);
            out.clear();
            f.step(t, &mut out);
            fsm.executed(g, &out);
        }
        let misses = fsm.misses();
        if best.as_ref().is_none_or(|b| misses < b.0) {
            best = Some((misses, encoding, fsm, choices, states));
        }
    }
    let Some((misses, encoding, mut fsm, choices, states)) = best else {
        bail!("no encoding trained");
    };
    // The frontier before every decision, to time choose() alone.
    let mut snapshots = Vec::with_capacity(choices.len());
    f.reset();
    for &t in &choices {
        snapshots.push(f.clone());
        out.clear();
        f.step(t, &mut out);
    }
    let rounds = 200;
    let timed = |work: &mut dyn FnMut()| {
        let mut v = Vec::with_capacity(5);
        for _ in 0..5 {
            let s = Instant::now();
            for _ in 0..rounds {
                work();
            }
            v.push(s.elapsed().as_secs_f64());
        }
        super::median(v)
    };
    let choose_only = timed(&mut || {
        for s in &snapshots {
            std::hint::black_box(fsm.choose(s));
        }
    });
    let with_fsm = timed(&mut || {
        run_fsm(&mut f, &mut fsm, &mut out);
    });
    let mut f2 = Frontier::new(g, st);
    let replay = timed(&mut || run_choices(&mut f2, &choices, &mut out));
    let decisions = choices.len() as f64 * f64::from(rounds);
    Ok(Decision {
        workload: FSM_WORKLOAD,
        encoding: encoding.name(),
        states,
        misses_per_episode: misses,
        decisions_per_episode: choices.len() as u64,
        ns_per_choose: 1e9 * choose_only / decisions,
        ns_per_choose_by_difference: 1e9 * (with_fsm - replay) / decisions,
        ns_per_decision_with_step: 1e9 * with_fsm / decisions,
    })
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
    let e = &r.env_step;
    engine::outln!(
        "env step ({}, batch {}, {} nodes, random policy, {} episodes): {:.1} M node executions/s, {:.2} M decisions/s",
        e.workload,
        r.batch,
        e.nodes,
        e.episodes,
        e.node_steps_per_s / 1e6,
        e.decisions_per_s / 1e6
    );
    let d = &r.fsm_decision;
    engine::outln!(
        "FSM decision ({}, {}, {} states, {} decisions/episode, {} misses): {:.1} ns per choose() ({:.1} ns by difference of episodes), {:.1} ns per decision with its step",
        d.workload,
        d.encoding,
        d.states,
        d.decisions_per_episode,
        d.misses_per_episode,
        d.ns_per_choose,
        d.ns_per_choose_by_difference,
        d.ns_per_decision_with_step
    );
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
