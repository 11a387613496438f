//! Kind `policies` (ED-Batch Fig. 7 and `docs/results/policies.md`): every
//! policy on every trace, batches against the lower bound.
//!
//! - Traces: a workload of the zoo recorded at the run's batch, hidden,
//!   seed and data, or a seeded random multi-type DAG (`search::synth`,
//!   workload `random-dag`). A trace with more nodes than the run's
//!   `max_nodes` is not measured: its runs write no row.
//! - FSM policies are trained with `search::trainer`, once per (training
//!   trace, encoding, scheme, teacher) across the whole sweep: `search train`'s
//!   defaults, or ED-Batch's scheme (`:reference`, `search train --reference`).
//! - With an `optimise` block, each trace's best-known schedule and certified
//!   bound (`search::optimise`, `search::bound`) are computed once and carried
//!   by every row of the trace; `best-known` is that schedule, and
//!   `fsm-teacher` distils the training trace's (at the rule's teacher
//!   budget) into every encoding first.
//! - `optimal` is the exact optimum by branch and bound (`search::optimal`).
//!
//! Traces run in parallel (rayon), since the counts do not depend on timing,
//! except with `optimise.timed`: then one at a time, so the optimiser has
//! the machine to itself and its wall and CPU seconds are its own (and a
//! search cut by its budget gets as far as it would alone).

use engine::cells::CellLibrary;
use engine::graph::lower_bound;
use engine::sched::{Encoding, FsmPolicy, SameTypeDag, heuristic, run_policy};
use engine::trace::Trace;
use rayon::prelude::*;

use crate::auto::{AutoPolicy, record_data, train_best_hyper};
use crate::cache::Cache;
use crate::config::{
    FsmRule, OptimiseRule, PoliciesConfig, PolicyChoice, RandomDag, RunConfig, Scheme, parse_policy,
};
use crate::error::{RunError, RunFailure};
use crate::expand::Run;
use crate::rows::{CurvePoint, Metrics, OptimiseMetrics, PolicyMetrics};
use crate::runner::{Outcome, Sink, guarded};

/// A trace's identity within a sweep.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TraceKey {
    workload: String,
    batch: usize,
    hidden: usize,
    seed: u64,
    data: Option<String>,
    dag: Option<RandomDag>,
}

impl TraceKey {
    fn of(c: &PoliciesConfig) -> TraceKey {
        TraceKey {
            workload: c.workload.clone(),
            batch: c.batch,
            hidden: c.hidden,
            seed: c.seed,
            data: c.data.clone(),
            dag: c.dag,
        }
    }

    /// The trace of an FSM trained by `rule` for runs on this one: the
    /// rule's sizes and seed where it names them, else this trace's.
    fn training(&self, rule: &FsmRule) -> TraceKey {
        let mut t = self.clone();
        t.seed = rule.seed.unwrap_or(self.seed);
        match &mut t.dag {
            Some(d) => d.nodes = rule.nodes.unwrap_or(d.nodes),
            None => {
                t.batch = rule.batch.unwrap_or(self.batch);
                t.hidden = rule.hidden.unwrap_or(self.hidden);
            }
        }
        t
    }

    /// Records (or generates) the trace.
    fn record(&self, cells: &CellLibrary) -> Result<Trace, RunFailure> {
        match &self.dag {
            Some(d) => Ok(search::synth::random_dag(&search::synth::DagParams {
                nodes: d.nodes,
                types: d.types,
                window: d.window,
                max_args: d.max_args,
                instances: self.batch,
                seed: self.seed,
            })?),
            None => record_data(
                &self.workload,
                self.batch,
                self.hidden,
                self.seed,
                self.data.as_deref().unwrap_or("default"),
                cells,
            ),
        }
    }

    /// A name for policy files' provenance.
    fn name(&self) -> String {
        match (&self.dag, &self.data) {
            (Some(d), _) => format!("{}:n{}:s{}", self.workload, d.nodes, self.seed),
            (None, Some(data)) => format!(
                "{}:b{}:h{}:{data}:s{}",
                self.workload, self.batch, self.hidden, self.seed
            ),
            (None, None) => format!(
                "{}:b{}:h{}:s{}",
                self.workload, self.batch, self.hidden, self.seed
            ),
        }
    }
}

/// Key of a trained FSM: training trace, encoding, scheme, trainer seed,
/// episodes, teacher (the optimiser rule of the schedule it distils).
type FsmKey = (TraceKey, Encoding, Scheme, u64, u32, Option<OptimiseRule>);

/// Key of a trace's reference: the trace, the optimiser rule.
type RefKey = (TraceKey, OptimiseRule);

/// A trace's best-known schedule and certified bound.
struct Reference {
    types: Vec<engine::graph::TypeId>,
    best_known: u64,
    bound: u64,
    method: String,
    complete: bool,
    search: OptimiseMetrics,
}

struct Shared {
    cells: CellLibrary,
    fsms: Cache<FsmKey, AutoPolicy>,
    refs: Cache<RefKey, Reference>,
}

/// The best-known schedule and certified bound of `trace` (`search
/// optimise` with `--bound-share 0.25`; see the module docs).
fn reference(trace: &Trace, rule: &OptimiseRule) -> Result<Reference, RunFailure> {
    use search::bound::{BoundConfig, certify};
    use search::optimise::{OptimiseConfig, OptimiseStop, optimise};
    let g = &trace.graph;
    let budget = std::time::Duration::from_millis(rule.budget_ms);
    let started = std::time::Instant::now();
    let cpu_before = crate::peers::cputime::process_cpu_s();
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
    let r = optimise(g, &st, &cfg, &mut |_, _| {})?;
    let (wall, cpu) = (
        started.elapsed().as_secs_f64(),
        crate::peers::cputime::process_cpu_s() - cpu_before,
    );
    let name = |v: serde_json::Result<serde_json::Value>| {
        v.ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    Ok(Reference {
        types: r.schedule.batches().map(|(t, _)| t).collect(),
        best_known: r.batches,
        bound: b.bound,
        method: name(serde_json::to_value(b.method)),
        complete: b.complete && r.stop != OptimiseStop::Budget,
        search: OptimiseMetrics {
            heuristic: r.heuristic.clone(),
            heuristic_batches: r.heuristic_batches,
            widest_pass: (r.passes.iter())
                .filter(|p| p.finished)
                .map(|p| p.width)
                .max()
                .unwrap_or(0),
            width_limit: r.width_limit,
            stop: name(serde_json::to_value(r.stop)),
            wall_s: rule.timed.then_some(wall),
            cpu_s: rule.timed.then_some(cpu),
        },
    })
}

/// The trace key of a run.
fn trace_key(c: &RunConfig) -> Option<TraceKey> {
    match c {
        RunConfig::Policies(c) => Some(TraceKey::of(c)),
        _ => None,
    }
}

/// Whether a run asks for the optimiser to be timed (traces one at a time).
fn timed(r: &Run) -> bool {
    matches!(&r.config, RunConfig::Policies(c) if c.optimise.as_ref().is_some_and(|o| o.timed))
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
    if todo.iter().any(timed) {
        groups
            .iter()
            .try_for_each(|group| run_group(group, &shared, sink))
    } else {
        groups
            .par_iter()
            .try_for_each(|group| run_group(group, &shared, sink))
    }
}

fn run_group(group: &[&Run], shared: &Shared, sink: &Sink) -> Result<(), RunError> {
    let Some(key) = trace_key(&group[0].config) else {
        return Ok(());
    };
    let trace = guarded(|| key.record(&shared.cells));
    for run in group {
        let max_nodes = match &run.config {
            RunConfig::Policies(c) => c.max_nodes,
            _ => None,
        };
        if let (Ok(t), Some(max)) = (&trace, max_nodes)
            && t.graph.len() > max
        {
            sink.filtered(run);
            continue;
        }
        sink.started(run);
        let outcome = match &trace {
            Ok(t) => guarded(|| one(run, &key, t, shared)),
            Err(e) => Err(RunFailure::Message(crate::error::chain(e))),
        };
        sink.finish(run, "cpu", Some(key.seed), outcome)?;
    }
    Ok(())
}

fn one(run: &Run, key: &TraceKey, trace: &Trace, shared: &Shared) -> Outcome {
    let RunConfig::Policies(PoliciesConfig {
        policy,
        fsm,
        optimise: opt_rule,
        ..
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
        lower_bound: lb,
        ..PolicyMetrics::default()
    };
    let ref_of = |t: &Trace, key: &TraceKey, rule: &OptimiseRule| {
        shared
            .refs
            .get_or_compute((key.clone(), rule.clone()), || reference(t, rule))
            .map_err(RunFailure::Message)
    };
    let own_ref = match opt_rule {
        Some(rule) => Some(ref_of(trace, key, rule)?),
        None => None,
    };
    if let Some(r) = &own_ref {
        m.best_known = Some(r.best_known);
        m.certified_bound = Some(r.bound);
        m.bound_method = Some(r.method.clone());
        m.optimise_complete = Some(r.complete);
        m.optimise = Some(r.search.clone());
    }
    let stats = match choice {
        PolicyChoice::BestKnown => {
            let r = own_ref
                .as_ref()
                .ok_or_else(|| RunFailure::Message("best-known needs an optimise rule".into()))?;
            engine::sched::RunStats {
                batches: r.best_known,
                ..Default::default()
            }
        }
        PolicyChoice::Optimal => {
            use search::optimal::{NODE_LIMIT, OptimalConfig, optimal};
            let cfg = OptimalConfig {
                max_nodes: NODE_LIMIT,
                ..OptimalConfig::default()
            };
            let r = optimal(g, &cfg)?;
            // As `search optimal` does: a schedule that does not replay is a bug.
            engine::sched::validate_schedule(g, &r.to_schedule(g))?;
            m.proved = Some(r.proved);
            m.expanded = Some(r.expanded);
            engine::sched::RunStats {
                batches: r.batches,
                ..Default::default()
            }
        }
        PolicyChoice::Heuristic(name) => {
            let mut p = heuristic(name)
                .ok_or_else(|| RunFailure::Message(format!("unknown heuristic {name}")))?;
            run_policy(g, &st, p.as_mut())?.1
        }
        PolicyChoice::Fsm(..) | PolicyChoice::FsmBest(_) | PolicyChoice::FsmTeacher => {
            let rule = fsm
                .as_ref()
                .ok_or_else(|| RunFailure::Message(format!("{policy} has no fsm rule")))?;
            let p = trained(choice, rule, opt_rule.as_ref(), key, trace, shared)?;
            m.encoding = Some(p.encoding.name().to_string());
            m.episodes = Some(p.report.episodes);
            m.stop_reason = Some(p.report.stop_reason.name().to_string());
            m.states = Some(p.file.states.len());
            m.train_s = Some(p.report.seconds);
            m.best_episode = Some(p.report.best_episode);
            m.prior_batches = Some(p.report.prior_batches);
            m.train_batches = Some(p.report.best_batches);
            m.fallback = p.report.fallback.clone();
            m.teacher_batches = p.report.teacher.as_ref().map(|t| t.batches);
            m.curve = Some(
                (p.report.rollouts.iter())
                    .map(|r| CurvePoint {
                        episode: r.episode,
                        best: r.best,
                    })
                    .collect(),
            );
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

/// The FSM of an FSM policy on the trace `key`: trained (or taken from the
/// sweep's cache) on the rule's training trace, per encoding; `fsm-best` and
/// `fsm-teacher` keep the one with fewest batches on the training trace,
/// ties to the earlier in `Encoding::ALL` order.
fn trained(
    choice: PolicyChoice,
    rule: &FsmRule,
    opt_rule: Option<&OptimiseRule>,
    key: &TraceKey,
    trace: &Trace,
    shared: &Shared,
) -> Result<std::sync::Arc<AutoPolicy>, RunFailure> {
    let candidates = || {
        let mut v = crate::auto::encodings(&rule.encodings);
        if v.is_empty() {
            v = Encoding::ALL.to_vec();
        }
        v.sort_by_key(|e| Encoding::ALL.iter().position(|x| x == e));
        v
    };
    let (encs, scheme) = match choice {
        PolicyChoice::Fsm(e, s) => (vec![e], s),
        PolicyChoice::FsmBest(s) => (candidates(), s),
        _ => (candidates(), Scheme::Default),
    };
    let teacher_rule = match choice {
        PolicyChoice::FsmTeacher => {
            let o = opt_rule
                .ok_or_else(|| RunFailure::Message("fsm-teacher needs an optimise rule".into()))?;
            Some(OptimiseRule {
                budget_ms: rule.teacher_budget_ms.unwrap_or(o.budget_ms),
                ..o.clone()
            })
        }
        _ => None,
    };
    let tkey = key.training(rule);
    let mut best: Option<std::sync::Arc<AutoPolicy>> = None;
    for e in encs {
        let fkey = (
            tkey.clone(),
            e,
            scheme,
            rule.trainer_seed,
            rule.episodes,
            teacher_rule.clone(),
        );
        let p = shared
            .fsms
            .get_or_compute(fkey, || -> Result<AutoPolicy, RunFailure> {
                let owned;
                let t = if tkey == *key {
                    trace
                } else {
                    owned = tkey.record(&shared.cells)?;
                    &owned
                };
                let teacher = match &teacher_rule {
                    Some(r) => {
                        let re = shared
                            .refs
                            .get_or_compute((tkey.clone(), r.clone()), || reference(t, r))
                            .map_err(RunFailure::Message)?;
                        Some(search::trainer::Teacher {
                            types: re.types.clone(),
                            source: "optimise".into(),
                            bound: Some(re.bound),
                        })
                    }
                    None => None,
                };
                let hyper = scheme.hyperparameters(rule.episodes);
                train_best_hyper(
                    t,
                    &tkey.name(),
                    &[e],
                    &hyper,
                    rule.trainer_seed,
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
    best.ok_or_else(|| RunFailure::Message("no encoding".into()))
}
