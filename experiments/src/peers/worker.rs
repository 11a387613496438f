//! The batchlab worker: one executor on one trace in a process of its own,
//! so batchlab's systems are measured the way the peers are (fresh process,
//! warm-up, timed runs, wall and process CPU time per run).
//!
//! Flags: `--trace T.json --seed S --system NAME --repeats R --threads N
//! --result OUT.json [--policy P.yaml] [--layouts DIR] [--train 1]`, or
//! `--model DIR` (a model folder: its trace, cells and weights) instead of
//! `--trace`.
//! `--threads` is the session's CPU thread count; `--train 1` times training
//! steps (forward, then the backward in the forward batches' reverse order,
//! weight gradients batched lazily) instead of the forward alone. The result is written atomically to
//! `--result`; exit status 0, or 2 with the error on standard error.

use std::path::{Path, PathBuf};

use engine::backend::cpu::CpuOptions;
use engine::backend::vpps;
use engine::cells::CellLibrary;
use engine::device::DeviceKind;
use engine::executor::{Executor, compile_layouts};
use engine::layout::LayoutFile;
use engine::model::{self, Model};
use engine::run::TimeSplit;
use engine::sched::{FsmPolicy, PolicyFile, heuristic};
use engine::session::{Session, SessionOptions};
use engine::trace::Trace;
use serde::Serialize;

use super::cputime::process_cpu_s;
use super::{System, parse_system};
use crate::config::ExecutorChoice;

/// The worker's result file.
#[derive(Serialize)]
pub(crate) struct WorkerResult {
    pub system: String,
    pub version: String,
    pub policy: Option<String>,
    pub instances: usize,
    pub batches: u64,
    /// FSM decisions in states the policy file does not hold (forward).
    pub misses: u64,
    pub kernels: u64,
    pub construction_s: f64,
    pub scheduling_s: f64,
    pub execution_s: f64,
    pub total_s: f64,
    pub cpu_s: f64,
    pub samples: Vec<f64>,
    pub cpu_samples: Vec<f64>,
    pub loss: f64,
    /// Training: median backward seconds (null for inference).
    pub backward_s: Option<f64>,
    /// Training: backward batches.
    pub backward_batches: Option<u64>,
}

struct Flags {
    trace: Option<PathBuf>,
    model: Option<PathBuf>,
    seed: u64,
    system: String,
    repeats: usize,
    threads: usize,
    result: PathBuf,
    policy: Option<PathBuf>,
    layouts: Option<PathBuf>,
    train: bool,
    device: DeviceKind,
}

fn parse(args: &[String]) -> Result<Flags, String> {
    let mut get = std::collections::BTreeMap::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {flag:?}"))?;
        if ![
            "trace", "model", "seed", "system", "repeats", "threads", "result", "policy",
            "layouts", "train", "device",
        ]
        .contains(&name)
        {
            return Err(format!("unknown flag --{name}"));
        }
        let v = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
        get.insert(name.to_string(), v.clone());
    }
    let need = |k: &str| get.get(k).cloned().ok_or_else(|| format!("missing --{k}"));
    let num = |k: &str| -> Result<u64, String> {
        need(k)?.parse().map_err(|_| format!("--{k}: not a number"))
    };
    if get.contains_key("trace") == get.contains_key("model") {
        return Err("give one of --trace and --model".into());
    }
    Ok(Flags {
        trace: get.get("trace").map(PathBuf::from),
        model: get.get("model").map(PathBuf::from),
        seed: num("seed")?,
        system: need("system")?,
        repeats: (num("repeats")? as usize).max(1),
        threads: match num("threads")? {
            0 => return Err("--threads must be at least 1".into()),
            t => t as usize,
        },
        result: need("result")?.into(),
        policy: get.get("policy").map(PathBuf::from),
        layouts: get.get("layouts").map(PathBuf::from),
        train: match get.get("train").map(String::as_str) {
            None | Some("0") => false,
            Some("1") => true,
            Some(v) => return Err(format!("--train {v}: expected 0 or 1")),
        },
        device: match get.get("device") {
            None => DeviceKind::Cpu,
            Some(d) => DeviceKind::parse(d).map_err(|e| format!("--device {d}: {e}"))?,
        },
    })
}

/// Runs the worker with `args` (the flags above); returns the exit status.
pub fn worker_main(args: &[String]) -> i32 {
    match parse(args).and_then(|f| work(&f)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

fn layouts(model: &Model, dir: &Path, planned: bool) -> Result<Vec<(String, LayoutFile)>, String> {
    let mut files: Vec<(String, LayoutFile)> = Vec::new();
    for rm in &model.roles {
        let name = &rm.cell.name;
        if files.iter().any(|(_, f)| f.cell == *name) {
            continue;
        }
        let path = dir.join(if planned {
            format!("{name}.json")
        } else {
            format!("{name}.baseline.json")
        });
        let f = LayoutFile::read(&path).map_err(|e| e.to_string())?;
        files.push((path.display().to_string(), f));
    }
    Ok(files)
}

fn executor(f: &Flags, model: &Model) -> Result<(Executor, Option<String>), String> {
    let Some(System::Batchlab(choice)) = parse_system(&f.system) else {
        return Err(format!("--system {}: not a batchlab executor", f.system));
    };
    let fsm = || -> Result<(Box<FsmPolicy>, String), String> {
        let p = f.policy.as_ref().ok_or("this executor needs --policy")?;
        let file = PolicyFile::read(p).map_err(|e| e.to_string())?;
        let label = format!("fsm({})", file.encoding.name());
        Ok((
            Box::new(FsmPolicy::new(file).map_err(|e| e.to_string())?),
            label,
        ))
    };
    Ok(match choice {
        ExecutorChoice::Reference => (Executor::Reference, None),
        ExecutorChoice::Cavs => (Executor::Cavs, Some("cavs".into())),
        ExecutorChoice::Dynet(h) | ExecutorChoice::Policy(Some(h)) => {
            let p = heuristic(h).ok_or_else(|| format!("unknown heuristic {h}"))?;
            let ex = if matches!(choice, ExecutorChoice::Dynet(_)) {
                Executor::Dynet(p)
            } else {
                Executor::Policy(p)
            };
            (ex, Some(h.to_string()))
        }
        ExecutorChoice::Policy(None) => {
            let (p, label) = fsm()?;
            (Executor::Policy(p), Some(label))
        }
        ExecutorChoice::EdBatch { planned } => {
            let dir = f.layouts.as_ref().ok_or("edbatch needs --layouts")?;
            let files = layouts(model, dir, planned)?;
            let programs = compile_layouts(model, &files).map_err(|e| e.to_string())?;
            let (p, label) = fsm()?;
            (Executor::EdBatch(p, programs), Some(label))
        }
        // A CUDA session runs it; a CPU session refuses it by name.
        ExecutorChoice::Vpps(h) => {
            let p = heuristic(h).ok_or_else(|| format!("unknown heuristic {h}"))?;
            (
                Executor::Vpps(p, vpps::VppsOptions::default()),
                Some(h.to_string()),
            )
        }
    })
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn work(f: &Flags) -> Result<(), String> {
    let (cells, trace, weights) = match (&f.trace, &f.model) {
        (Some(t), _) => (
            CellLibrary::builtin().map_err(|e| e.to_string())?,
            Trace::read(t).map_err(|e| e.to_string())?,
            None,
        ),
        (None, Some(d)) => {
            let dir = engine::modeldir::ModelDir::open(d).map_err(|e| e.to_string())?;
            let w = dir.weights().clone();
            (dir.cells, dir.trace, Some(w))
        }
        (None, None) => return Err("give one of --trace and --model".into()),
    };
    let mut model = model::model(&trace, &cells, f.seed).map_err(|e| e.to_string())?;
    if let Some(w) = &weights {
        model.load_weights(w).map_err(|e| e.to_string())?;
    }
    let (mut ex, policy) = executor(f, &model)?;
    let opts = SessionOptions {
        cpu: CpuOptions {
            threads: Some(f.threads),
            ..CpuOptions::default()
        },
    };
    engine::device::check_available(f.device).map_err(|e| e.to_string())?;
    let mut session = Session::open_with(f.device, &trace, &model, &cells, &mut ex, &opts)
        .map_err(|e| e.to_string())?;
    if f.train {
        return train(f, &mut session, policy);
    }
    // Warm-up, then each timed run on its own so its CPU time is its own.
    session.run().map_err(|e| e.to_string())?;
    let mut splits = Vec::with_capacity(f.repeats);
    let mut cpu = Vec::with_capacity(f.repeats);
    let mut first = None;
    for _ in 0..f.repeats {
        let c0 = process_cpu_s();
        let r = session.run().map_err(|e| e.to_string())?;
        cpu.push(process_cpu_s() - c0);
        splits.push(r.time.clone());
        first.get_or_insert(r);
    }
    let m = first.ok_or("no timed run")?;
    let out = session.outputs();
    let g = &trace.graph;
    let loss: f64 = g
        .nodes()
        .filter(|&v| model.role_of(g, v).role.loss)
        .map(|v| {
            let role = model.type_role[g.node_type(v).index()];
            out.output(v, role, 0)
                .iter()
                .map(|&x| f64::from(x))
                .sum::<f64>()
        })
        .sum();
    let col = |k: fn(&TimeSplit) -> f64| median(&splits.iter().map(k).collect::<Vec<_>>());
    let samples: Vec<f64> = splits
        .iter()
        .map(|t| t.construction + t.scheduling + t.execution)
        .collect();
    let r = WorkerResult {
        system: f.system.clone(),
        version: format!("batchlab {}", env!("CARGO_PKG_VERSION")),
        policy,
        instances: g.num_instances(),
        batches: m.counters.batches,
        misses: m.misses,
        kernels: m.counters.kernels,
        construction_s: col(|t| t.construction),
        scheduling_s: col(|t| t.scheduling),
        execution_s: col(|t| t.execution),
        total_s: median(&samples),
        cpu_s: median(&cpu),
        samples,
        cpu_samples: cpu,
        loss,
        backward_s: None,
        backward_batches: None,
    };
    let json = serde_json::to_vec(&r).map_err(|e| e.to_string())?;
    engine::io::write_atomic(&f.result, &json).map_err(|e| format!("{}: {e}", f.result.display()))
}

/// Training steps: warm-up, then each timed step on its own (its CPU time
/// its own). `scheduling_s` + `execution_s` are the forward's, `backward_s`
/// the backward's, `samples` whole steps.
fn train(f: &Flags, session: &mut Session<'_>, policy: Option<String>) -> Result<(), String> {
    let trace = session.trace();
    use engine::run::{BackwardSchedule, TrainOptions};
    let topts = TrainOptions { lazy: true };
    let step = |session: &mut Session<'_>| {
        session
            .train(BackwardSchedule::ReverseForward, &topts)
            .map_err(|e| e.to_string())
    };
    step(session)?;
    let mut runs = Vec::with_capacity(f.repeats);
    let mut cpu = Vec::with_capacity(f.repeats);
    for _ in 0..f.repeats {
        let c0 = process_cpu_s();
        let r = step(session)?;
        cpu.push(process_cpu_s() - c0);
        runs.push(r);
    }
    let first = runs.first().ok_or("no timed run")?;
    let col =
        |k: &dyn Fn(&engine::run::TrainRun) -> f64| median(&runs.iter().map(k).collect::<Vec<_>>());
    let samples: Vec<f64> = runs
        .iter()
        .map(|r| r.forward.time.total() + r.backward.time.total())
        .collect();
    let r = WorkerResult {
        system: f.system.clone(),
        version: format!("batchlab {}", env!("CARGO_PKG_VERSION")),
        policy,
        instances: trace.graph.num_instances(),
        batches: first.forward.counters.batches,
        misses: first.forward.misses,
        kernels: first.forward.counters.kernels + first.backward.counters.kernels,
        construction_s: col(&|r| r.forward.time.construction + r.backward.time.construction),
        scheduling_s: col(&|r| r.forward.time.scheduling),
        execution_s: col(&|r| r.forward.time.execution),
        total_s: median(&samples),
        cpu_s: median(&cpu),
        samples,
        cpu_samples: cpu,
        loss: first.loss,
        backward_s: Some(col(&|r| r.backward.time.total())),
        backward_batches: Some(first.backward.counters.batches),
    };
    let json = serde_json::to_vec(&r).map_err(|e| e.to_string())?;
    engine::io::write_atomic(&f.result, &json).map_err(|e| format!("{}: {e}", f.result.display()))
}
