//! Graphviz rendering of an FSM (ED-Batch Fig. 2(a)): a node per state labelled
//! `S_i: {types}/action`. A policy file holds states and actions but no
//! transitions, so edges come from replaying the policy on its training trace
//! (provenance.trace) and counting the successions observed; when that trace
//! cannot be read, only the states are drawn. A comment in the output says which.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use engine::dot::{Fsm, FsmEdge, FsmState, fsm_to_dot};
use engine::graph::Graph;
use engine::sched::{
    BatchPolicy, Choice, Encoding, Frontier, FsmPolicy, PolicyError, PolicyFile, SameTypeDag,
    StateEncoder, UNKNOWN, run_policy, tokens_to_key,
};
use engine::trace::Trace;

/// A state's tokens as text: `{a, b}` for the unordered base encoding, `[a, b]`
/// for the encodings where order carries meaning.
pub(crate) fn state_label(file: &PolicyFile, tokens: &[String]) -> String {
    let inner = tokens.join(", ");
    if file.encoding == Encoding::Base {
        format!("{{{inner}}}")
    } else {
        format!("[{inner}]")
    }
}

/// The dot text of `file` (read from `path`), written by `engine::dot`; an
/// error when its training trace reads but is another trace.
pub(crate) fn render(file: &PolicyFile, path: &Path) -> anyhow::Result<String> {
    let mut fsm = Fsm::default();
    fsm.comments.push(format!(
        "FSM of {} (encoding {}, workload {}), ED-Batch Fig. 2(a) style",
        path.display(),
        file.encoding.name(),
        file.workload
    ));
    let edges = match replay(file, path) {
        Ok((trace_path, visits, misses)) => {
            fsm.comments.push(format!(
                "edges: transitions observed replaying the policy on its training trace {} ({} decisions, {} misses); edge labels count them",
                trace_path.display(),
                visits.len(),
                misses
            ));
            Some(count_edges(&visits))
        }
        Err(NoReplay::Mismatch(why)) => anyhow::bail!(why),
        Err(NoReplay::Unreadable(why)) => {
            fsm.comments.push(format!(
                "states only: no transitions drawn, the training trace is not readable ({why})"
            ));
            None
        }
    };
    for (i, s) in file.states.iter().enumerate() {
        let label = format!("S{i}: {}/{}", state_label(file, &s.state), s.action);
        fsm.states.push(FsmState::new(format!("S{i}"), label));
    }
    if let Some(edges) = edges {
        fsm.states
            .push(FsmState::new("start", "").with("shape", "point"));
        fsm.states
            .push(FsmState::new("end", "").with("shape", "doublecircle"));
        if edges.keys().any(|(a, b)| a == UNSEEN || b == UNSEEN) {
            fsm.states.push(
                FsmState::new(UNSEEN, "state not in table / typewise")
                    .with("shape", "ellipse")
                    .with("style", "dashed"),
            );
        }
        for ((a, b), n) in &edges {
            fsm.edges.push(FsmEdge {
                from: a.clone(),
                to: b.clone(),
                label: n.to_string(),
            });
        }
    }
    // Every edge joins declared states (start, end, unseen, S_i).
    Ok(fsm_to_dot(&fsm).unwrap_or_else(|e| format!("// {e}\n")))
}

const UNSEEN: &str = "unseen";

/// Edge counts between consecutive decisions, from `start` to `end`; ordered
/// by name so the output is stable.
fn count_edges(visits: &[Option<usize>]) -> BTreeMap<(String, String), u64> {
    let name = |v: &Option<usize>| v.map_or(UNSEEN.to_string(), |i| format!("S{i}"));
    let mut seq = vec!["start".to_string()];
    seq.extend(visits.iter().map(name));
    seq.push("end".to_string());
    let mut edges = BTreeMap::new();
    for w in seq.windows(2) {
        *edges.entry((w[0].clone(), w[1].clone())).or_insert(0) += 1;
    }
    edges
}

/// Why no transitions can be drawn.
enum NoReplay {
    /// No candidate trace reads: draw the states only, and say so.
    Unreadable(String),
    /// A trace reads but is not the one the policy was trained on: drawing
    /// its transitions would be wrong, so this is an error.
    Mismatch(String),
}

/// The training trace: the path as recorded, else relative to the policy
/// file; the first that reads and matches the policy's provenance.
fn find_trace(file: &PolicyFile, policy: &Path) -> Result<(PathBuf, Trace), NoReplay> {
    let given = PathBuf::from(&file.provenance.trace);
    let mut tried = vec![given.clone()];
    if given.is_relative()
        && let Some(dir) = policy.parent()
    {
        tried.push(dir.join(&given));
    }
    let mut last = String::new();
    let mut mismatch = None;
    for p in tried {
        match Trace::read(&p) {
            Ok(t) => match file.provenance_mismatch(&t) {
                None => return Ok((p, t)),
                Some(why) => {
                    mismatch.get_or_insert_with(|| {
                        format!(
                            "{}: field `provenance.trace` names {}, which is not the trace this policy was trained on: {why}; draw it with the training trace in place, or retrain on this one (`search train --trace {} --out P.yaml`)",
                            policy.display(),
                            p.display(),
                            p.display()
                        )
                    });
                }
            },
            Err(e) => last = e.to_string(),
        }
    }
    Err(mismatch.map_or(NoReplay::Unreadable(last), NoReplay::Mismatch))
}

/// Replays the policy on its training trace: the table state of every decision
/// (`None` for a state not in the table) and the miss count.
fn replay(
    file: &PolicyFile,
    policy: &Path,
) -> Result<(PathBuf, Vec<Option<usize>>, u64), NoReplay> {
    let (path, trace) = find_trace(file, policy)?;
    let mut index = HashMap::new();
    for (i, s) in file.states.iter().enumerate() {
        if let Some(k) = tokens_to_key(&s.state, &file.types) {
            index.insert(k, i);
        }
    }
    let fsm = FsmPolicy::new(file.clone()).map_err(|e| NoReplay::Unreadable(e.to_string()))?;
    let mut rec = Recorder {
        fsm,
        encoder: StateEncoder::new(file.encoding),
        types: file.types.clone(),
        rank: Vec::new(),
        key: Vec::new(),
        index,
        visits: Vec::new(),
        last: None,
    };
    let st = SameTypeDag::new(&trace.graph);
    let (_, stats) =
        run_policy(&trace.graph, &st, &mut rec).map_err(|e| NoReplay::Unreadable(e.to_string()))?;
    Ok((path, rec.visits, stats.misses))
}

/// The FSM, noting which table state each decision was taken in.
struct Recorder {
    fsm: FsmPolicy,
    encoder: StateEncoder,
    types: Vec<String>,
    rank: Vec<u16>,
    key: Vec<u16>,
    index: HashMap<Vec<u16>, usize>,
    visits: Vec<Option<usize>>,
    /// The last batch, for encoders that follow the run (`sort-crit*`).
    last: Option<(engine::graph::TypeId, Vec<engine::graph::NodeId>)>,
}

impl BatchPolicy for Recorder {
    fn name(&self) -> String {
        self.fsm.name()
    }

    /// Tokens by exact type name: the training trace's own names are the
    /// policy's types, so nothing looser is needed here.
    fn prepare(&mut self, g: &Graph) -> Result<(), PolicyError> {
        self.fsm.prepare(g)?;
        self.rank = g
            .types()
            .iter()
            .map(|(_, op)| {
                self.types
                    .binary_search(&op.name)
                    .ok()
                    .and_then(|i| u16::try_from(i).ok())
                    .unwrap_or(UNKNOWN)
            })
            .collect();
        self.visits.clear();
        Ok(())
    }

    fn choose(&mut self, f: &Frontier) -> Choice {
        if f.batches() == 0 {
            self.encoder.start(f);
        } else if let Some((t, batch)) = &self.last {
            self.encoder.observe(f, *t, batch);
        }
        self.encoder.encode(f, &self.rank, &mut self.key);
        self.visits.push(self.index.get(&self.key).copied());
        self.fsm.choose(f)
    }

    fn executed(&mut self, g: &Graph, batch: &[engine::graph::NodeId]) {
        self.fsm.executed(g, batch);
        if let Some(&v) = batch.first() {
            self.last = Some((g.node_type(v), batch.to_vec()));
        }
    }

    fn misses(&self) -> u64 {
        self.fsm.misses()
    }
}
