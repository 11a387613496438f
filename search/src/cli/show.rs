//! `search show`: a policy's FSM as a table (state → action, Q values), as
//! JSON, or as Graphviz dot in the style of ED-Batch Fig. 2(a).

use std::path::PathBuf;

use engine::sched::PolicyFile;
use serde::Serialize;

/// Arguments of `search show`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy file (YAML).
    #[arg(long)]
    policy: PathBuf,
    /// Print Graphviz dot: one node per state, `S_i: {types}/action`, and the
    /// transitions observed replaying the policy on its training trace.
    #[arg(long, conflicts_with = "json")]
    dot: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One state in `search show --json`.
#[derive(Serialize)]
struct State<'a> {
    id: String,
    state: &'a [String],
    action: &'a str,
    q: &'a std::collections::BTreeMap<String, f64>,
}

/// `search show --json` output.
#[derive(Serialize)]
struct Report<'a> {
    policy: String,
    encoding: &'static str,
    workload: &'a str,
    trace: &'a str,
    types: &'a [String],
    states: Vec<State<'a>>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let file = PolicyFile::read(&a.policy)?;
    if a.dot {
        print!("{}", super::dot::render(&file, &a.policy)?);
        return Ok(());
    }
    let r = Report {
        policy: a.policy.display().to_string(),
        encoding: file.encoding.name(),
        workload: &file.workload,
        trace: &file.provenance.trace,
        types: &file.types,
        states: file
            .states
            .iter()
            .enumerate()
            .map(|(i, s)| State {
                id: format!("S{i}"),
                state: &s.state,
                action: &s.action,
                q: &s.q,
            })
            .collect(),
    };
    if a.json {
        return super::print_json(&r);
    }
    let t = &file.training;
    engine::outln!(
        "{}: encoding {}, workload {}, trained on {} ({} nodes), {} episodes, {} batches (lower bound {}), {} states",
        r.policy,
        r.encoding,
        r.workload,
        r.trace,
        file.provenance.nodes,
        t.episodes,
        t.best_batches,
        t.lower_bound,
        r.states.len()
    );
    for s in &r.states {
        let q: Vec<String> = s.q.iter().map(|(a, v)| format!("{a}={v:.3}")).collect();
        engine::outln!(
            "{:>4}  {} -> {}    Q: {}",
            s.id,
            super::dot::state_label(&file, s.state),
            s.action,
            q.join(" ")
        );
    }
    Ok(())
}
