//! `search eval`: one policy on one trace — batches against the lower bound,
//! FSM misses, and the median scheduling time; the schedule is validated.

use std::path::PathBuf;

use anyhow::bail;
use engine::graph::lower_bound;
use engine::sched::SameTypeDag;
use serde::Serialize;

/// Arguments of `search eval`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Trace to schedule.
    #[arg(long)]
    trace: PathBuf,
    /// A policy file (YAML) or a heuristic: depth, agenda, agenda-updated, cavs, typewise.
    #[arg(long)]
    policy: String,
    /// Evaluate a policy file trained on another workload (its unmatched types
    /// make every affected decision a miss).
    #[arg(long)]
    allow_other_workload: bool,
    /// Timed runs; the median is reported.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `search eval --json` output.
#[derive(Serialize)]
struct Report {
    trace: String,
    workload: String,
    nodes: usize,
    policy: String,
    batches: u64,
    lower_bound: u64,
    ratio: f64,
    decisions: u64,
    misses: u64,
    miss_rate: f64,
    seconds: f64,
    repeat: usize,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let spec = super::load::policy(&a.policy)?;
    let trace = super::load::trace(&a.trace)?;
    super::load::check_workload(&spec, &trace, &a.trace, a.allow_other_workload)?;
    let st = SameTypeDag::new(&trace.graph);
    let mut policy = spec.instantiate()?;
    let out = super::load::evaluate(&trace, &st, policy.as_mut(), a.repeat)?;
    let lb = lower_bound(&trace.graph).total;
    // Every batch is one decision of the policy.
    let decisions = out.batches;
    let r = Report {
        trace: a.trace.display().to_string(),
        workload: trace.workload.clone(),
        nodes: trace.graph.len(),
        policy: spec.label(),
        batches: out.batches,
        lower_bound: lb,
        ratio: super::ratio(out.batches, lb),
        decisions,
        misses: out.misses,
        miss_rate: if decisions == 0 {
            0.0
        } else {
            out.misses as f64 / decisions as f64
        },
        seconds: out.seconds,
        repeat: a.repeat,
    };
    if a.json {
        return super::print_json(&r);
    }
    engine::outln!(
        "{} on {} ({}, {} nodes): {} batches, lower bound {} (ratio {:.3}), {} of {} decisions missed ({:.1}%), {:.3} ms per schedule (median of {}); schedule valid",
        r.policy,
        r.trace,
        r.workload,
        r.nodes,
        r.batches,
        r.lower_bound,
        r.ratio,
        r.misses,
        r.decisions,
        100.0 * r.miss_rate,
        1e3 * r.seconds,
        r.repeat
    );
    Ok(())
}
