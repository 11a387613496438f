//! Turning a trained Q-table into a policy file, and back into a runtime FSM.

use std::collections::BTreeMap;

use engine::sched::{
    DEFER, DEFER_ACTION, Hyperparameters, POLICY_FORMAT, POLICY_VERSION, PolicyFile, Provenance,
    StateEntry, TrainingSummary, key_to_tokens,
};
use engine::trace::Trace;

use crate::trainer::Trained;

/// The policy file of a training run. The states written are those with a
/// stored action (the FSM the trainer evaluated); a state without one is left
/// out, so the runtime falls back there exactly as in training (a miss), and a
/// state the trainer stored as deferred is written with [`DEFER_ACTION`] (the
/// fallback decides there by design). Their Q values come along to explain the
/// choice. States are sorted by their tokens and Q values by action name, so
/// equal runs give equal bytes. The file is version 2 unless a state defers.
pub fn policy_file(
    trained: &Trained,
    trace: &Trace,
    trace_path: &str,
    hyper: &Hyperparameters,
    seed: u64,
) -> PolicyFile {
    let types = &trained.types;
    let mut states: Vec<StateEntry> = trained
        .table
        .states()
        .iter()
        .filter_map(|sq| {
            let best = sq.chosen?;
            let name = |a: u16| types[usize::from(a)].clone();
            Some(StateEntry {
                state: key_to_tokens(&sq.key, types),
                action: if best == DEFER {
                    DEFER_ACTION.to_string()
                } else {
                    name(best)
                },
                q: sq
                    .q
                    .iter()
                    .map(|&(a, v)| (name(a), v))
                    .collect::<BTreeMap<_, _>>(),
            })
        })
        .collect();
    states.sort_by(|a, b| a.state.cmp(&b.state));
    let defers = states.iter().any(|s| s.action == DEFER_ACTION);
    let r = &trained.report;
    PolicyFile {
        format: POLICY_FORMAT.into(),
        version: if defers { POLICY_VERSION } else { 2 },
        encoding: r.encoding,
        workload: trace.workload.clone(),
        provenance: Provenance {
            trace: trace_path.to_string(),
            nodes: trace.graph.len() as u64,
            batch_size: trace.meta.batch_size,
            hidden: trace.meta.hidden,
            dataset: trace.meta.dataset.clone(),
            seed,
        },
        hyperparameters: hyper.clone(),
        training: TrainingSummary {
            episodes: r.episodes,
            best_batches: r.best_batches,
            lower_bound: r.lower_bound,
            best_episode: r.best_episode,
            stop_reason: r.stop_reason.name().into(),
            prior_batches: Some(r.prior_batches),
            teacher: r.teacher.clone(),
        },
        fallback: r.fallback.clone(),
        pass: None,
        types: types.clone(),
        states,
    }
}
