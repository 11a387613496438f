//! Turning a trained Q-table into a policy file, and back into a runtime FSM.

use std::collections::BTreeMap;

use engine::sched::{
    Hyperparameters, POLICY_FORMAT, POLICY_VERSION, PolicyFile, Provenance, StateEntry,
    TrainingSummary, key_to_tokens,
};
use engine::trace::Trace;

use crate::trainer::Trained;

/// The policy file of a training run. A state's action is the one the final
/// greedy rollout took there (so the FSM replays that schedule), else its best
/// updated action; states with neither are left out (the runtime falls back
/// there anyway). States are sorted by their tokens and Q values by action
/// name, so equal runs give equal bytes.
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
            let best = sq.chosen.or_else(|| sq.best().map(|b| b.0))?;
            let name = |a: u16| types[usize::from(a)].clone();
            Some(StateEntry {
                state: key_to_tokens(&sq.key, types),
                action: name(best),
                q: sq
                    .q
                    .iter()
                    .map(|&(a, v)| (name(a), v))
                    .collect::<BTreeMap<_, _>>(),
            })
        })
        .collect();
    states.sort_by(|a, b| a.state.cmp(&b.state));
    let r = &trained.report;
    PolicyFile {
        format: POLICY_FORMAT.into(),
        version: POLICY_VERSION,
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
        },
        types: types.clone(),
        states,
    }
}
