//! Kind `training` (ED-Batch Table 4): FSM training time and episodes, one
//! encoding per run, timed alone (runs are sequential; one training per
//! repeat; the reported figures are the first run's, every run being
//! deterministic, and the median time).

use engine::cells::CellLibrary;
use engine::graph::lower_bound;
use engine::sched::{Encoding, SameTypeDag};
use engine::trace::Trace;
use search::trainer::{TrainConfig, default_hyperparameters, train};

use crate::auto::record;
use crate::config::{RunConfig, TrainingConfig};
use crate::error::{RunError, RunFailure, chain};
use crate::expand::{Run, group_by};
use crate::rows::{Metrics, TrainingMetrics};
use crate::runner::{Outcome, Sink, guarded};

fn trace_key(c: &RunConfig) -> Option<(&str, usize, usize, u64)> {
    match c {
        RunConfig::Training(TrainingConfig {
            workload,
            batch,
            hidden,
            seed,
            ..
        }) => Some((workload, *batch, *hidden, *seed)),
        _ => None,
    }
}

/// Runs `todo` (all of kind `training`), one at a time.
pub(crate) fn run(todo: &[Run], sink: &Sink) -> Result<(), RunError> {
    let cells = CellLibrary::builtin();
    for group in group_by(todo, |r| trace_key(&r.config)) {
        let Some((w, b, h, s)) = trace_key(&group[0].config) else {
            continue;
        };
        let trace = match &cells {
            Ok(c) => guarded(|| record(w, b, h, s, c)),
            Err(e) => Err(RunFailure::Message(e.to_string())),
        };
        for run in group {
            sink.started(run);
            let outcome = match &trace {
                Ok(t) => guarded(|| one(run, t)),
                Err(e) => Err(RunFailure::Message(chain(e))),
            };
            sink.finish(run, "cpu", Some(s), outcome)?;
        }
    }
    Ok(())
}

fn one(run: &Run, trace: &Trace) -> Outcome {
    let RunConfig::Training(TrainingConfig {
        encoding,
        trainer_seed,
        episodes,
        repeats,
        ..
    }) = &run.config
    else {
        return Err(RunFailure::Message("not a training run".into()));
    };
    let encoding = Encoding::parse(encoding)
        .ok_or_else(|| RunFailure::Message(format!("unknown encoding {encoding:?}")))?;
    let g = &trace.graph;
    let st = SameTypeDag::new(g);
    let mut hyper = default_hyperparameters();
    hyper.max_episodes = *episodes;
    let cfg = TrainConfig {
        encoding,
        hyper: hyper.clone(),
        seed: *trainer_seed,
    };
    let mut samples = Vec::with_capacity(*repeats);
    let mut first = None;
    for _ in 0..(*repeats).max(1) {
        let t = train(g, &st, &cfg, &mut |_, _| {});
        samples.push(t.report.seconds);
        first.get_or_insert(t);
    }
    let t = first.ok_or_else(|| RunFailure::Message("no training run".into()))?;
    let file = search::export::policy_file(&t, trace, "training", &hyper, *trainer_seed);
    let r = &t.report;
    let train_s = engine::measure::median(&samples);
    let lb = lower_bound(g).total;
    Ok((
        Metrics::Training(TrainingMetrics {
            nodes: g.len(),
            lower_bound: lb,
            batches: r.best_batches,
            ratio: if lb > 0 {
                r.best_batches as f64 / lb as f64
            } else {
                0.0
            },
            episodes: r.episodes,
            best_episode: r.best_episode,
            stop_reason: r.stop_reason.name().to_string(),
            states: file.states.len(),
            train_s,
            node_steps_per_s: if train_s > 0.0 {
                r.node_steps as f64 / train_s
            } else {
                0.0
            },
        }),
        samples,
    ))
}
