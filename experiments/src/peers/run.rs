//! The `peers` sweep: per grid point, prepare the files every system reads,
//! count DyNet's batches once, then time the systems round by round, each in
//! its own process, in an order rotated every round.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use engine::cells::CellLibrary;
use serde_json::Value;

use super::{Peer, PeersEnv, System, parse_system};
use crate::auto::{layouts_for, policy_for, record};
use crate::config::{FsmRule, PeersConfig, RunConfig};
use crate::error::{RunError, RunFailure, chain};
use crate::expand::{Run, group_by};
use crate::rows::{Metrics, PeerMetrics};
use crate::runner::{RunOptions, Sink, guarded};

/// The grid point of a run: everything but the system (workload, batch,
/// hidden, seed, threads, training, device).
type Point = (String, usize, usize, u64, usize, bool, String);

fn point(c: &RunConfig) -> Option<Point> {
    match c {
        RunConfig::Peers(PeersConfig {
            workload,
            batch,
            hidden,
            seed,
            threads,
            train,
            device,
            ..
        }) => Some((
            workload.clone(),
            *batch,
            *hidden,
            *seed,
            *threads,
            *train,
            device.clone(),
        )),
        _ => None,
    }
}

/// Files of one grid point.
struct Prepared {
    trace: PathBuf,
    export: PathBuf,
    policy: Option<PathBuf>,
    layouts: Option<PathBuf>,
    /// `torch-fsm`'s FSM training: the rule's trace, its export and the rule.
    torch_fsm: Option<(PathBuf, PathBuf, FsmRule)>,
    reference_loss: Option<f64>,
    agenda_batches: u64,
    op_nodes: usize,
    instances: usize,
}

/// Caches across points: FSM per (workload, rule), layouts folder per (hidden, layout batch).
#[derive(Default)]
struct Caches {
    fsm: HashMap<(String, String), PathBuf>,
    fsm_trace: HashMap<(String, String), (PathBuf, PathBuf)>,
    layouts: HashMap<(usize, usize), PathBuf>,
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> RunFailure {
    RunFailure::Message(format!("{}: {e}", path.display()))
}

fn prepare(
    work: &Path,
    p: &Point,
    runs: &[&Run],
    cells: &CellLibrary,
    caches: &mut Caches,
) -> Result<Prepared, RunFailure> {
    let (w, b, h, s, _, train, device) = p;
    let dir = work.join(format!(
        "{w}-b{b}-h{h}-s{s}{}{}",
        if *train { "-train" } else { "" },
        if device == "cpu" {
            String::new()
        } else {
            format!("-{}", device.replace(':', ""))
        }
    ));
    std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
    let trace = record(w, *b, *h, *s, cells)?;
    let trace_path = dir.join("trace.json");
    trace
        .write(&trace_path)
        .map_err(|e| io_err(&trace_path, e))?;
    // Training: the export carries the reference's gradients, which the
    // peers compare theirs with.
    let reference = if *train {
        engine::export::Reference::Gradients
    } else {
        engine::export::Reference::Loss
    };
    let e = engine::export::export(&trace, cells, *s, reference)
        .map_err(|e| RunFailure::Message(e.to_string()))?;
    let export_path = dir.join("model.safetensors");
    e.write(&export_path)
        .map_err(|e| RunFailure::Message(e.to_string()))?;
    let mut policy = None;
    let mut layouts = None;
    let mut torch_fsm = None;
    for r in runs {
        let RunConfig::Peers(PeersConfig {
            fsm,
            layout_batch,
            system,
            ..
        }) = &r.config
        else {
            continue;
        };
        let peer = matches!(parse_system(system), Some(System::Peer(_)));
        if let (Some(rule), None, true) = (fsm, &torch_fsm, peer) {
            let (t, e) = fsm_trace(work, w, rule, cells, caches)?;
            torch_fsm = Some((t, e, rule.clone()));
        }
        if let (Some(rule), None, false) = (fsm, &policy, peer) {
            policy = Some(fsm_file(work, w, rule, cells, caches)?);
        }
        if let (Some(lb), None) = (layout_batch, &layouts) {
            layouts = Some(layouts_dir(work, *h, *lb, cells, caches)?);
        }
    }
    Ok(Prepared {
        trace: trace_path,
        export: export_path,
        policy,
        layouts,
        torch_fsm,
        reference_loss: e.header.reference_loss,
        agenda_batches: e.header.agenda_batches,
        op_nodes: e.header.op_nodes,
        instances: e.header.instances,
    })
}

fn fsm_file(
    work: &Path,
    workload: &str,
    rule: &FsmRule,
    cells: &CellLibrary,
    caches: &mut Caches,
) -> Result<PathBuf, RunFailure> {
    let key = (
        workload.to_string(),
        crate::hash::canonical_json(rule).map_err(|e| RunFailure::Message(e.to_string()))?,
    );
    if let Some(p) = caches.fsm.get(&key) {
        return Ok(p.clone());
    }
    let auto = policy_for(workload, rule, cells)?;
    let path = work.join(format!(
        "{workload}.fsm-{:016x}.yaml",
        crate::hash::fnv1a(key.1.as_bytes())
    ));
    auto.file.write(&path)?;
    caches.fsm.insert(key, path.clone());
    Ok(path)
}

/// `torch-fsm`'s FSM training trace (the rule's, as batchlab's FSM is
/// trained on) and its export (the cells and bindings PyTorch runs), once
/// per workload and rule.
fn fsm_trace(
    work: &Path,
    workload: &str,
    rule: &FsmRule,
    cells: &CellLibrary,
    caches: &mut Caches,
) -> Result<(PathBuf, PathBuf), RunFailure> {
    let key = (
        workload.to_string(),
        crate::hash::canonical_json(rule).map_err(|e| RunFailure::Message(e.to_string()))?,
    );
    if let Some(p) = caches.fsm_trace.get(&key) {
        return Ok(p.clone());
    }
    let (b, h, s) = (
        rule.batch.unwrap_or(32),
        rule.hidden.unwrap_or(64),
        rule.seed.unwrap_or(1),
    );
    let trace = record(workload, b, h, s, cells)?;
    let stem = format!(
        "{workload}.fsm-train-{:016x}",
        crate::hash::fnv1a(key.1.as_bytes())
    );
    let trace_path = work.join(format!("{stem}.json"));
    trace
        .write(&trace_path)
        .map_err(|e| io_err(&trace_path, e))?;
    let e = engine::export::export(&trace, cells, s, engine::export::Reference::None)
        .map_err(|e| RunFailure::Message(e.to_string()))?;
    let export_path = work.join(format!("{stem}.safetensors"));
    e.write(&export_path)
        .map_err(|e| RunFailure::Message(e.to_string()))?;
    let got = (trace_path, export_path);
    caches.fsm_trace.insert(key, got.clone());
    Ok(got)
}

fn layouts_dir(
    work: &Path,
    hidden: usize,
    lb: usize,
    cells: &CellLibrary,
    caches: &mut Caches,
) -> Result<PathBuf, RunFailure> {
    if let Some(p) = caches.layouts.get(&(hidden, lb)) {
        return Ok(p.clone());
    }
    let l = layouts_for(cells, hidden, lb)?;
    let dir = work.join(format!("layouts-h{hidden}-b{lb}"));
    std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
    for (_, f) in l.planned.iter() {
        let p = dir.join(format!("{}.json", f.cell));
        f.write(&p).map_err(|e| io_err(&p, e))?;
    }
    for (_, f) in l.baseline.iter() {
        let p = dir.join(format!("{}.baseline.json", f.cell));
        f.write(&p).map_err(|e| io_err(&p, e))?;
    }
    caches.layouts.insert((hidden, lb), dir.clone());
    Ok(dir)
}

/// Why a peer cannot run here, if it cannot.
fn unavailable(env: Option<&PeersEnv>, peer: Peer) -> Option<String> {
    let Some(env) = env else {
        return Some(
            "peer unavailable: no peers environment (install it with `paper-repro peers --install`)"
                .into(),
        );
    };
    match env.frameworks.get(peer.framework()) {
        Some(Ok(_)) => None,
        Some(Err(why)) => Some(format!("peer unavailable: {}: {why}", peer.framework())),
        None => Some(format!(
            "peer unavailable: {} is not installed in {} (install it with `paper-repro peers --install --peers {}`)",
            peer.framework(),
            env.python.display(),
            peer.framework()
        )),
    }
}

/// Runs `cmd` with the thread variables pinned; the JSON it wrote to `result`.
fn launch(mut cmd: Command, threads: usize, result: &Path) -> Result<Value, String> {
    let t = threads.to_string();
    for var in ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"] {
        cmd.env(var, &t);
    }
    let _ = std::fs::remove_file(result);
    let out = cmd
        .output()
        .map_err(|e| format!("starting {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = tail[tail.len().saturating_sub(3)..].join(" | ");
        return Err(match out.status.code() {
            Some(3) => tail,
            Some(c) => format!("exit status {c}: {tail}"),
            None => format!("killed by a signal: {tail}"),
        });
    }
    let text = std::fs::read_to_string(result).map_err(|e| format!("{}: {e}", result.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", result.display()))
}

fn harness(env: &PeersEnv, args: &[&str]) -> Command {
    harness_in(&env.python, env, args)
}

/// [`harness`] run by `python` (DGL's environment has its own).
fn harness_in(python: &Path, env: &PeersEnv, args: &[&str]) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg("-m").arg("batchlab_peers").args(args);
    // The harness, and batchlab_torch from this checkout: the environment's
    // editable install points at the checkout it was made from, which may
    // have moved, and binaries built elsewhere (a GPU machine's kit) run
    // from the checkout's root (a missing folder on the path is skipped by
    // Python).
    let torch_source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/torch");
    let here = std::env::current_dir()
        .map(|d| d.join("engine/torch"))
        .unwrap_or_default();
    match std::env::join_paths([
        env.harness.as_path(),
        torch_source.as_path(),
        here.as_path(),
    ]) {
        Ok(path) => cmd.env("PYTHONPATH", path),
        Err(_) => cmd.env("PYTHONPATH", &env.harness),
    };
    // The batched PyTorch peers ask batchlab's `engine` for their schedules
    // and `search` for torch-fsm's policy: the ones built beside this
    // executable, where they are (else batchlab_torch looks for them).
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        for tool in ["engine", "search"] {
            let p = dir.join(tool);
            if p.is_file() {
                cmd.env(format!("BATCHLAB_{}", tool.to_uppercase()), p);
            }
        }
    }
    cmd
}

fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    (n > 0).then(|| {
        if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        }
    })
}

fn f(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn floats(v: &Value, k: &str) -> Vec<f64> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// One system's rounds folded into its row.
fn fold(
    system: &str,
    sys: System,
    threads: usize,
    prep: &Prepared,
    results: &[Value],
    count: Option<&Value>,
) -> PeerMetrics {
    let first = &results[0];
    let per_round = |k: &str| median(&results.iter().filter_map(|r| f(r, k)).collect::<Vec<_>>());
    let samples: Vec<f64> = results.iter().flat_map(|r| floats(r, "samples")).collect();
    let cpu: Vec<f64> = results
        .iter()
        .flat_map(|r| floats(r, "cpu_samples"))
        .collect();
    let total = median(&samples).unwrap_or(f64::NAN);
    let (framework, forward, batches, program_ops) = match sys {
        System::Peer(p) => (
            p.framework().to_string(),
            per_round("forward_s"),
            first.get("batches").and_then(Value::as_u64),
            first.get("program_ops").and_then(Value::as_u64),
        ),
        System::Batchlab(_) => {
            let fw: Vec<f64> = results
                .iter()
                .filter_map(|r| Some(f(r, "scheduling_s")? + f(r, "execution_s")?))
                .collect();
            (
                "batchlab".to_string(),
                median(&fw),
                first.get("batches").and_then(Value::as_u64),
                None,
            )
        }
    };
    let loss = f(first, "loss");
    let rel = match (loss, prep.reference_loss) {
        (Some(l), Some(r)) => Some((l - r).abs() / r.abs().max(1e-30)),
        _ => None,
    };
    let dynet_count = count.filter(|_| sys == System::Peer(Peer::DynetAgenda));
    PeerMetrics {
        system: system.to_string(),
        framework,
        version: first
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string(),
        instances: prep.instances,
        threads,
        rounds_ok: results.len(),
        construction_s: per_round("construction_s"),
        forward_s: forward,
        total_s: total,
        cpu_s: median(&cpu).unwrap_or(f64::NAN),
        instances_per_s: prep.instances as f64 / total.max(1e-12),
        loss,
        reference_loss: prep.reference_loss,
        loss_rel_err: rel,
        batches: batches.or_else(|| dynet_count.and_then(|c| c.get("dynet_batches")?.as_u64())),
        agenda_batches: Some(prep.agenda_batches),
        program_ops: program_ops.map(|n| n as usize),
        expected_ops: prep.op_nodes,
        dynet_nodes: dynet_count.and_then(|c| c.get("dynet_nodes")?.as_u64()),
        two_node_ops: dynet_count.and_then(|c| c.get("two_node_ops")?.as_u64()),
        dynet_by_kind: dynet_count.and_then(|c| c.get("dynet_by_kind").cloned()),
        agenda_by_op: dynet_count.and_then(|c| c.get("agenda_by_op").cloned()),
        attribution: dynet_count.and_then(|c| c.get("attribution").cloned()),
        policy: first
            .get("policy")
            .and_then(Value::as_str)
            .map(str::to_owned),
        count_error: None,
        cpu_samples: cpu,
        backward_s: per_round("backward_s"),
        grad_rel_err: results
            .iter()
            .filter_map(|r| f(r, "grad_rel_err"))
            .reduce(f64::max),
    }
}

/// Runs `todo` (all of kind `peers`).
pub(crate) fn run(todo: &[Run], sink: &Sink, opts: &RunOptions) -> Result<(), RunError> {
    let cells = match CellLibrary::builtin() {
        Ok(c) => c,
        Err(e) => {
            for r in todo {
                sink.finish(r, "cpu", None, Err(RunFailure::Message(e.to_string())))?;
            }
            return Ok(());
        }
    };
    let work = opts.out_dir.join(format!("{}.work", sink.spec()));
    let mut caches = Caches::default();
    for group in group_by(todo, |r| point(&r.config)) {
        let Some(p) = point(&group[0].config) else {
            continue;
        };
        let (rounds, repeats) = match &group[0].config {
            RunConfig::Peers(PeersConfig {
                rounds, repeats, ..
            }) => (*rounds, *repeats),
            _ => (1, 1),
        };
        for r in &group {
            sink.started(r);
        }
        let (seed, device) = (p.3, p.6.clone());
        let prepared = guarded(|| prepare(&work, &p, &group, &cells, &mut caches));
        let prep = match prepared {
            Ok(prep) => prep,
            Err(e) => {
                let msg = chain(&e);
                for r in &group {
                    sink.finish(
                        r,
                        &device,
                        Some(seed),
                        Err(RunFailure::Message(msg.clone())),
                    )?;
                }
                continue;
            }
        };
        let systems: Vec<(&Run, String, Option<System>)> = group
            .iter()
            .map(|r| {
                let name = match &r.config {
                    RunConfig::Peers(PeersConfig { system, .. }) => system.clone(),
                    _ => String::new(),
                };
                let sys = parse_system(&name);
                (*r, name, sys)
            })
            .collect();
        let env = opts.peers.as_ref();
        let blocked: Vec<Option<String>> = systems
            .iter()
            .map(|(_, name, sys)| match sys {
                None => Some(format!("unknown system {name:?}")),
                Some(System::Peer(peer)) if device != "cpu" && peer.framework() != "torch" => Some(format!(
                    "{name} runs on the CPU only ({} from PyPI has no CUDA build); give it `devices: [cpu]`",
                    peer.framework()
                )),
                Some(System::Peer(peer)) => unavailable(env, *peer),
                Some(System::Batchlab(_)) if opts.worker.is_none() => Some(
                    "no batchlab worker command (run through `paper-repro`, which provides one)"
                        .into(),
                ),
                Some(System::Batchlab(_)) => None,
            })
            .collect();
        let dir = prep
            .export
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let (threads, train) = (p.4, p.5);
        // DyNet's own batch count (of the forward): one untimed process with
        // its profiler on; not repeated for training runs.
        let wants_count = !train
            && systems
                .iter()
                .zip(&blocked)
                .any(|((_, _, s), b)| *s == Some(System::Peer(Peer::DynetAgenda)) && b.is_none());
        let count = match (wants_count, env) {
            (true, Some(env)) => {
                let res = dir.join(format!("count-t{threads}.json"));
                let export = prep.export.display().to_string();
                let cmd = harness(
                    env,
                    &[
                        "count",
                        "--export",
                        &export,
                        "--result",
                        &res.display().to_string(),
                    ],
                );
                Some(launch(cmd, threads, &res))
            }
            _ => None,
        };
        let mut results: Vec<Vec<Value>> = vec![Vec::new(); systems.len()];
        let mut errors: Vec<Option<String>> = vec![None; systems.len()];
        for round in 0..rounds {
            let n = systems.len();
            for k in 0..n {
                let i = (k + round) % n;
                let (_, name, sys) = &systems[i];
                if blocked[i].is_some() {
                    continue;
                }
                let res = dir.join(format!(
                    "{}-t{threads}-r{round}.json",
                    name.replace(':', "_")
                ));
                let cmd = match sys {
                    Some(System::Peer(peer)) => {
                        let Some(env) = env else { continue };
                        // DGL's peers run in DGL's own environment.
                        let python = match (peer.framework(), &env.dgl_python) {
                            ("dgl", Some(p)) => p,
                            _ => &env.python,
                        };
                        let mut cmd = harness_in(
                            python,
                            env,
                            &[
                                "run",
                                "--export",
                                &prep.export.display().to_string(),
                                "--peer",
                                peer.name(),
                                "--threads",
                                &threads.to_string(),
                                "--warmup",
                                "1",
                                "--repeats",
                                &repeats.to_string(),
                                "--device",
                                &device,
                                "--result",
                                &res.display().to_string(),
                            ],
                        );
                        if train {
                            cmd.arg("--train");
                        }
                        if peer.batched() {
                            cmd.arg("--trace").arg(&prep.trace);
                        }
                        if let (Peer::TorchFsm, Some((t, e, rule))) = (*peer, &prep.torch_fsm) {
                            let encoding = match rule.encodings.as_slice() {
                                [one] => one.as_str(),
                                _ => "all",
                            };
                            cmd.arg("--fsm-trace")
                                .arg(t)
                                .arg("--fsm-export")
                                .arg(e)
                                .args(["--fsm-episodes", &rule.episodes.to_string()])
                                .args(["--fsm-seed", &rule.trainer_seed.to_string()])
                                .args(["--fsm-encoding", encoding]);
                        }
                        cmd
                    }
                    Some(System::Batchlab(_)) => {
                        let Some(w) = &opts.worker else { continue };
                        let mut cmd = Command::new(&w.program);
                        cmd.args(&w.args)
                            .arg("--trace")
                            .arg(&prep.trace)
                            .arg("--seed")
                            .arg(seed.to_string())
                            .arg("--system")
                            .arg(name)
                            .arg("--repeats")
                            .arg(repeats.to_string())
                            .arg("--threads")
                            .arg(threads.to_string())
                            .arg("--device")
                            .arg(&device)
                            .arg("--result")
                            .arg(&res);
                        if let Some(pol) = &prep.policy {
                            cmd.arg("--policy").arg(pol);
                        }
                        if let Some(l) = &prep.layouts {
                            cmd.arg("--layouts").arg(l);
                        }
                        if train {
                            cmd.arg("--train").arg("1");
                        }
                        cmd
                    }
                    None => continue,
                };
                match launch(cmd, threads, &res) {
                    Ok(v) => results[i].push(v),
                    Err(e) => {
                        errors[i].get_or_insert(e);
                    }
                }
            }
        }
        let count_value = match &count {
            Some(Ok(v)) => Some(v),
            _ => None,
        };
        for (i, (run, name, sys)) in systems.iter().enumerate() {
            let outcome = if let Some(why) = &blocked[i] {
                Err(RunFailure::Message(why.clone()))
            } else if results[i].is_empty() {
                let why = errors[i].clone().unwrap_or_else(|| "no round ran".into());
                Err(RunFailure::Message(format!("{name}: {why}")))
            } else {
                let sys = sys.unwrap_or(System::Peer(Peer::DynetNone));
                let mut m = fold(name, sys, threads, &prep, &results[i], count_value);
                if sys == System::Peer(Peer::DynetAgenda)
                    && let Some(Err(e)) = &count
                {
                    m.count_error = Some(e.clone());
                }
                let samples = results[i]
                    .iter()
                    .flat_map(|r| floats(r, "samples"))
                    .collect();
                Ok((Metrics::Peers(Box::new(m)), samples))
            };
            sink.finish(run, &device, Some(seed), outcome)?;
        }
        // The point's inputs are large at big sizes; the results stay.
        let _ = std::fs::remove_file(&prep.export);
        let _ = std::fs::remove_file(&prep.trace);
    }
    Ok(())
}
