//! Kind `policies` (ED-Batch Fig. 7): every policy on every trace, batches
//! against the lower bound. Traces run in parallel (rayon); the counts do not
//! depend on timing. FSM policies are trained with `search::trainer`, once
//! per (training trace, encoding, teacher or not) across the whole sweep.
//! With an `optimise` block, each trace's best-known schedule and certified
//! bound (`search::optimise`, `search::bound`) are computed once and carried
//! by every row of the trace; `best-known` is that schedule, and
//! `fsm-teacher` distils the training trace's into every encoding first.

use engine::cells::CellLibrary;
use engine::graph::lower_bound;
use engine::sched::{Encoding, FsmPolicy, SameTypeDag, heuristic, run_policy};
use engine::trace::Trace;
use rayon::prelude::*;

use crate::auto::{AutoPolicy, record, train_best_with};
use crate::cache::Cache;
use crate::config::{FsmRule, OptimiseRule, PoliciesConfig, PolicyChoice, RunConfig, parse_policy};
use crate::error::{RunError, RunFailure};
use crate::expand::Run;
use crate::rows::{Metrics, PolicyMetrics};
use crate::runner::{Outcome, Sink, guarded};

/// Key of a trained FSM: workload, training batch/hidden/seed, encoding,
/// trainer seed, episodes, teacher (the optimiser rule, if distilled).
type FsmKey = (
    String,
    usize,
    usize,
    u64,
    Encoding,
    u64,
    u32,
    Option<OptimiseRule>,
);

/// Key of a trace's reference: workload, batch, hidden, seed, rule.
type RefKey = (String, usize, usize, u64, OptimiseRule);

/// A trace's best-known schedule and certified bound.
struct Reference {
    types: Vec<engine::graph::TypeId>,
    best_known: u64,
    bound: u64,
    method: String,
    complete: bool,
}

struct Shared {
    cells: CellLibrary,
    fsms: Cache<FsmKey, AutoPolicy>,
    refs: Cache<RefKey, Reference>,
}

/// The best-known schedule and certified bound of `trace` (see the module docs).
fn reference(trace: &Trace, rule: &OptimiseRule) -> Result<Reference, RunFailure> {
    use search::bound::{BoundConfig, certify};
    use search::optimise::{OptimiseConfig, OptimiseStop, optimise};
    let g = &trace.graph;
    let budget = std::time::Duration::from_millis(rule.budget_ms);
    let started = std::time::Instant::now();
    let st = SameTypeDag::new(g);
    let b = certify(
        g,
        &BoundConfig {
            budget: budget / 4,
            known: search::optimise::heuristic_batches(g, &st),
            ..BoundConfig::default()
        },
    );
    let cfg = OptimiseConfig {
        budget: budget.saturating_sub(started.elapsed()),
        max_width: rule.max_width,
        target: b.bound,
        ..OptimiseConfig::default()
    };
    let r =
        optimise(g, &st, &cfg, &mut |_, _| {}).map_err(|e| RunFailure::Message(e.to_string()))?;
    Ok(Reference {
        types: r.schedule.batches().map(|(t, _)| t).collect(),
        best_known: r.batches,
        bound: b.bound,
        method: serde_json::to_value(b.method)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        complete: b.complete && r.stop != OptimiseStop::Budget,
    })
}

/// The trace key of a run.
fn trace_key(c: &RunConfig) -> Option<(&str, usize, usize, u64)> {
    match c {
        RunConfig::Policies(PoliciesConfig {
            workload,
            batch,
            hidden,
            seed,
            ..
        }) => Some((workload, *batch, *hidden, *seed)),
        _ => None,
    }
}

/// Runs `todo` (all of kind `policies`).
pub(crate) fn run(todo: &[Run], sink: &Sink) -> Result<(), RunError> {
    let cells = match CellLibrary::builtin() {
        Ok(c) => c,
        Err(e) => {
            let msg = e.to_string();
            for r in todo {
                sink.finish(r, "cpu", None, Err(RunFailure::Message(msg.clone())))?;
            }
            return Ok(());
        }
    };
    let shared = Shared {
        cells,
        fsms: Cache::default(),
        refs: Cache::default(),
    };
    let groups = crate::expand::group_by(todo, |r| trace_key(&r.config));
    groups
        .par_iter()
        .try_for_each(|group| run_group(group, &shared, sink))
}

fn run_group(group: &[&Run], shared: &Shared, sink: &Sink) -> Result<(), RunError> {
    let Some((w, b, h, s)) = trace_key(&group[0].config) else {
        return Ok(());
    };
    let trace = guarded(|| record(w, b, h, s, &shared.cells));
    for run in group {
        sink.started(run);
        let outcome = match &trace {
            Ok(t) => guarded(|| one(run, t, shared)),
            Err(e) => Err(RunFailure::Message(crate::error::chain(e))),
        };
        sink.finish(run, "cpu", Some(s), outcome)?;
    }
    Ok(())
}

fn one(run: &Run, trace: &Trace, shared: &Shared) -> Outcome {
    let RunConfig::Policies(PoliciesConfig {
        workload,
        batch,
        hidden,
        seed,
        policy,
        fsm,
        optimise: opt_rule,
    }) = &run.config
    else {
        return Err(RunFailure::Message("not a policies run".into()));
    };
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let lb = lower_bound(g).total;
    let choice = parse_policy(policy)
        .ok_or_else(|| RunFailure::Message(format!("unknown policy {policy:?}")))?;
    let mut m = PolicyMetrics {
        nodes: g.len(),
        batches: 0,
        lower_bound: lb,
        ratio: 0.0,
        misses: 0,
        encoding: None,
        episodes: None,
        stop_reason: None,
        states: None,
        train_s: None,
        best_known: None,
        certified_bound: None,
        bound_method: None,
        optimise_complete: None,
    };
    let ref_of = |t: &Trace, key: (usize, usize, u64), rule: &OptimiseRule| {
        shared
            .refs
            .get_or_compute(
                (workload.clone(), key.0, key.1, key.2, rule.clone()),
                || reference(t, rule),
            )
            .map_err(RunFailure::Message)
    };
    let own_ref = match opt_rule {
        Some(rule) => Some(ref_of(trace, (*batch, *hidden, *seed), rule)?),
        None => None,
    };
    if let Some(r) = &own_ref {
        m.best_known = Some(r.best_known);
        m.certified_bound = Some(r.bound);
        m.bound_method = Some(r.method.clone());
        m.optimise_complete = Some(r.complete);
    }
    let stats = match choice {
        PolicyChoice::BestKnown => {
            let r = own_ref
                .as_ref()
                .ok_or_else(|| RunFailure::Message("best-known needs an optimise rule".into()))?;
            engine::sched::RunStats {
                batches: r.best_known,
                misses: 0,
            }
        }
        PolicyChoice::Heuristic(name) => {
            let mut p = heuristic(name)
                .ok_or_else(|| RunFailure::Message(format!("unknown heuristic {name}")))?;
            run_policy(g, &st, p.as_mut())?.1
        }
        PolicyChoice::Fsm(_) | PolicyChoice::FsmBest | PolicyChoice::FsmTeacher => {
            let rule = fsm.clone().unwrap_or(FsmRule {
                batch: None,
                hidden: None,
                seed: None,
                trainer_seed: 1,
                episodes: 1000,
                encodings: Vec::new(),
            });
            let encs = match choice {
                PolicyChoice::Fsm(e) => vec![e],
                _ => Encoding::ALL.to_vec(),
            };
            let teacher_rule = match choice {
                PolicyChoice::FsmTeacher => Some(opt_rule.clone().ok_or_else(|| {
                    RunFailure::Message("fsm-teacher needs an optimise rule".into())
                })?),
                _ => None,
            };
            let tkey = (
                rule.batch.unwrap_or(*batch),
                rule.hidden.unwrap_or(*hidden),
                rule.seed.unwrap_or(*seed),
            );
            let same = tkey == (*batch, *hidden, *seed);
            // Each encoding once per training trace; fsm-best takes the best of all.
            let mut best: Option<std::sync::Arc<AutoPolicy>> = None;
            for e in encs {
                let key = (
                    workload.clone(),
                    tkey.0,
                    tkey.1,
                    tkey.2,
                    e,
                    rule.trainer_seed,
                    rule.episodes,
                    teacher_rule.clone(),
                );
                let p = shared
                    .fsms
                    .get_or_compute(key, || -> Result<AutoPolicy, RunFailure> {
                        let owned;
                        let t = if same {
                            trace
                        } else {
                            owned = record(workload, tkey.0, tkey.1, tkey.2, &shared.cells)?;
                            &owned
                        };
                        let name = format!("{workload}:b{}:h{}:s{}", tkey.0, tkey.1, tkey.2);
                        let teacher = match &teacher_rule {
                            Some(r) => {
                                let re = ref_of(t, tkey, r)?;
                                Some(search::trainer::Teacher {
                                    types: re.types.clone(),
                                    source: "optimise".into(),
                                    bound: Some(re.bound),
                                })
                            }
                            None => None,
                        };
                        train_best_with(
                            t,
                            &name,
                            &[e],
                            rule.trainer_seed,
                            rule.episodes,
                            teacher.as_ref(),
                        )
                        .ok_or_else(|| RunFailure::Message("nothing trained".into()))
                    })
                    .map_err(RunFailure::Message)?;
                if best
                    .as_ref()
                    .is_none_or(|b| p.report.best_batches < b.report.best_batches)
                {
                    best = Some(p);
                }
            }
            let p = best.ok_or_else(|| RunFailure::Message("no encoding".into()))?;
            m.encoding = Some(p.encoding.name().to_string());
            m.episodes = Some(p.report.episodes);
            m.stop_reason = Some(p.report.stop_reason.name().to_string());
            m.states = Some(p.file.states.len());
            m.train_s = Some(p.report.seconds);
            let mut fsm = FsmPolicy::new(p.file.clone())?;
            run_policy(g, &st, &mut fsm)?.1
        }
    };
    m.batches = stats.batches;
    m.misses = stats.misses;
    m.ratio = if lb > 0 {
        stats.batches as f64 / lb as f64
    } else {
        0.0
    };
    Ok((Metrics::Policy(m), Vec::new()))
}
