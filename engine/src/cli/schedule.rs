//! `engine schedule`: the batches a policy picks for a trace, as a schedule
//! file (`docs/schedule-format.md`), or as a service that schedules every
//! trace it is sent (`--serve`: how `batchlab_torch.run` runs batchlab's
//! policies on each new mini-batch without a process per mini-batch).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use engine::graph::{Graph, lower_bound};
use engine::sched::schedule_file::ScheduleFile;
use engine::sched::{PolicyArg, Schedule, SameTypeDag, run_policy_on_demand};
use engine::trace::Trace;
use serde::Serialize;

/// Arguments of `engine schedule`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The trace to schedule.
    #[arg(long, conflicts_with_all = ["model", "serve"])]
    trace: Option<PathBuf>,
    /// A model folder (docs/torch.md): schedule its trace.
    #[arg(long, conflicts_with = "serve")]
    model: Option<PathBuf>,
    /// The batching policy: depth, agenda, agenda-updated, cavs, typewise,
    /// or a policy file P.yaml from `search train`.
    #[arg(long, default_value = "depth")]
    policy: String,
    /// Write the schedule file here.
    #[arg(long, conflicts_with = "serve")]
    out: Option<PathBuf>,
    /// Read traces from standard input, one JSON object per line, and answer
    /// each on one line of standard output with its batches (`{"batches":
    /// [[node, ...], ...], "lower_bound": L, "misses": M, "seconds": S}`, or
    /// `{"error": "..."}`), until the input ends.
    #[arg(long)]
    serve: bool,
    /// Print JSON instead of text.
    #[arg(long, conflicts_with = "serve")]
    json: bool,
}

/// `engine schedule --json` output.
#[derive(Serialize)]
struct Report {
    workload: String,
    policy: String,
    nodes: usize,
    batches: usize,
    lower_bound: u64,
    misses: u64,
    seconds: f64,
    out: Option<String>,
}

/// One `--serve` answer.
#[derive(Serialize)]
struct Answer {
    batches: Vec<Vec<u32>>,
    lower_bound: u64,
    misses: u64,
    seconds: f64,
}

/// The policy's schedule of `g`, its misses and the seconds it took.
fn schedule(g: &Graph, policy: &PolicyArg) -> anyhow::Result<(Schedule, u64, f64)> {
    let mut p = policy.instantiate()?;
    let t = Instant::now();
    let (s, stats, _) = run_policy_on_demand(g, p.as_mut(), &SameTypeDag::new, &mut |_| {})?;
    Ok((s, stats.misses, t.elapsed().as_secs_f64()))
}

fn parse_policy(name: &str) -> anyhow::Result<PolicyArg> {
    let arg = PolicyArg::parse(name).with_context(|| format!("--policy {name}"))?;
    if arg.trained_pass() == "backward" {
        bail!("--policy {name}: a backward-pass policy; schedule the forward pass with a forward one");
    }
    Ok(arg)
}

fn check_workload(policy: &PolicyArg, name: &str, workload: &str) -> anyhow::Result<()> {
    if let Some(trained) = policy.trained_workload()
        && trained != workload
    {
        bail!(
            "--policy {name}: trained for workload {trained}, but the trace is {workload}; train one on it with `search train --trace T.json --out P.yaml`"
        );
    }
    Ok(())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let policy = parse_policy(&a.policy)?;
    if a.serve {
        return serve(&a.policy, &policy);
    }
    let (trace, source) = match (&a.trace, &a.model) {
        (Some(p), _) => (super::read_trace(p)?, p.display().to_string()),
        (None, Some(d)) => {
            let dir = engine::modeldir::ModelDir::open(d)?;
            let src = d.join(&dir.manifest.files.trace).display().to_string();
            (dir.trace, src)
        }
        (None, None) => bail!("give --trace T.json, --model DIR or --serve"),
    };
    check_workload(&policy, &a.policy, &trace.workload)?;
    let g = &trace.graph;
    let (s, misses, seconds) = schedule(g, &policy)?;
    let lb = lower_bound(g).total;
    if let Some(out) = &a.out {
        let file = ScheduleFile::new(
            g,
            &s,
            &source,
            &trace.workload,
            lb,
            &format!("engine schedule --policy {}", a.policy),
        );
        file.write(out)?;
    }
    let report = Report {
        workload: trace.workload.clone(),
        policy: a.policy.clone(),
        nodes: g.len(),
        batches: s.len(),
        lower_bound: lb,
        misses,
        seconds,
        out: a.out.as_ref().map(|p| p.display().to_string()),
    };
    if a.json {
        return super::print_json(&report);
    }
    engine::outln!(
        "{} under {}: {} batches for {} nodes (lower bound {}), {} policy misses, {:.3} ms{}",
        report.workload,
        report.policy,
        report.batches,
        report.nodes,
        report.lower_bound,
        report.misses,
        report.seconds * 1e3,
        report
            .out
            .as_ref()
            .map_or(String::new(), |o| format!(" -> {o}"))
    );
    Ok(())
}

/// `--serve`: answers every trace on standard input, one line each; a bad
/// request gets an error line and the service goes on.
fn serve(name: &str, policy: &PolicyArg) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for (i, line) in stdin.lock().lines().enumerate() {
        let line = line.context("reading standard input")?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = Trace::from_json(&line, &format!("<request {}>", i + 1))
            .map_err(anyhow::Error::from)
            .and_then(|t| {
                check_workload(policy, name, &t.workload)?;
                let (s, misses, seconds) = schedule(&t.graph, policy)?;
                Ok(Answer {
                    batches: s
                        .batches()
                        .map(|(_, n)| n.iter().map(|v| v.0).collect())
                        .collect(),
                    lower_bound: lower_bound(&t.graph).total,
                    misses,
                    seconds,
                })
            });
        let text = match answer {
            Ok(a) => serde_json::to_string(&a)?,
            Err(e) => serde_json::to_string(&serde_json::json!({ "error": format!("{e:#}") }))?,
        };
        if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
            return Ok(()); // the client went away
        }
    }
    Ok(())
}
