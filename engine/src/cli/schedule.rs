//! `engine schedule`: the batches a policy picks for a trace, as a schedule
//! file (`docs/schedule-format.md`), or as a service that schedules every
//! trace it is sent (`--serve`: how `batchlab_torch.run` runs batchlab's
//! policies on each new mini-batch without a process per mini-batch).

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use engine::graph::{Graph, lower_bound};
use engine::sched::schedule_file::ScheduleFile;
use engine::sched::{PolicyArg, RunStats, SameTypeDag, Schedule, run_policy_on_demand};
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
    /// "deferred": D, "seconds": S}`, or `{"error": "..."}`), until the input
    /// ends.
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
    /// Decisions of a policy file's FSM in states it does not hold.
    misses: u64,
    /// Decisions its table hands to the fallback by design.
    deferred: u64,
    seconds: f64,
    out: Option<String>,
}

/// One `--serve` answer.
#[derive(Serialize)]
struct Answer {
    batches: Vec<Vec<u32>>,
    /// `null` where a binary request asked for none (`"bound": false`).
    lower_bound: Option<u64>,
    misses: u64,
    deferred: u64,
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
        // One conversion of every argument; each node adds its slice.
        let args: Vec<engine::graph::NodeId> = self
            .args
            .iter()
            .map(|&a| engine::graph::NodeId(a))
            .collect();
        for v in 0..n {
            let (lo, hi) = (self.arg_ptr[v] as usize, self.arg_ptr[v + 1] as usize);
            if lo > hi || hi > args.len() {
                bail!("node {v}: arg_ptr out of order or past args");
            }
            b.add_node(
                engine::graph::TypeId(self.type_of[v]),
                &args[lo..hi],
                self.instance.get(v).copied(),
            );
        }
        Ok(b.finish()?)
    }
}

/// The policy's schedule of `g`, its counters and the seconds it took.
fn schedule(g: &Graph, policy: &PolicyArg) -> anyhow::Result<(Schedule, RunStats, f64)> {
    let mut p = policy.instantiate()?;
    let t = Instant::now();
    let (s, stats, _) = run_policy_on_demand(g, p.as_mut(), &SameTypeDag::new, &mut |_| {})?;
    Ok((s, stats, t.elapsed().as_secs_f64()))
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
    if let Some(out) = &a.out {
        let mut owned = super::source_inputs(&a.model, &a.trace);
        owned.extend(super::policy_input("--policy", Some(&a.policy)));
        engine::io::distinct_outputs(&super::pairs(&owned), &[("--out", out)])?;
    }
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
    let (s, stats, seconds) = schedule(g, &policy)?;
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
        misses: stats.misses,
        deferred: stats.deferred,
        seconds,
        out: a.out.as_ref().map(|p| p.display().to_string()),
    };
    if a.json {
        return super::print_json(&report);
    }
    engine::outln!(
        "{} under {}: {} batches for {} nodes (lower bound {}), {} policy misses, {} deferred, {:.3} ms{}",
        report.workload,
        report.policy,
        report.batches,
        report.nodes,
        report.lower_bound,
        report.misses,
        report.deferred,
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

/// `--serve`: answers every request on standard input, one answer each;
/// a bad request gets an error answer and the service goes on.
fn serve(name: &str, policy: &PolicyArg) -> anyhow::Result<()> {
    // One request after another allocates the same buffers: keep their pages.
    super::memory::keep_freed_memory();
    let mut input = std::io::BufReader::new(std::io::stdin().lock());
    let mut out = std::io::stdout().lock();
    let mut line = String::new();
    for i in 1.. {
        line.clear();
        if input
            .read_line(&mut line)
            .context("reading standard input")?
            == 0
        {
            return Ok(());
        }
        if line.trim().is_empty() {
            continue;
        }
        let what = format!("<request {i}>");
        let binary = line.starts_with("B ");
        let request = if binary {
            binary_request(&line[2..], &mut input, &what)
        } else {
            parse_request(&line, &what).map(|(w, g)| (w, g, true))
        };
        let answer = request.and_then(|(workload, g, bound)| {
            check_workload(policy, name, &workload)?;
            let (s, stats, seconds) = schedule(&g, policy)?;
            Ok(Answer {
                batches: s
                    .batches()
                    .map(|(_, n)| n.iter().map(|v| v.0).collect())
                    .collect(),
                lower_bound: bound.then(|| lower_bound(&g).total),
                misses: stats.misses,
                deferred: stats.deferred,
                seconds,
            })
        });
        let written = match (answer, binary) {
            (Ok(a), true) => {
                let head = serde_json::json!({
                    "lower_bound": a.lower_bound,
                    "misses": a.misses,
                    "deferred": a.deferred,
                    "seconds": a.seconds,
                    "batch_sizes": a.batches.iter().map(Vec::len).collect::<Vec<_>>(),
                });
                let mut bytes =
                    Vec::with_capacity(4 * a.batches.iter().map(Vec::len).sum::<usize>());
                for v in a.batches.iter().flatten() {
                    bytes.extend(v.to_le_bytes());
                }
                writeln!(out, "{head}").and_then(|()| out.write_all(&bytes))
            }
            (Ok(a), false) => writeln!(out, "{}", serde_json::to_string(&a)?),
            (Err(e), _) => writeln!(
                out,
                "{}",
                serde_json::to_string(&serde_json::json!({ "error": format!("{e:#}") }))?
            ),
        };
        if written.and_then(|()| out.flush()).is_err() {
            return Ok(()); // the client went away
        }
    }
    Ok(())
}

/// A binary request's header (after `B `).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BinaryHead {
    workload: String,
    types: Vec<String>,
    nodes: usize,
    args: usize,
    /// Whether to answer the A.3 lower bound too (default true; a client
    /// that does not read it saves the service a pass per type).
    #[serde(default = "yes")]
    bound: bool,
}

fn yes() -> bool {
    true
}

/// `B {"workload", "types", "nodes": N, "args": M[, "bound": false]}` then, little-endian
/// u32: `type_of[N]`, `arg_ptr[N+1]`, `args[M]`, `instance[N]` — the compact
/// form without JSON's cost (what `batchlab_torch.run` sends). The bytes
/// are read even when the header is refused, so the stream stays in step.
fn binary_request(
    head: &str,
    input: &mut impl std::io::BufRead,
    what: &str,
) -> anyhow::Result<(String, Graph, bool)> {
    let h: BinaryHead = match serde_json::from_str(head) {
        Ok(h) => h,
        Err(e) => {
            // A refused header still announces its words: skip them, so the
            // next request is read from its start (where the header does not
            // say how many, nothing can be skipped).
            let v: Option<serde_json::Value> = serde_json::from_str(head).ok();
            let sizes = v
                .as_ref()
                .and_then(|v| Some((v.get("nodes")?.as_u64()?, v.get("args")?.as_u64()?)));
            if let Some((n, m)) = sizes.filter(|&(n, m)| n.max(m) < u64::from(u32::MAX)) {
                let words = 3 * n + 1 + m;
                std::io::copy(&mut (&mut *input).take(4 * words), &mut std::io::sink())
                    .with_context(|| format!("{what}: skipping the refused request's words"))?;
            }
            return Err(anyhow::Error::new(e).context(format!("{what}: binary request header")));
        }
    };
    // Refuse sizes no graph has before reading (and allocating) them.
    if h.nodes >= u32::MAX as usize || h.args >= u32::MAX as usize {
        bail!(
            "{what}: {} nodes and {} arguments: more than a graph holds",
            h.nodes,
            h.args
        );
    }
    let words = 3 * h.nodes + 1 + h.args;
    // Read what arrives rather than allocating what the header claims.
    let mut bytes = Vec::new();
    input
        .take(4 * words as u64)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{what}: reading the request's words"))?;
    if bytes.len() != 4 * words {
        bail!(
            "{what}: the request ends after {} of its {words} words",
            bytes.len() / 4
        );
    }
    let words_of = |from: usize, to: usize| -> Vec<u32> {
        bytes[4 * from..4 * to]
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect()
    };
    let (n, m) = (h.nodes, h.args);
    let r = GraphRequest {
        workload: h.workload,
        types: h.types,
        type_of: words_of(0, n),
        arg_ptr: words_of(n, 2 * n + 1),
        args: words_of(2 * n + 1, 2 * n + 1 + m),
        instance: words_of(2 * n + 1 + m, words),
    };
    let g = r.graph().with_context(|| what.to_string())?;
    Ok((r.workload, g, h.bound))
}
