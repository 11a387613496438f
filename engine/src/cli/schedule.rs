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
use engine::sched::{PolicyArg, SameTypeDag, Schedule, run_policy_on_demand};
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
    /// Read graphs from standard input, one JSON object per line (a trace,
    /// or the compact form `{"workload": W, "types": [name, ...], "type_of":
    /// [t, ...], "arg_ptr": [0, ...], "args": [node, ...], "instance": [i,
    /// ...]}`: node v's arguments are args[arg_ptr[v]..arg_ptr[v+1]]), and
    /// answer each on one line of standard output with its batches
    /// (`{"batches": [[node, ...], ...], "lower_bound": L, "misses": M,
    /// "seconds": S}`, or `{"error": "..."}`), until the input ends.
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

/// `--serve`'s compact request: a graph in CSR form.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphRequest {
    workload: String,
    types: Vec<String>,
    type_of: Vec<u32>,
    arg_ptr: Vec<u32>,
    args: Vec<u32>,
    #[serde(default)]
    instance: Vec<u32>,
}

impl GraphRequest {
    /// The graph, checked as a trace's is (indices in range, no cycles).
    fn graph(&self) -> anyhow::Result<Graph> {
        let n = self.type_of.len();
        if self.arg_ptr.len() != n + 1 || (!self.instance.is_empty() && self.instance.len() != n) {
            bail!("arg_ptr must have one entry more than type_of, instance as many");
        }
        let mut b = engine::graph::GraphBuilder::new();
        for name in &self.types {
            b.types_mut().intern(name, true)?;
        }
        b.reserve(n, self.args.len());
        for v in 0..n {
            let (lo, hi) = (self.arg_ptr[v] as usize, self.arg_ptr[v + 1] as usize);
            if lo > hi || hi > self.args.len() {
                bail!("node {v}: arg_ptr out of order or past args");
            }
            let args: Vec<engine::graph::NodeId> = self.args[lo..hi]
                .iter()
                .map(|&a| engine::graph::NodeId(a))
                .collect();
            b.add_node(
                engine::graph::TypeId(self.type_of[v]),
                &args,
                self.instance.get(v).copied(),
            );
        }
        Ok(b.finish()?)
    }
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
        bail!(
            "--policy {name}: a backward-pass policy; schedule the forward pass with a forward one"
        );
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

/// A `--serve` request: a trace, or the compact graph form.
fn parse_request(line: &str, what: &str) -> anyhow::Result<(String, Graph)> {
    if line.contains("\"format\"") {
        let t = Trace::from_json(line, what)?;
        return Ok((t.workload, t.graph));
    }
    let r: GraphRequest = serde_json::from_str(line)
        .with_context(|| format!("{what}: not a trace nor a graph request"))?;
    let g = r.graph().with_context(|| what.to_string())?;
    Ok((r.workload, g))
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
        let what = format!("<request {}>", i + 1);
        let answer = parse_request(&line, &what).and_then(|(workload, g)| {
            check_workload(policy, name, &workload)?;
            let (s, misses, seconds) = schedule(&g, policy)?;
            Ok(Answer {
                batches: s
                    .batches()
                    .map(|(_, n)| n.iter().map(|v| v.0).collect())
                    .collect(),
                lower_bound: lower_bound(&g).total,
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
