//! Kind `replay` (ED-Batch Fig. 6, 9, Table 6; Cavs Fig. 8): each executor on
//! each trace, timed with `engine::measure` (one warm-up, `repeats`
//! timed runs, medians, raw totals as samples). Runs are sequential; with
//! `rounds` > 1 a trace's runs are repeated round after round, their order
//! rotated each round, and each row folds its rounds (interleaved A/B: a
//! slow spell of a shared machine hits every executor alike). Per
//! trace, the reference outputs are computed once (the `reference` executor,
//! if listed, runs first so its timed run serves as the check); the FSM is
//! trained once per workload and rule, the layouts planned once per hidden
//! size ([`crate::auto`]).

use std::sync::Arc;

use engine::backend::cpu::CpuOptions;
use engine::cells::CellLibrary;
use engine::compare;
use engine::device::{DeviceKind, check_available};
use engine::executor::{Executor, compile_layouts};
use engine::footprint;
use engine::measure::{self, MeasureOptions, Measured, measure_on};
use engine::model::{self, Model};
use engine::sched::{FsmPolicy, heuristic};
use engine::session::{self, Session, SessionOptions};
use engine::store::Store;
use engine::trace::Trace;

use crate::auto::{AutoPolicy, Layouts, layouts_for, policy_for, record};
use crate::cache::Cache;
use crate::config::{ExecutorChoice, FsmRule, ReplayConfig, RunConfig, parse_executor};
use crate::error::{RunError, RunFailure, chain};
use crate::expand::{Run, group_by};
use crate::rows::{Metrics, ReplayMetrics};
use crate::runner::{Outcome, Sink, guarded};

struct Shared {
    cells: CellLibrary,
    fsms: Cache<(String, String), AutoPolicy>,
    layouts: Cache<(usize, usize), Layouts>,
}

fn trace_key(c: &RunConfig) -> Option<(&str, usize, usize, u64)> {
    match c {
        RunConfig::Replay(ReplayConfig {
            workload,
            batch,
            hidden,
            seed,
            ..
        }) => Some((workload, *batch, *hidden, *seed)),
        _ => None,
    }
}

/// Runs `todo` (all of kind `replay`), one at a time.
pub(crate) fn run(todo: &[Run], sink: &Sink) -> Result<(), RunError> {
    let cells = match CellLibrary::builtin() {
        Ok(c) => c,
        Err(e) => {
            for r in todo {
                sink.finish(r, "cpu", None, Err(RunFailure::Message(e.to_string())))?;
            }
            return Ok(());
        }
    };
    let shared = Shared {
        cells,
        fsms: Cache::default(),
        layouts: Cache::default(),
    };
    for mut group in group_by(todo, |r| trace_key(&r.config)) {
        let Some((w, b, h, s)) = trace_key(&group[0].config) else {
            continue;
        };
        // The reference first: its timed run's outputs are the check's oracle.
        group.sort_by_key(
            |r| !matches!(&r.config, RunConfig::Replay(ReplayConfig { executor, .. }) if executor == "reference"),
        );
        let prepared = guarded(|| {
            let trace = record(w, b, h, s, &shared.cells)?;
            // An error row rather than an abort when the machine cannot hold it.
            let shape = footprint::RunShape {
                op_level: group.iter().any(|r| {
                    matches!(&r.config, RunConfig::Replay(ReplayConfig { executor, .. }) if executor == "dynet")
                }),
                check: group
                    .iter()
                    .any(|r| matches!(&r.config, RunConfig::Replay(ReplayConfig { check: true, .. }))),
                roofline: false,
            };
            let est = footprint::estimate(&trace, &shared.cells, shape)?;
            let budget = engine::memory::Budget::detect(None);
            engine::memory::check(
                format!("batch {b}, hidden {h}"),
                "the replay",
                est,
                budget.as_ref(),
            )
            .map_err(|e| RunFailure::Message(e.to_string()))?;
            let model = model::model(&trace, &shared.cells, s)?;
            Ok((trace, model))
        });
        let mut reference: Option<Store> = None;
        // Rounds: every run of the trace once per round, the order rotated
        // each round (the reference stays first in round 0, for the check).
        let rounds = group
            .iter()
            .map(|r| rounds_of(&r.config))
            .max()
            .unwrap_or(1);
        let mut outcomes: Vec<Vec<Outcome>> = group.iter().map(|_| Vec::new()).collect();
        for run in &group {
            sink.started(run);
        }
        for round in 0..rounds {
            for k in 0..group.len() {
                let i = (k + round) % group.len();
                let outcome = match &prepared {
                    Ok((trace, model)) => {
                        guarded(|| one(group[i], trace, model, &shared, &mut reference))
                    }
                    Err(e) => Err(RunFailure::Message(chain(e))),
                };
                outcomes[i].push(outcome);
            }
        }
        for (run, outs) in group.iter().zip(outcomes) {
            let device = match &run.config {
                RunConfig::Replay(ReplayConfig { device, .. }) => device.clone(),
                _ => "cpu".into(),
            };
            sink.finish(run, &device, Some(s), fold_rounds(outs))?;
        }
    }
    Ok(())
}

fn rounds_of(c: &RunConfig) -> usize {
    match c {
        RunConfig::Replay(ReplayConfig { rounds, .. }) => (*rounds).max(1),
        _ => 1,
    }
}

/// One row from a run's rounds: the first failure if any round failed;
/// else every round's samples in round order, the total their median, each
/// part of the time split and the CPU time the median over the rounds, page
/// faults the most, the check's error the largest.
fn fold_rounds(mut outs: Vec<Outcome>) -> Outcome {
    use engine::measure::median;
    if outs.len() == 1 {
        return outs.remove(0);
    }
    let mut rounds = Vec::with_capacity(outs.len());
    for o in outs {
        match o? {
            (Metrics::Replay(m), samples) => rounds.push((m, samples)),
            (other, samples) => return Ok((other, samples)),
        }
    }
    let samples: Vec<f64> = rounds.iter().flat_map(|r| r.1.iter().copied()).collect();
    let med =
        |f: fn(&ReplayMetrics) -> f64| median(&rounds.iter().map(|r| f(&r.0)).collect::<Vec<_>>());
    let opt_med = |f: fn(&ReplayMetrics) -> Option<f64>| {
        let v: Vec<f64> = rounds.iter().filter_map(|r| f(&r.0)).collect();
        (v.len() == rounds.len()).then(|| median(&v))
    };
    let total_s = median(&samples);
    let mut m = rounds[0].0.clone();
    m.construction_s = med(|m| m.construction_s);
    m.scheduling_s = med(|m| m.scheduling_s);
    m.execution_s = med(|m| m.execution_s);
    m.total_s = total_s;
    m.instances_per_s = m.instances as f64 / total_s.max(1e-12);
    m.device_s = opt_med(|m| m.device_s);
    m.cpu_s = opt_med(|m| m.cpu_s);
    m.page_faults = rounds.iter().filter_map(|r| r.0.page_faults).max();
    m.max_rel_error = rounds
        .iter()
        .filter_map(|r| r.0.max_rel_error)
        .reduce(f64::max);
    Ok((Metrics::Replay(m), samples))
}

/// Measures `executor` on `device` through an engine [`Session`] (the CPU, or
/// CUDA where present: a missing driver is the error row
/// `CUDA unavailable: libcuda not found`, never a CPU fall back).
#[allow(clippy::too_many_arguments)]
pub fn measure_on_device(
    device: &str,
    threads: Option<usize>,
    trace: &Trace,
    model: &Model,
    cells: &CellLibrary,
    executor: &mut Executor,
    opts: &MeasureOptions,
) -> Result<(Measured, Option<usize>), RunFailure> {
    let kind = DeviceKind::parse(device)?;
    check_available(kind)?;
    let sopts = SessionOptions {
        cpu: CpuOptions {
            threads,
            ..CpuOptions::default()
        },
    };
    let mut session = Session::open_with(kind, trace, model, cells, executor, &sopts)?;
    let m = measure_on(&mut session, opts)?;
    Ok((m, session.cpu().map(|c| c.threads())))
}

fn one(
    run: &Run,
    trace: &Trace,
    model: &Model,
    shared: &Shared,
    reference: &mut Option<Store>,
) -> Outcome {
    let RunConfig::Replay(ReplayConfig {
        workload,
        executor,
        device,
        repeats,
        check,
        fsm,
        layout_batch,
        hidden,
        threads,
        train,
        eager,
        unfused,
        ..
    }) = &run.config
    else {
        return Err(RunFailure::Message("not a replay run".into()));
    };
    // Fail fast on an unusable device, before training or planning anything.
    if let Ok(kind @ DeviceKind::Cuda(_)) = DeviceKind::parse(device) {
        check_available(kind)?;
    }
    let choice = parse_executor(executor)
        .ok_or_else(|| RunFailure::Message(format!("unknown executor {executor:?}")))?;
    let auto = |rule: &Option<FsmRule>| -> Result<Arc<AutoPolicy>, RunFailure> {
        let rule = rule
            .clone()
            .ok_or_else(|| RunFailure::Message("no fsm rule".into()))?;
        let key = (
            workload.clone(),
            crate::hash::canonical_json(&rule).map_err(|e| RunFailure::Message(e.to_string()))?,
        );
        shared
            .fsms
            .get_or_compute(key, || policy_for(workload, &rule, &shared.cells))
            .map_err(RunFailure::Message)
    };
    let (mut ex, policy) = match choice {
        ExecutorChoice::Reference => (Executor::Reference, None),
        ExecutorChoice::Cavs => (Executor::Cavs, Some("cavs".to_string())),
        ExecutorChoice::Dynet(h) | ExecutorChoice::Policy(Some(h)) => {
            let p = heuristic(h)
                .ok_or_else(|| RunFailure::Message(format!("unknown heuristic {h}")))?;
            let ex = if matches!(choice, ExecutorChoice::Dynet(_)) {
                Executor::Dynet(p)
            } else {
                Executor::Policy(p)
            };
            (ex, Some(h.to_string()))
        }
        ExecutorChoice::Policy(None) => {
            let p = auto(fsm)?;
            (
                Executor::Policy(Box::new(FsmPolicy::new(p.file.clone())?)),
                Some(format!("fsm({})", p.encoding.name())),
            )
        }
        ExecutorChoice::EdBatch { planned } => {
            let p = auto(fsm)?;
            let lb = layout_batch.unwrap_or(8);
            let l = shared
                .layouts
                .get_or_compute((*hidden, lb), || layouts_for(&shared.cells, *hidden, lb))
                .map_err(RunFailure::Message)?;
            let files = if planned { &l.planned } else { &l.baseline };
            let programs = compile_layouts(model, files)?;
            let fsm_policy = Box::new(FsmPolicy::new(p.file.clone())?);
            (
                Executor::EdBatch(fsm_policy, programs),
                Some(format!("fsm({})", p.encoding.name())),
            )
        }
        ExecutorChoice::Vpps(h) => {
            let p = heuristic(h)
                .ok_or_else(|| RunFailure::Message(format!("unknown heuristic {h}")))?;
            (
                Executor::Vpps(p, engine::backend::vpps::VppsOptions::default()),
                Some(h.to_string()),
            )
        }
    };
    let opts = MeasureOptions {
        warmup: true,
        repeats: (*repeats).max(1),
    };
    if *train {
        let kind = DeviceKind::parse(device)?;
        // On a GPU only VPPS' kernel has a backward pass (the CUDA replay
        // of the other executors runs forward only).
        if kind != DeviceKind::Cpu && !matches!(choice, ExecutorChoice::Vpps(_)) {
            return Err(RunFailure::Message(format!(
                "training {executor} runs on the CPU (device {device}: only vpps has a backward pass there)"
            )));
        }
        let how = TrainHow {
            kind,
            threads: *threads,
            lazy: !*eager,
            fuse: !*unfused,
            check: *check,
        };
        return train_one(trace, model, shared, ex, policy, &how, &opts);
    }
    let (m, threads_used) = measure_on_device(
        device,
        *threads,
        trace,
        model,
        &shared.cells,
        &mut ex,
        &opts,
    )?;
    let (cpu_s, page_faults) = (m.cpu_s(), m.max_page_faults());
    let Measured {
        counters: c,
        time,
        total_s,
        samples,
        misses,
        store,
        device_s,
        ..
    } = m;
    let max_rel_error = if !*check {
        None
    } else if choice == ExecutorChoice::Reference && reference.is_none() {
        *reference = Some(store);
        Some(0.0)
    } else {
        if reference.is_none() {
            // No reference run on this trace yet: one untimed run.
            let (_, r) = session::replay(trace, model, &shared.cells, &mut Executor::Reference)?;
            *reference = Some(r);
        }
        reference
            .as_ref()
            .map(|r| compare::max_rel_error(trace, &store, r))
    };
    let instances = trace.graph.num_instances();
    Ok((
        Metrics::Replay(ReplayMetrics {
            nodes: trace.graph.len(),
            instances,
            batches: c.batches,
            kernels: c.kernels,
            bytes_gathered: c.bytes_gathered,
            bytes_scattered: c.bytes_scattered,
            construction_s: time.construction,
            scheduling_s: time.scheduling,
            execution_s: time.execution,
            total_s,
            instances_per_s: instances as f64 / total_s.max(1e-12),
            max_rel_error,
            policy_misses: misses,
            policy,
            device_s,
            cpu_s,
            page_faults,
            threads: threads_used,
            train: None,
        }),
        samples.iter().map(|t| t.total()).collect(),
    ))
}

/// How a training run runs.
struct TrainHow {
    /// The CPU, or a GPU (vpps).
    kind: DeviceKind,
    /// CPU worker threads.
    threads: Option<usize>,
    /// Weight gradients once per parameter (true) or per batch.
    lazy: bool,
    /// CPU in-cell fusion.
    fuse: bool,
    /// Check the step against the reference's (loss, outputs, gradients).
    check: bool,
}

/// A training run: forward + backward steps, the backward in the forward
/// batches' reverse order (Cavs' task stack, DyNet's backward), on the CPU
/// (every executor) or a GPU (vpps).
fn train_one(
    trace: &Trace,
    model: &Model,
    shared: &Shared,
    mut ex: Executor,
    policy: Option<String>,
    how: &TrainHow,
    opts: &MeasureOptions,
) -> Outcome {
    let (threads, lazy, fuse) = (how.threads, how.lazy, how.fuse);
    let sopts = SessionOptions {
        cpu: CpuOptions { threads, fuse },
    };
    let cells = &shared.cells;
    let mut session = Session::open_with(how.kind, trace, model, cells, &mut ex, &sopts)?;
    let m = engine::measure::measure_train(
        &mut session,
        None,
        &engine::run::TrainOptions { lazy },
        opts,
    )?;
    let max_rel_error = if how.check {
        Some(compare::check_train(&session, m.loss)?.worst())
    } else {
        None
    };
    let instances = trace.graph.num_instances();
    let c = &m.forward;
    Ok((
        Metrics::Replay(ReplayMetrics {
            nodes: trace.graph.len(),
            instances,
            batches: c.batches,
            kernels: c.kernels,
            bytes_gathered: c.bytes_gathered,
            bytes_scattered: c.bytes_scattered,
            construction_s: m.forward_time.construction + m.backward_time.construction,
            scheduling_s: m.forward_time.scheduling + m.backward_time.scheduling,
            execution_s: m.forward_time.execution + m.backward_time.execution,
            total_s: m.total_s,
            instances_per_s: instances as f64 / m.total_s.max(1e-12),
            max_rel_error,
            policy_misses: 0,
            policy,
            device_s: m.device_s,
            cpu_s: (!m.cpu_samples.is_empty()).then(|| measure::median(&m.cpu_samples)),
            page_faults: None,
            threads: session.cpu().map(|c| c.threads()),
            train: Some(crate::rows::TrainMetrics {
                loss: m.loss,
                backward_batches: m.backward.batches,
                backward_lower_bound: engine::graph::lower_bound(&trace.graph.reversed()).total,
                backward_kernels: m.backward.kernels,
                forward_s: m.forward_time.total(),
                backward_s: m.backward_time.total(),
                kept_bytes: m.kept_bytes,
            }),
        }),
        m.samples,
    ))
}
