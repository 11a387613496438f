//! `paper-repro model`: a report on one model folder (a model recorded from
//! PyTorch, `docs/torch.md`): batches per policy beside the certified lower
//! bound, the planner's copies per cell, and step times — batchlab's
//! executors, and, with `--torch SETUP`, the user's own eager loop,
//! `bt.run` by depth, by agenda and by the learned FSM and any hand-written
//! baseline of the setup — all on the folder's weights, inference and
//! training, in processes timed round by round in a rotated order.
//!
//! Measuring ([`measure`]) writes `OUT/rows/model.jsonl`; reporting
//! ([`report::write`]) draws `OUT/REPORT.md`, `OUT/model-steps.{png,svg}`
//! and CSV tables from the rows and the folder alone, so `--redraw`
//! rebuilds them without measuring.

pub mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use engine::modeldir::ModelDir;
use engine::sched::{Encoding, PolicyArg, SameTypeDag, run_policy};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ReproError, Result};

/// `paper-repro model` arguments.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ModelArgs {
    /// The model folder.
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// The user's PyTorch setup for the PyTorch rows: `FILE.py:FUNC` or
    /// `module:FUNC`, a function of the folder returning the model, its
    /// cells and its samples (docs/torch.md); run in the project's Python
    /// environment.
    #[arg(long, value_name = "SETUP")]
    pub torch: Option<String>,
    /// Timed rounds; every round runs each system once, in an order rotated
    /// every round [default: 5, 3 with --quick]. [range: 1 to 1000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::ROUNDS))]
    pub rounds: Option<usize>,
    /// Timed mini-batches per process (their median is the round's time)
    /// [default: 3, 1 with --quick]. [range: 1 to 100000]
    #[arg(long, value_parser = engine::tool::int_in(engine::tool::ranges::REPEAT))]
    pub repeats: Option<usize>,
    /// Seconds one measuring process (a system's round: the setup, one
    /// untimed and the timed mini-batches) may run before it is killed and
    /// its row fails naming this flag; also bounds the setup's `--list`
    /// call. [range: 1 to 604800]
    #[arg(long, default_value_t = 1800, value_parser = engine::tool::int_in(engine::tool::ranges::TIMEOUT_S))]
    pub timeout: u64,
    /// CPU threads of every system. [range: 1 to 4096]
    #[arg(long, default_value_t = 1, value_parser = engine::tool::int_in(engine::tool::ranges::THREADS))]
    pub threads: usize,
    /// Inference only (no training steps).
    #[arg(long)]
    pub no_train: bool,
    /// Redraw REPORT.md and the figure from OUT/rows without measuring.
    #[arg(long)]
    pub redraw: bool,
    /// A trace of the same model built in, recorded on the same samples
    /// (e.g. `engine record --workload tree-lstm` on the trees the folder
    /// was recorded on): batchlab's executors also run on it, with its own
    /// FSM and layouts, and the report gives the imported model's time ÷
    /// the built-in's per executor.
    #[arg(long, value_name = "TRACE")]
    pub builtin: Option<PathBuf>,
}

/// The batchlab executors timed (the batchlab worker's system names).
pub const BATCHLAB: [&str; 5] = ["reference", "dynet", "cavs", "policy:fsm", "edbatch"];

/// The prefix of a batchlab executor's system name when it runs on the
/// `--builtin` trace (family `built-in`): `built-in:cavs`.
pub const BUILTIN: &str = "built-in:";

/// One timed process: a system's mini-batches in one round.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// `inference` or `training`.
    pub mode: String,
    /// Round (0-based).
    pub round: usize,
    /// Its position in the round's order.
    pub slot: usize,
    /// `batchlab` or `pytorch`.
    pub family: String,
    /// The system.
    pub system: String,
    /// Median wall seconds of a mini-batch (a step when training).
    pub total_s: Option<f64>,
    /// Median process CPU seconds of one.
    pub cpu_s: Option<f64>,
    /// Median minor page faults of one (the PyTorch systems; rows written
    /// before it was measured have none).
    #[serde(default)]
    pub faults: Option<f64>,
    /// Batches per mini-batch (forward).
    pub batches: Option<u64>,
    /// A policy file's decisions in states it does not hold (rows written
    /// before they were counted have none).
    #[serde(default)]
    pub misses: Option<u64>,
    /// bt.run: a policy file's decisions it hands to its fallback by design.
    #[serde(default)]
    pub deferred: Option<u64>,
    /// The mini-batch's loss.
    pub loss: Option<f64>,
    /// bt.run: median seconds discovering, scheduling, executing.
    pub split: Option<[f64; 3]>,
    /// Why it failed.
    pub error: Option<String>,
    /// Where and from what it was measured.
    pub provenance: Provenance,
}

/// Provenance of a row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Provenance {
    /// The model folder.
    pub model: String,
    /// The model's name.
    pub name: String,
    /// batchlab's revision.
    pub revision: String,
    /// CPU model.
    pub cpu: String,
    /// Threads per system.
    pub threads: usize,
    /// Mini-batches per process.
    pub repeats: usize,
    /// The PyTorch setup, if any.
    pub torch_setup: Option<String>,
    /// The command line.
    pub command: String,
    /// Seconds since the epoch when measured.
    pub timestamp: u64,
}

/// What the report needs besides the rows, computed in-process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Analysis {
    /// Batches per policy (heuristics and the FSM).
    pub policies: Vec<(String, u64)>,
    /// The trace's A.3 lower bound and the certified bound.
    pub a3: u64,
    /// The certified bound (`search::bound`).
    pub certified: u64,
    /// Per cell: (cell, ops, planned copy bytes, DyNet-order copy bytes,
    /// planned memory kernels, DyNet-order memory kernels).
    pub planner: Vec<PlannerRow>,
    /// The FSM's encoding.
    pub fsm_encoding: String,
    /// The `--builtin` trace beside the model folder's, if given.
    #[serde(default)]
    pub builtin: Option<BuiltinAnalysis>,
}

/// The `--builtin` trace's structure beside the model folder's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuiltinAnalysis {
    /// The trace file.
    pub trace: String,
    /// Its nodes, edges, instances and types.
    pub nodes: usize,
    /// Edges.
    pub edges: usize,
    /// Instances.
    pub instances: usize,
    /// Types.
    pub types: usize,
    /// The model folder's nodes, edges, instances and types.
    pub imported: [usize; 4],
    /// Its FSM's batches (`search train`, the same episodes), and the
    /// imported model's.
    pub fsm_batches: u64,
}

impl BuiltinAnalysis {
    /// Whether both traces have the same nodes, edges, instances and types.
    pub fn same_shape(&self) -> bool {
        [self.nodes, self.edges, self.instances, self.types] == self.imported
    }
}

/// A cell's planner reading: (cell, ops, planned copy bytes, DyNet-order
/// copy bytes, planned memory kernels, DyNet-order memory kernels).
pub type PlannerRow = (String, usize, u64, u64, u64, u64);

/// Files of a measurement: the FSM policy and the layouts folder, and the
/// `--builtin` trace's.
struct Prepared {
    fsm: PathBuf,
    layouts: PathBuf,
    builtin: Option<BuiltinFiles>,
}

/// The `--builtin` trace, its FSM and its layouts folder.
pub struct BuiltinFiles {
    /// The trace.
    pub trace: PathBuf,
    /// Its FSM policy.
    pub fsm: PathBuf,
    /// Its layouts folder.
    pub layouts: PathBuf,
}

fn usage(m: String) -> ReproError {
    ReproError::Usage(m)
}

/// Batches per policy, the certified bound, the planner's copies; writes
/// the FSM policy and the layout files into `work`.
pub fn analyse(dir: &ModelDir, work: &Path, quick: bool) -> Result<(Analysis, PathBuf, PathBuf)> {
    let g = &dir.trace.graph;
    let mut policies = Vec::new();
    for h in ["depth", "agenda", "agenda-updated", "cavs", "typewise"] {
        let arg = PolicyArg::parse(h).map_err(|e| usage(e.to_string()))?;
        let mut p = arg.instantiate().map_err(|e| usage(e.to_string()))?;
        let st = SameTypeDag::for_policy(g, p.as_ref());
        let (s, _) = run_policy(g, &st, p.as_mut()).map_err(|e| usage(e.to_string()))?;
        policies.push((h.to_string(), s.len() as u64));
    }
    let fsm = work.join("fsm.yaml");
    let (encoding, batches) = learn_fsm(&dir.trace, &dir.path.join("trace.json"), &fsm, quick)?;
    policies.push((format!("fsm ({encoding})"), batches));
    let known = policies.iter().map(|p| p.1).min().unwrap_or(0);
    let cert = search::bound::certify(
        g,
        &search::bound::BoundConfig {
            known,
            ..Default::default()
        },
    );
    let hidden = dir.manifest.hidden.max(1) as usize;
    let layouts = work.join("layouts");
    let names: Vec<&str> = dir.cells.names().collect();
    let planner_rows = plan_cells(&dir.cells, &names, hidden, &layouts)?;
    Ok((
        Analysis {
            policies,
            a3: cert.a3,
            certified: cert.bound,
            planner: planner_rows,
            fsm_encoding: encoding,
            builtin: None,
        },
        fsm,
        layouts,
    ))
}

/// `--builtin`: the built-in trace's structure beside the folder's, its
/// FSM (the same training as the folder's) and its cells' layouts, into
/// `work/builtin`.
pub fn analyse_builtin(
    dir: &ModelDir,
    trace_path: &Path,
    work: &Path,
    quick: bool,
) -> Result<(BuiltinAnalysis, BuiltinFiles)> {
    let trace =
        engine::trace::Trace::read(trace_path).map_err(|e| usage(format!("--builtin: {e}")))?;
    let cells = engine::cells::CellLibrary::builtin().map_err(|e| usage(e.to_string()))?;
    let model = engine::model::model(&trace, &cells, 7)
        .map_err(|e| usage(format!("--builtin {}: {e}", trace_path.display())))?;
    let mut names: Vec<&str> = Vec::new();
    for rm in &model.roles {
        if !names.contains(&rm.cell.name.as_str()) {
            names.push(&rm.cell.name);
        }
    }
    let out = work.join("builtin");
    let fsm = out.join("fsm.yaml");
    std::fs::create_dir_all(&out).map_err(|e| ReproError::io(&out, e))?;
    let (_, fsm_batches) = learn_fsm(&trace, trace_path, &fsm, quick)?;
    let layouts = out.join("layouts");
    let hidden = dir.manifest.hidden.max(1) as usize;
    plan_cells(&cells, &names, hidden, &layouts)?;
    let (g, h) = (&trace.graph, &dir.trace.graph);
    let analysis = BuiltinAnalysis {
        trace: trace_path.display().to_string(),
        nodes: g.len(),
        edges: g.num_edges(),
        instances: g.num_instances(),
        types: g.types().len(),
        imported: [h.len(), h.num_edges(), h.num_instances(), h.types().len()],
        fsm_batches,
    };
    let files = BuiltinFiles {
        trace: trace_path.to_path_buf(),
        fsm,
        layouts,
    };
    Ok((analysis, files))
}

/// Learns the trace's FSM (`search train`'s automatic encoding choice,
/// 1000 episodes, 200 with `--quick`) into `out`; its encoding and batches.
fn learn_fsm(
    trace: &engine::trace::Trace,
    trace_path: &Path,
    out: &Path,
    quick: bool,
) -> Result<(String, u64)> {
    let episodes = if quick { 200 } else { 1000 };
    let auto = experiments::auto::train_best(
        trace,
        &trace_path.display().to_string(),
        &Encoding::ALL,
        1,
        episodes,
    )
    .ok_or_else(|| usage("no encoding to train an FSM with".into()))?;
    auto.file
        .write(out)
        .map_err(|e| usage(format!("{}: {e}", out.display())))?;
    Ok((auto.encoding.name().to_string(), auto.report.best_batches))
}

/// Plans each named cell at `hidden` (batch 8) and writes its planned and
/// DyNet-order layouts into `layouts`; a [`PlannerRow`] per cell.
fn plan_cells(
    cells: &engine::cells::CellLibrary,
    names: &[&str],
    hidden: usize,
    layouts: &Path,
) -> Result<Vec<PlannerRow>> {
    std::fs::create_dir_all(layouts).map_err(|e| ReproError::io(layouts, e))?;
    let mut rows = Vec::new();
    for &name in names {
        let cell = cells
            .instantiate(name, hidden)
            .map_err(|e| usage(e.to_string()))?;
        let p = planner::plan_cell(&cell, 8, &planner::PlanOptions::default())
            .map_err(|e| usage(format!("planning cell {name}: {e}")))?;
        let planned = planner::layout_file::totals_entry(&p.planned.planned.eval.totals);
        let base = planner::layout_file::totals_entry(&p.baseline.eval.totals);
        rows.push((
            name.to_string(),
            cell.ops.len(),
            planned.copy_bytes,
            base.copy_bytes,
            planned.memory_kernels,
            base.memory_kernels,
        ));
        for (file, f) in [
            (
                format!("{name}.json"),
                planner::layout_file::planned_file(&cell, &p),
            ),
            (
                format!("{name}.baseline.json"),
                planner::layout_file::baseline_file(&cell, &p),
            ),
        ] {
            let path = layouts.join(file);
            f.write(&path)
                .map_err(|e| usage(format!("{}: {e}", path.display())))?;
        }
    }
    Ok(rows)
}

/// A system of the measurement.
#[derive(Clone, Debug)]
struct System {
    family: &'static str,
    name: String,
}

/// Runs `cmd`; the JSON it wrote to `result`, or why not.
fn launch(
    mut cmd: Command,
    threads: usize,
    timeout: u64,
    result: &Path,
) -> std::result::Result<Value, String> {
    let t = threads.to_string();
    for var in ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"] {
        cmd.env(var, &t);
    }
    let _ = std::fs::remove_file(result);
    let out = output_within(&mut cmd, timeout)?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        return Err(tail[tail.len().saturating_sub(3)..].join(" | "));
    }
    let text = std::fs::read_to_string(result).map_err(|e| format!("{}: {e}", result.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", result.display()))
}

/// Relative difference within which a system's loss equals the recording's.
pub const LOSS_TOLERANCE: f64 = 1e-4;

/// Whether loss `l` equals the recording's `e` within [`LOSS_TOLERANCE`].
pub fn same_as_recorded(l: f64, e: f64) -> bool {
    (l - e).abs() <= LOSS_TOLERANCE * e.abs().max(1e-12)
}

/// The recording's loss (`expected.safetensors`), when the folder has one.
fn recorded_loss(dir: &ModelDir) -> Option<f64> {
    dir.expected().ok().flatten().and_then(|e| {
        e.get("loss")
            .and_then(|t| t.data.first())
            .map(|&x| f64::from(x))
    })
}

/// A row's loss against the recording's: a system run on the folder's
/// weights and samples that gives another loss did not run the recorded
/// model on the recorded samples (a setup returning other samples or
/// another model), and its time is not comparable. The built-in trace runs
/// on its own seeded weights and is not compared.
fn same_loss(v: &Value, family: &str, expected: Option<f64>) -> std::result::Result<(), String> {
    let (Some(l), Some(e)) = (v.get("loss").and_then(Value::as_f64), expected) else {
        return Ok(());
    };
    if family == "built-in" || same_as_recorded(l, e) {
        return Ok(());
    }
    Err(format!(
        "its loss {l} is not the recording's {e} (expected.safetensors `loss`) within {LOSS_TOLERANCE}: it did not run the recorded model on the recorded samples (does the setup return the samples the folder was recorded on, in order?)"
    ))
}

/// `cmd`'s output, or an error naming `--timeout` when it runs longer than
/// `timeout` seconds: then it and every process it started (its process
/// group: a setup's own helpers, bt.run's schedule service) are killed.
fn output_within(cmd: &mut Command, timeout: u64) -> std::result::Result<Output, String> {
    use std::io::Read;
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {:?}: {e}", cmd.get_program()))?;
    // Drained on threads, so a child that fills a pipe never blocks.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(timeout);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Ok(None) => {
                kill_group(&mut child);
                let _ = child.wait();
                return Err(format!(
                    "{:?} ran past --timeout {timeout} s and was killed (a setup or model that hangs; raise --timeout for a slow one)",
                    cmd.get_program()
                ));
            }
            Err(e) => return Err(format!("waiting for {:?}: {e}", cmd.get_program())),
        }
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Kills `child` and the processes of its group.
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on the group this child leads (process_group(0)).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// The measuring settings.
pub struct Settings<'a> {
    /// Rounds.
    pub rounds: usize,
    /// Mini-batches per process.
    pub repeats: usize,
    /// The project's Python environment (for `--torch`): its `python` and
    /// the harness folder (`batchlab_peers`, whose `torch_bench` times).
    pub python: Option<(PathBuf, PathBuf)>,
    /// The command line, for provenance.
    pub command: &'a str,
    /// Show progress on stderr.
    pub verbose: bool,
}

/// Measures every system round by round into rows (written to `rows_file`
/// after every round, atomically).
#[allow(clippy::too_many_arguments)]
pub fn measure(
    a: &ModelArgs,
    dir: &ModelDir,
    work: &Path,
    fsm: &Path,
    layouts: &Path,
    builtin: Option<BuiltinFiles>,
    s: &Settings<'_>,
    rows_file: &Path,
) -> Result<Vec<Row>> {
    let expected_loss = recorded_loss(dir);
    let prep = Prepared {
        fsm: fsm.to_path_buf(),
        layouts: layouts.to_path_buf(),
        builtin,
    };
    let mut systems: Vec<System> = BATCHLAB
        .iter()
        .map(|n| System {
            family: "batchlab",
            name: n.to_string(),
        })
        .collect();
    if prep.builtin.is_some() {
        // The reference executor is not a batching system: no built-in twin.
        for n in BATCHLAB.iter().filter(|n| **n != "reference") {
            systems.push(System {
                family: "built-in",
                name: format!("{BUILTIN}{n}"),
            });
        }
    }
    // PyTorch systems that time a forward alone (no training rows).
    let mut forward_only: Vec<String> = Vec::new();
    let torch = match (&a.torch, &s.python) {
        (Some(setup), Some((py, harness))) => {
            let mut cmd = bench(py, harness, setup, &a.model)?;
            cmd.arg("--list");
            let out = output_within(&mut cmd, a.timeout)
                .map_err(|e| ReproError::Peers(format!("--torch {setup}: {e}")))?;
            if !out.status.success() {
                return Err(ReproError::Peers(format!(
                    "--torch {setup}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            let listed: TorchSystems = serde_json::from_slice(&out.stdout)?;
            forward_only = listed.forward_only;
            for n in &listed.systems {
                systems.push(System {
                    family: "pytorch",
                    name: n.clone(),
                });
            }
            Some((setup.clone(), py.clone(), harness.clone()))
        }
        (Some(_), None) => {
            return Err(ReproError::Peers(
                "--torch needs the project's Python environment with PyTorch (paper-repro peers --install --peers torch)".into(),
            ));
        }
        _ => None,
    };
    let worker = std::env::current_exe().map_err(|e| ReproError::io("current executable", e))?;
    let prov = Provenance {
        model: a.model.display().to_string(),
        name: dir.manifest.name.clone(),
        revision: experiments::provenance::workspace_revision(),
        cpu: experiments::provenance::Machine::probe().cpu,
        threads: a.threads,
        repeats: s.repeats,
        torch_setup: a.torch.clone(),
        command: s.command.to_string(),
        timestamp: experiments::provenance::timestamp(),
    };
    let modes: &[&str] = if a.no_train {
        &["inference"]
    } else {
        &["inference", "training"]
    };
    let mut rows = Vec::new();
    for mode in modes {
        let train = *mode == "training";
        for round in 0..s.rounds {
            let n = systems.len();
            for slot in 0..n {
                let sys = &systems[(slot + round) % n];
                if train && (sys.name == "reference" || forward_only.contains(&sys.name)) {
                    continue;
                }
                let result = work.join(format!("result-{}.json", std::process::id()));
                let cmd = match sys.family {
                    "batchlab" | "built-in" => {
                        // The folder's trace, FSM and layouts, or the built-in's.
                        let (input, name, fsm, layouts) = match &prep.builtin {
                            Some(b) if sys.family == "built-in" => (
                                ["--trace".as_ref(), b.trace.as_os_str()],
                                sys.name.trim_start_matches(BUILTIN),
                                &b.fsm,
                                &b.layouts,
                            ),
                            _ => (
                                ["--model".as_ref(), a.model.as_os_str()],
                                sys.name.as_str(),
                                &prep.fsm,
                                &prep.layouts,
                            ),
                        };
                        let mut c = Command::new(&worker);
                        c.arg("worker")
                            .args(input)
                            .args(["--seed", "7", "--system", name])
                            .args(["--repeats", &s.repeats.to_string()])
                            .args(["--threads", &a.threads.to_string()])
                            .arg("--result")
                            .arg(&result)
                            .args(["--train", if train { "1" } else { "0" }]);
                        if name.contains("fsm") || name == "edbatch" {
                            c.arg("--policy").arg(fsm);
                        }
                        if name == "edbatch" {
                            c.arg("--layouts").arg(layouts);
                        }
                        c
                    }
                    _ => {
                        let (setup, py, harness) =
                            torch.as_ref().expect("pytorch systems need --torch");
                        let mut c = bench(py, harness, setup, &a.model)?;
                        c.args(["--system", &sys.name])
                            .args(["--repeats", &s.repeats.to_string()])
                            .args(["--threads", &a.threads.to_string()])
                            .arg("--result")
                            .arg(&result)
                            .args(["--train", if train { "1" } else { "0" }]);
                        if sys.name.starts_with("bt-fsm") {
                            c.arg("--policy").arg(&prep.fsm);
                        }
                        c
                    }
                };
                if s.verbose {
                    eprintln!(
                        "paper-repro model: {mode} round {}/{} {} {}",
                        round + 1,
                        s.rounds,
                        sys.family,
                        sys.name
                    );
                }
                let r = launch(cmd, a.threads, a.timeout, &result)
                    .and_then(|v| same_loss(&v, sys.family, expected_loss).map(|()| v));
                let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
                let row = match r {
                    Ok(v) => Row {
                        mode: mode.to_string(),
                        round,
                        slot,
                        family: sys.family.into(),
                        system: sys.name.clone(),
                        total_s: f(&v, "total_s"),
                        cpu_s: f(&v, "cpu_s"),
                        faults: f(&v, "faults"),
                        batches: v.get("batches").and_then(Value::as_u64),
                        misses: v.get("misses").and_then(Value::as_u64),
                        deferred: v.get("deferred").and_then(Value::as_u64),
                        loss: f(&v, "loss"),
                        split: match (f(&v, "discover_s"), f(&v, "schedule_s"), f(&v, "execute_s"))
                        {
                            (Some(d), Some(sc), Some(e)) => Some([d, sc, e]),
                            _ => None,
                        },
                        error: None,
                        provenance: prov.clone(),
                    },
                    Err(e) => Row {
                        mode: mode.to_string(),
                        round,
                        slot,
                        family: sys.family.into(),
                        system: sys.name.clone(),
                        total_s: None,
                        cpu_s: None,
                        faults: None,
                        batches: None,
                        misses: None,
                        deferred: None,
                        loss: None,
                        split: None,
                        error: Some(e),
                        provenance: prov.clone(),
                    },
                };
                rows.push(row);
            }
            write_rows(rows_file, &rows)?;
        }
    }
    // The last system's result file: everything it held is in the rows.
    let _ = std::fs::remove_file(work.join(format!("result-{}.json", std::process::id())));
    Ok(rows)
}

/// What `torch_bench --list` prints: the systems a setup offers, and those
/// that time a forward alone (discovery and its floor).
#[derive(serde::Deserialize)]
struct TorchSystems {
    systems: Vec<String>,
    #[serde(default)]
    forward_only: Vec<String>,
}

/// `python -m batchlab_peers.torch_bench --setup SETUP --model DIR`: the
/// harness's timing worker, with the checkout's batchlab_torch first on the
/// path.
fn bench(python: &Path, harness: &Path, setup: &str, model: &Path) -> Result<Command> {
    let path = std::env::join_paths([
        harness.to_path_buf(),
        crate::peers_env::batchlab_torch_source(),
    ])
    .map_err(|e| ReproError::Peers(format!("{}: {e}", harness.display())))?;
    let mut c = Command::new(python);
    c.args([
        "-m",
        "batchlab_peers.torch_bench",
        "--setup",
        setup,
        "--model",
    ])
    .arg(model)
    .env("PYTHONPATH", path)
    .env("PYTHONDONTWRITEBYTECODE", "1");
    Ok(c)
}

/// Writes the rows as JSON lines, atomically.
pub fn write_rows(path: &Path, rows: &[Row]) -> Result<()> {
    let mut text = String::new();
    for r in rows {
        text += &serde_json::to_string(r)?;
        text.push('\n');
    }
    engine::io::write_atomic(path, text.as_bytes()).map_err(|e| ReproError::io(path, e))
}

/// Reads rows written by [`write_rows`].
pub fn read_rows(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path).map_err(|e| ReproError::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| ReproError::Rows {
                path: path.to_path_buf(),
                message: format!("line {}: {e}", i + 1),
            })
        })
        .collect()
}

/// Runs `paper-repro model`: analyse and measure (unless `--redraw`), then
/// report into `out`; returns REPORT.md's path.
pub fn run_command(
    a: &ModelArgs,
    out: &Path,
    quick: bool,
    peers_env: Option<&Path>,
    verbose: bool,
    command: &str,
) -> Result<PathBuf> {
    let dir = ModelDir::open(&a.model).map_err(|e| usage(e.to_string()))?;
    if a.threads == 0 {
        return Err(usage("--threads must be at least 1".into()));
    }
    let rows_dir = out.join("rows");
    std::fs::create_dir_all(&rows_dir).map_err(|e| ReproError::io(&rows_dir, e))?;
    let rows_file = rows_dir.join("model.jsonl");
    let analysis_file = rows_dir.join("model-analysis.json");
    // One measuring run per rows folder (a redraw only reads).
    let _lock = if a.redraw {
        None
    } else {
        Some(experiments::output::RowsLock::acquire(&rows_file)?)
    };
    let (analysis, rows) = if a.redraw {
        let text = std::fs::read_to_string(&analysis_file)
            .map_err(|e| ReproError::io(&analysis_file, e))?;
        let analysis: Analysis = serde_json::from_str(&text).map_err(|e| ReproError::Rows {
            path: analysis_file.clone(),
            message: e.to_string(),
        })?;
        (analysis, read_rows(&rows_file)?)
    } else {
        let work = out.join("work");
        std::fs::create_dir_all(&work).map_err(|e| ReproError::io(&work, e))?;
        let (mut analysis, fsm, layouts) = analyse(&dir, &work, quick)?;
        let builtin = match &a.builtin {
            Some(t) => {
                let (b, files) = analyse_builtin(&dir, t, &work, quick)?;
                analysis.builtin = Some(b);
                Some(files)
            }
            None => None,
        };
        engine::io::write_atomic(
            &analysis_file,
            serde_json::to_string_pretty(&analysis)?.as_bytes(),
        )
        .map_err(|e| ReproError::io(&analysis_file, e))?;
        let python = match &a.torch {
            Some(_) => {
                let env_dir = crate::peers_env::default_dir(peers_env);
                let env = crate::peers_env::open(&env_dir).map_err(ReproError::Peers)?;
                if let Some(Err(why)) = env.frameworks.get("torch") {
                    return Err(ReproError::Peers(format!(
                        "--torch: no PyTorch in {}: {why}",
                        env_dir.display()
                    )));
                }
                Some((env.python, env.harness))
            }
            None => None,
        };
        let s = Settings {
            rounds: a.rounds.unwrap_or(if quick { 3 } else { 5 }).max(1),
            repeats: a.repeats.unwrap_or(if quick { 1 } else { 3 }).max(1),
            python,
            command,
            verbose,
        };
        let rows = measure(a, &dir, &work, &fsm, &layouts, builtin, &s, &rows_file)?;
        (analysis, rows)
    };
    let path = report::write(&dir, &analysis, &rows, out, command)?;
    // A report with failed rows is written (it shows them), but the run is
    // not a success: the exit says so, naming the first failure.
    let failed: Vec<&Row> = rows.iter().filter(|r| r.error.is_some()).collect();
    if let Some(first) = failed.first() {
        return Err(ReproError::RowsFailed(format!(
            "{} of {} rows failed (the report at {} shows them); the first, {} {} round {}: {}",
            failed.len(),
            rows.len(),
            path.display(),
            first.mode,
            first.system,
            first.round + 1,
            first.error.as_deref().unwrap_or_default()
        )));
    }
    Ok(path)
}
