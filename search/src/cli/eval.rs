//! `search eval`: one policy on one trace — batches against the lower bound,
//! overall and per type, FSM misses, and the median scheduling time; the
//! schedule is validated.

use std::path::PathBuf;

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
    /// Timed runs; the median is reported. [range: 1 to 100000]
    #[arg(long, default_value_t = 5, value_parser = engine::tool::int_in(engine::tool::ranges::REPEAT))]
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
    /// Decisions the FSM's table hands to its fallback by design (states
    /// whose training visits the encoding cannot tell apart).
    deferred: u64,
    seconds: f64,
    repeat: usize,
    /// Per node type, in type-id order (types without nodes left out).
    by_type: Vec<TypeRow>,
}

/// One type's share of the schedule: where a policy saves batches matters as
/// much as how many (on a lattice the FSM's saving is nearly all loss cells,
/// whose batches cost microseconds on a CPU).
#[derive(Serialize)]
struct TypeRow {
    #[serde(rename = "type")]
    name: String,
    nodes: u64,
    batches: u64,
    /// The type's term of the lower bound (its longest same-type chain, or
    /// its node count when it cannot batch).
    lower_bound: u64,
    /// Nodes of its largest batch.
    largest: u64,
}

/// Per-type rows of `schedule` on `g`.
fn by_type(
    g: &engine::graph::Graph,
    schedule: &engine::sched::Schedule,
    bound: &[u64],
) -> Vec<TypeRow> {
    let types = g.types();
    let mut rows: Vec<TypeRow> = (0..types.len())
        .map(|i| TypeRow {
            name: types.name(engine::graph::TypeId(i as u32)).to_string(),
            nodes: 0,
            batches: 0,
            lower_bound: bound.get(i).copied().unwrap_or(0),
            largest: 0,
        })
        .collect();
    for (t, nodes) in schedule.batches() {
        let r = &mut rows[t.index()];
        r.batches += 1;
        r.nodes += nodes.len() as u64;
        r.largest = r.largest.max(nodes.len() as u64);
    }
    rows.retain(|r| r.nodes > 0);
    rows
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let spec = super::load::policy(&a.policy)?;
    let trace = super::load::trace(&a.trace)?;
    super::load::check_workload(&spec, &trace, &a.trace, a.allow_other_workload)?;
    let st = SameTypeDag::new(&trace.graph);
    let mut policy = spec.instantiate()?;
    let out = super::load::evaluate(&trace, &st, policy.as_mut(), a.repeat)?;
    let bound = lower_bound(&trace.graph);
    let lb = bound.total;
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
        deferred: out.deferred,
        seconds: out.seconds,
        repeat: a.repeat,
        by_type: by_type(&trace.graph, &out.schedule, &bound.per_type),
    };
    if a.json {
        return super::print_json(&r);
    }
    engine::outln!(
        "{} on {} ({}, {} nodes): {} batches, lower bound {} (ratio {:.3}), {} of {} decisions missed ({:.1}%), {} deferred, {:.3} ms per schedule (median of {}); schedule valid",
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
        r.deferred,
        1e3 * r.seconds,
        r.repeat
    );
    for t in &r.by_type {
        engine::outln!(
            "  {}: {} nodes in {} batch{} (lower bound {}, largest {})",
            t.name,
            t.nodes,
            t.batches,
            if t.batches == 1 { "" } else { "es" },
            t.lower_bound,
            t.largest
        );
    }
    Ok(())
}
