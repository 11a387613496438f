//! The learned FSM at run time: encode the frontier, look the state up in the
//! Q-table, batch the stored action; on a state never seen in training, ask a
//! fallback heuristic (default `typewise`) and count the miss. A state whose
//! stored action is [`DEFER_ACTION`] is decided by the fallback too, as the
//! policy says, and counted as deferred, not missed.

use std::collections::HashMap;

use super::encoding::{
    COMPLETE, CRITICAL, PHASE, RATIO, RATIO_BUCKETS, RATIO_SHIFT, StateEncoder, TYPE_MASK, UNKNOWN,
};
use super::frontier::Frontier;
use super::heuristics::TypewisePolicy;
use super::policy::{BatchPolicy, Choice, PolicyError};
use super::policy_file::{PolicyFile, PolicyFileError};
use crate::graph::{Graph, TypeId};

/// The action of a state the policy hands to its fallback heuristic: the
/// state's visits in training took different actions that the encoding cannot
/// tell apart, and the fallback made each of them (policy version 3).
pub const DEFER_ACTION: &str = "(fallback)";

/// [`DEFER_ACTION`] in the runtime table and the trainer's Q-table.
pub const DEFER: u16 = u16::MAX;

/// Renders a state key as file tokens: a type name, prefixed `*` when complete
/// and `!` when critical, suffixed `@q` with its ratio bucket q ≥ 1
/// (`sort-crit-ratio`; no suffix is bucket 0); or `phase:K`.
pub fn key_to_tokens(key: &[u16], types: &[String]) -> Vec<String> {
    key.iter()
        .map(|&tok| {
            if tok & PHASE != 0 {
                return format!("phase:{}", tok & !PHASE);
            }
            let name = types
                .get(usize::from(tok & TYPE_MASK))
                .map_or("?", String::as_str);
            let mut out = String::with_capacity(name.len() + 4);
            if tok & COMPLETE != 0 {
                out.push('*');
            }
            if tok & CRITICAL != 0 {
                out.push('!');
            }
            out.push_str(name);
            if tok & RATIO != 0 {
                out.push('@');
                out.push_str(&((tok & RATIO) >> RATIO_SHIFT).to_string());
            }
            out
        })
        .collect()
}

/// Parses file tokens back into a state key (inverse of [`key_to_tokens`]).
pub fn tokens_to_key(tokens: &[String], types: &[String]) -> Option<Vec<u16>> {
    tokens
        .iter()
        .map(|tok| {
            if let Some(p) = tok.strip_prefix("phase:") {
                return p
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p < PHASE)
                    .map(|p| PHASE | p);
            }
            let mut flags = 0u16;
            let mut rest = tok.as_str();
            if let Some(r) = rest.strip_prefix('*') {
                flags |= COMPLETE;
                rest = r;
            }
            if let Some(r) = rest.strip_prefix('!') {
                flags |= CRITICAL;
                rest = r;
            }
            let index = |name: &str| {
                let i = types.binary_search_by(|t| t.as_str().cmp(name)).ok()?;
                u16::try_from(i).ok().filter(|i| *i < UNKNOWN)
            };
            // A ratio suffix `@q`, unless the whole rest is itself a type name.
            if let Some(i) = index(rest) {
                return Some(i | flags);
            }
            let (name, q) = rest.rsplit_once('@')?;
            let q: u16 = q.parse().ok().filter(|q| *q < RATIO_BUCKETS)?;
            index(name).map(|i| i | flags | (q << RATIO_SHIFT))
        })
        .collect()
}

/// A type name with the hidden size abstracted (`lstm.fwd[h=64]` → `lstm.fwd[h=*]`),
/// so a policy trained at one hidden size applies at another: batching
/// decisions do not depend on tensor sizes.
fn size_free(name: &str) -> String {
    match name.find("[h=") {
        Some(i) if name.ends_with(']') => format!("{}[h=*]", &name[..i]),
        _ => name.to_string(),
    }
}

/// The runtime FSM policy.
pub struct FsmPolicy {
    file: PolicyFile,
    encoder: StateEncoder,
    table: HashMap<Box<[u16]>, u16>,
    fallback: Box<dyn BatchPolicy + Send>,
    rank: Vec<u16>,
    action_type: Vec<Option<TypeId>>,
    key: Vec<u16>,
    misses: u64,
    deferred: u64,
    /// The last batch (its type and nodes), for encoders that follow steps;
    /// `choose` hands it to the encoder, which needs the frontier after it.
    last: Option<(TypeId, Vec<crate::graph::NodeId>)>,
}

impl FsmPolicy {
    /// An FSM from a policy file, falling back on unseen states to the file's
    /// `fallback` heuristic (`typewise` when absent).
    pub fn new(file: PolicyFile) -> Result<Self, PolicyFileError> {
        let fallback: Box<dyn BatchPolicy + Send> = match &file.fallback {
            None => Box::new(TypewisePolicy),
            Some(name) => super::heuristic(name).ok_or_else(|| PolicyFileError::Invalid {
                file: file.provenance.trace.clone(),
                message: format!("field `fallback`: unknown heuristic {name:?}"),
            })?,
        };
        Self::with_fallback(file, fallback)
    }

    /// An FSM with a chosen fallback heuristic.
    pub fn with_fallback(
        file: PolicyFile,
        fallback: Box<dyn BatchPolicy + Send>,
    ) -> Result<Self, PolicyFileError> {
        let mut table = HashMap::with_capacity(file.states.len());
        for (i, s) in file.states.iter().enumerate() {
            let bad = |what: &str| PolicyFileError::Invalid {
                file: file.provenance.trace.clone(),
                message: format!("states[{i}]: {what}"),
            };
            let key = tokens_to_key(&s.state, &file.types).ok_or_else(|| bad("bad state"))?;
            let action = if s.action == DEFER_ACTION {
                DEFER
            } else {
                tokens_to_key(std::slice::from_ref(&s.action), &file.types)
                    .and_then(|k| k.first().copied())
                    .ok_or_else(|| bad("bad action"))?
            };
            table.insert(key.into_boxed_slice(), action);
        }
        Ok(FsmPolicy {
            encoder: StateEncoder::new(file.encoding),
            file,
            table,
            fallback,
            rank: Vec::new(),
            action_type: Vec::new(),
            key: Vec::new(),
            misses: 0,
            deferred: 0,
            last: None,
        })
    }

    /// The policy file behind this FSM.
    pub fn file(&self) -> &PolicyFile {
        &self.file
    }

    /// Number of states in the table.
    pub fn num_states(&self) -> usize {
        self.table.len()
    }

    /// Encodes `f` and returns the table's decision for it: the stored
    /// action, if the state is in the table and its action has a ready node;
    /// [`Decision::Defer`] where the table hands the state to the fallback;
    /// else a miss.
    fn table_action(&mut self, f: &Frontier) -> Decision {
        self.encoder.encode(f, &self.rank, &mut self.key);
        let Some(&action) = self.table.get(self.key.as_slice()) else {
            return Decision::Miss;
        };
        if action == DEFER {
            return Decision::Defer;
        }
        match self.action_type.get(usize::from(action)).copied().flatten() {
            Some(t) if f.ready_count(t) > 0 => Decision::Batch(t),
            _ => Decision::Miss,
        }
    }
}

/// What the table says in one state.
enum Decision {
    /// Batch this type.
    Batch(TypeId),
    /// The table hands the state to the fallback.
    Defer,
    /// The state is not in the table, or its action has no ready node.
    Miss,
}

impl BatchPolicy for FsmPolicy {
    fn name(&self) -> String {
        format!("fsm({})", self.file.encoding.name())
    }

    /// Maps the graph's type ids to the policy's tokens: by exact name, else by
    /// name with the hidden size abstracted. Unmatched types get [`UNKNOWN`].
    fn prepare(&mut self, g: &Graph) -> Result<(), PolicyError> {
        self.fallback.prepare(g)?;
        self.last = None;
        let exact: HashMap<&str, u16> = self
            .file
            .types
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i as u16))
            .collect();
        let loose: HashMap<String, u16> = self
            .file
            .types
            .iter()
            .enumerate()
            .map(|(i, n)| (size_free(n), i as u16))
            .collect();
        self.action_type = vec![None; self.file.types.len()];
        self.rank = g
            .types()
            .iter()
            .map(|(t, op)| {
                let tok = exact
                    .get(op.name.as_str())
                    .copied()
                    .or_else(|| loose.get(&size_free(&op.name)).copied());
                if let Some(tok) = tok {
                    self.action_type[usize::from(tok)] = Some(t);
                }
                tok.unwrap_or(UNKNOWN)
            })
            .collect();
        Ok(())
    }

    fn choose(&mut self, f: &Frontier) -> Choice {
        if f.batches() == 0 {
            self.encoder.start(f);
            self.last = None;
        } else if let Some((t, batch)) = &self.last {
            self.encoder.observe(f, *t, batch);
        }
        match self.table_action(f) {
            Decision::Batch(t) => return Choice::All(t),
            Decision::Defer => self.deferred += 1,
            Decision::Miss => self.misses += 1,
        }
        self.fallback.choose(f)
    }

    fn executed(&mut self, g: &Graph, batch: &[crate::graph::NodeId]) {
        self.fallback.executed(g, batch);
        if self.file.encoding.needs_bound()
            && let Some(&v) = batch.first()
        {
            let last = self
                .last
                .get_or_insert_with(|| (g.node_type(v), Vec::new()));
            last.0 = g.node_type(v);
            last.1.clear();
            last.1.extend_from_slice(batch);
        }
    }

    fn misses(&self) -> u64 {
        self.misses
    }

    fn deferred(&self) -> u64 {
        self.deferred
    }

    /// Only the sort-cond and sort-crit encodings read |Frontier(G^t)|
    /// themselves; otherwise it is the fallback's need (typewise reads it, on
    /// misses).
    fn needs_sub_frontier(&self) -> bool {
        self.file.encoding.needs_sub_frontier() || self.fallback.needs_sub_frontier()
    }

    /// On demand when only the fallback reads it: a run the table covers
    /// never builds the exact same-type DAG.
    fn sub_frontier_on_demand(&self) -> bool {
        !self.file.encoding.needs_sub_frontier() && self.fallback.needs_sub_frontier()
    }

    /// The fallback decides next: the state's key is not in the table (or
    /// its action has no ready node), or the table defers it. Encoders that
    /// follow steps are never on demand, so encoding here has no side effect.
    fn wants_sub_frontier(&mut self, f: &Frontier) -> bool {
        !matches!(self.table_action(f), Decision::Batch(_))
    }
}
