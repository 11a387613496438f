//! Grid expansion: a [`Spec`] becomes its list of runs, in a fixed order
//! (later axes vary fastest):
//!
//! | kind | order |
//! |---|---|
//! | `policies` | per trace set: workloads × batches × hiddens × data × seeds (`random-dag`: nodes × seeds) × policies |
//! | `training` | workloads × batches × hiddens × seeds × encodings |
//! | `planner-memory`, `planner-compile` | cells × hiddens × batches × fixed_inputs |
//! | `replay` | workloads × hiddens × batches × seeds × devices × executors |
//! | `peers` | workloads × hiddens × batches × seeds × devices × threads × systems |
//!
//! Each axis keeps the order written in the spec; `exclude` entries then
//! remove points, and the remaining runs are numbered. Runs on the same trace are
//! consecutive, so a trace (and its reference outputs) is built once.

use crate::config::{
    ExecutorChoice, PeersConfig, PlannerCompileConfig, PlannerMemoryConfig, PoliciesConfig,
    ReplayConfig, RunConfig, Spec, TrainingConfig, parse_executor, parse_policy,
};
use crate::config::{PolicyChoice, RANDOM_DAG, RandomDag};
use crate::hash::config_hash;
use crate::spec::Kind;

/// One run of a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// Position in the expansion.
    pub index: usize,
    /// Parameters.
    pub config: RunConfig,
    /// `config_hash` of `config`.
    pub hash: String,
}

impl Run {
    /// A short label for progress display.
    pub fn label(&self) -> String {
        match &self.config {
            RunConfig::Policies(PoliciesConfig {
                workload,
                batch,
                hidden,
                seed,
                policy,
                data,
                dag,
                ..
            }) => match (dag, data) {
                (Some(d), _) => format!("{workload} n{} s{seed} {policy}", d.nodes),
                (None, Some(d)) => format!("{workload} b{batch} h{hidden} {d} s{seed} {policy}"),
                (None, None) => format!("{workload} b{batch} h{hidden} s{seed} {policy}"),
            },
            RunConfig::Training(TrainingConfig {
                workload,
                batch,
                hidden,
                seed,
                encoding,
                ..
            }) => {
                format!("{workload} b{batch} h{hidden} s{seed} {encoding}")
            }
            RunConfig::PlannerMemory(PlannerMemoryConfig {
                cell,
                hidden,
                batch,
                fixed_inputs,
            })
            | RunConfig::PlannerCompile(PlannerCompileConfig {
                cell,
                hidden,
                batch,
                fixed_inputs,
                ..
            }) => {
                let fixed = if *fixed_inputs { " fixed" } else { "" };
                format!("{cell} h{hidden} b{batch}{fixed}")
            }
            RunConfig::Replay(ReplayConfig {
                workload,
                batch,
                hidden,
                seed,
                executor,
                device,
                ..
            }) => {
                format!("{workload} b{batch} h{hidden} s{seed} {executor} {device}")
            }
            RunConfig::Peers(PeersConfig {
                workload,
                batch,
                hidden,
                seed,
                threads,
                system,
                device,
                ..
            }) => {
                let on = if device == "cpu" {
                    String::new()
                } else {
                    format!(" {device}")
                };
                format!("{workload} b{batch} h{hidden} s{seed} t{threads} {system}{on}")
            }
        }
    }
}

/// The runs of `spec`, in the order above.
pub fn expand(spec: &Spec) -> Vec<Run> {
    let g = &spec.grid;
    let mut configs = Vec::new();
    match spec.kind {
        Kind::Policies => {
            for t in policy_traces(g) {
                for p in &g.policies {
                    let fsm = parse_policy(p)
                        .is_some_and(PolicyChoice::is_fsm)
                        .then(|| g.fsm.clone());
                    configs.push(RunConfig::Policies(PoliciesConfig {
                        workload: t.workload.clone(),
                        batch: t.batch,
                        hidden: t.hidden,
                        seed: t.seed,
                        policy: p.clone(),
                        fsm,
                        optimise: g.optimise.clone(),
                        data: t.data.clone(),
                        dag: t.dag,
                        max_nodes: t.max_nodes,
                    }));
                }
            }
        }
        Kind::Training => {
            for (w, &b, &h, &s) in traces(&g.workloads, &g.batches, &g.hiddens, &g.seeds) {
                for e in &g.encodings {
                    configs.push(RunConfig::Training(TrainingConfig {
                        workload: w.clone(),
                        batch: b,
                        hidden: h,
                        seed: s,
                        encoding: e.clone(),
                        trainer_seed: g.fsm.trainer_seed,
                        episodes: g.fsm.episodes,
                        repeats: g.repeats,
                    }));
                }
            }
        }
        Kind::PlannerMemory | Kind::PlannerCompile => {
            for c in &g.cells {
                for &h in &g.hiddens {
                    for &b in &g.batches {
                        for &fixed_inputs in &g.fixed_inputs {
                            let (cell, hidden, batch) = (c.clone(), h, b);
                            configs.push(if spec.kind == Kind::PlannerMemory {
                                RunConfig::PlannerMemory(PlannerMemoryConfig {
                                    cell,
                                    hidden,
                                    batch,
                                    fixed_inputs,
                                })
                            } else {
                                RunConfig::PlannerCompile(PlannerCompileConfig {
                                    cell,
                                    hidden,
                                    batch,
                                    fixed_inputs,
                                    repeats: g.repeats,
                                })
                            });
                        }
                    }
                }
            }
        }
        Kind::Peers => {}
        Kind::Replay => {
            let lazies: &[bool] = if g.train { &g.lazy } else { &[true] };
            for w in &g.workloads {
                for &h in &g.hiddens {
                    for &b in &g.batches {
                        for &s in &g.seeds {
                            for d in &g.devices {
                                for threads in replay_threads(g) {
                                    for &fuse in &g.fuse {
                                        for &lazy in lazies {
                                            for e in &g.executors {
                                                let ex = parse_executor(e);
                                                let fsm = ex.is_some_and(ExecutorChoice::needs_fsm);
                                                let layouts = matches!(
                                                    ex,
                                                    Some(ExecutorChoice::EdBatch { .. })
                                                );
                                                configs.push(RunConfig::Replay(ReplayConfig {
                                                    workload: w.clone(),
                                                    batch: b,
                                                    hidden: h,
                                                    seed: s,
                                                    executor: e.clone(),
                                                    device: d.clone(),
                                                    repeats: g.repeats,
                                                    rounds: g.rounds,
                                                    check: g.check,
                                                    threads,
                                                    fsm: fsm.then(|| g.fsm.clone()),
                                                    layout_batch: layouts.then_some(g.layout_batch),
                                                    train: g.train,
                                                    eager: !lazy,
                                                    unfused: !fuse,
                                                }));
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if spec.kind == Kind::Peers {
        for w in &g.workloads {
            for &h in &g.hiddens {
                for &b in &g.batches {
                    for &s in &g.seeds {
                        for d in &g.devices {
                            for &t in g.threads.as_deref().unwrap_or(&[1]) {
                                for sys in &g.systems {
                                    let choice = crate::peers::parse_system(sys);
                                    let fsm = choice.is_some_and(|c| c.needs_fsm());
                                    let layouts = choice.is_some_and(|c| c.needs_layouts());
                                    configs.push(RunConfig::Peers(PeersConfig {
                                        workload: w.clone(),
                                        batch: b,
                                        hidden: h,
                                        seed: s,
                                        threads: t,
                                        system: sys.clone(),
                                        repeats: g.repeats,
                                        rounds: g.rounds,
                                        fsm: fsm.then(|| g.fsm.clone()),
                                        layout_batch: layouts.then_some(g.layout_batch),
                                        train: g.train,
                                        device: d.clone(),
                                    }));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    let excluded = |c: &RunConfig| {
        let v = serde_json::to_value(c).unwrap_or(serde_json::Value::Null);
        g.exclude.iter().any(|e| e.matches(&v))
    };
    configs.retain(|c| !excluded(c));
    configs
        .into_iter()
        .enumerate()
        .map(|(index, config)| Run {
            index,
            hash: config_hash(&config),
            config,
        })
        .collect()
}

/// One trace of a `policies` grid.
struct PolicyTrace {
    workload: String,
    batch: usize,
    hidden: usize,
    seed: u64,
    data: Option<String>,
    dag: Option<RandomDag>,
    max_nodes: Option<usize>,
}

/// The traces of a `policies` grid: per set, workloads × batches × hiddens
/// × data × seeds (a `random-dag`: nodes × seeds, batch = its instances,
/// hidden 0), sets in order.
fn policy_traces(g: &crate::config::Grid) -> Vec<PolicyTrace> {
    let mut out = Vec::new();
    for set in &g.traces {
        for w in &set.workloads {
            if w == RANDOM_DAG {
                let shape = &g.random_dag;
                for &nodes in &set.nodes {
                    for &seed in &set.seeds {
                        out.push(PolicyTrace {
                            workload: w.clone(),
                            batch: shape.instances,
                            hidden: 0,
                            seed,
                            data: None,
                            dag: Some(RandomDag {
                                nodes,
                                types: shape.types,
                                window: shape.window,
                                max_args: shape.max_args,
                            }),
                            max_nodes: set.max_nodes,
                        });
                    }
                }
                continue;
            }
            for &batch in &set.batches {
                for &hidden in &set.hiddens {
                    for d in &set.data {
                        for &seed in &set.seeds {
                            out.push(PolicyTrace {
                                workload: w.clone(),
                                batch,
                                hidden,
                                seed,
                                // The default data is written as none, as
                                // before the field existed.
                                data: (d != "default").then(|| d.clone()),
                                dag: None,
                                max_nodes: set.max_nodes,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// workloads × batches × hiddens × seeds.
fn traces<'a>(
    workloads: &'a [String],
    batches: &'a [usize],
    hiddens: &'a [usize],
    seeds: &'a [u64],
) -> impl Iterator<Item = (&'a String, &'a usize, &'a usize, &'a u64)> {
    workloads.iter().flat_map(move |w| {
        batches.iter().flat_map(move |b| {
            hiddens
                .iter()
                .flat_map(move |h| seeds.iter().map(move |s| (w, b, h, s)))
        })
    })
}

/// Splits `runs` into maximal consecutive groups with equal `key` (runs on
/// one trace are consecutive in every expansion).
pub fn group_by<'a, K: PartialEq + 'a>(
    runs: &'a [Run],
    key: impl Fn(&'a Run) -> K,
) -> Vec<Vec<&'a Run>> {
    let mut groups: Vec<(K, Vec<&'a Run>)> = Vec::new();
    for r in runs {
        let k = key(r);
        match groups.last_mut() {
            Some((last, g)) if *last == k => g.push(r),
            _ => groups.push((k, vec![r])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// The thread settings of a replay grid: each given count, or the machine's
/// parallelism (`None`) when the spec gives none.
fn replay_threads(g: &crate::config::Grid) -> Vec<Option<usize>> {
    match &g.threads {
        Some(t) => t.iter().copied().map(Some).collect(),
        None => vec![None],
    }
}
