//! Loading what the subcommands share: traces, policies given as a file or a
//! heuristic name, and a timed, validated evaluation of one policy on a trace.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};
use engine::sched::{
    BatchPolicy, PolicyArg, RunStats, SameTypeDag, Schedule, run_policy, validate_schedule,
};
use engine::trace::Trace;

/// Reads a trace; the error names the file (and line for malformed JSON).
pub(crate) fn trace(path: &Path) -> anyhow::Result<Trace> {
    Ok(Trace::read(path)?)
}

/// A policy named on the command line (resolved by `engine::sched::PolicyArg`).
pub(crate) type PolicySpec = PolicyArg;

/// Resolves `arg`: a heuristic name, else a policy file.
pub(crate) fn policy(arg: &str) -> anyhow::Result<PolicySpec> {
    Ok(PolicyArg::parse(arg)?)
}

/// Refuses a policy trained on another workload than the trace's, unless
/// `allow`: its type names would mostly not match, and every decision would
/// silently fall back.
pub(crate) fn check_workload(
    spec: &PolicySpec,
    trace: &Trace,
    trace_path: &Path,
    allow: bool,
) -> anyhow::Result<()> {
    if let PolicyArg::File { path, file } = spec
        && file.workload != trace.workload
        && !allow
    {
        bail!(
            "{path}: policy was trained on workload {:?} but trace {} is workload {:?} (pass --allow-other-workload to evaluate it anyway)",
            file.workload,
            trace_path.display(),
            trace.workload
        );
    }
    Ok(())
}

/// A policy's result on one trace.
pub(crate) struct Outcome {
    /// Batches of the schedule.
    pub batches: u64,
    /// Decisions that fell back (FSM states never seen).
    pub misses: u64,
    /// Decisions the FSM's table hands to its fallback by design.
    pub deferred: u64,
    /// Median wall time of one scheduling run.
    pub seconds: f64,
    /// The schedule itself (every run gave this one).
    pub schedule: Schedule,
}

/// Runs `policy` `repeats` times (at least once) on the trace, validates the
/// schedule, and checks that every run gave the same one: policies are
/// deterministic, so a difference is a bug worth stopping for.
pub(crate) fn evaluate(
    trace: &Trace,
    st: &SameTypeDag,
    policy: &mut dyn BatchPolicy,
    repeats: usize,
) -> anyhow::Result<Outcome> {
    let g = &trace.graph;
    let mut times = Vec::with_capacity(repeats.max(1));
    let mut first: Option<(Schedule, RunStats)> = None;
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        let (s, stats) = run_policy(g, st, policy)?;
        times.push(start.elapsed().as_secs_f64());
        match &first {
            None => {
                validate_schedule(g, &s).with_context(|| {
                    format!("policy {} gave an invalid schedule", policy.name())
                })?;
                first = Some((s, stats));
            }
            Some((s0, _)) if *s0 != s => {
                bail!(
                    "policy {} is not deterministic on this trace",
                    policy.name()
                )
            }
            Some(_) => {}
        }
    }
    // The loop above ran at least once.
    let Some((schedule, stats)) = first else {
        bail!("no evaluation run");
    };
    Ok(Outcome {
        batches: schedule.len() as u64,
        misses: stats.misses,
        deferred: stats.deferred,
        seconds: super::median(times),
        schedule,
    })
}
