//! The learned FSM at run time: encode the frontier, look the state up in the
//! Q-table, batch the stored action; on a state never seen in training, ask a
//! fallback heuristic (default `typewise`) and count the miss.

use std::collections::HashMap;

use super::encoding::{COMPLETE, PHASE, StateEncoder, UNKNOWN};
use super::frontier::Frontier;
use super::heuristics::TypewisePolicy;
use super::policy::{BatchPolicy, Choice, PolicyError};
use super::policy_file::{PolicyFile, PolicyFileError};
use crate::graph::{Graph, TypeId};

/// Renders a state key as file tokens (type names, `*name`, `phase:K`).
pub fn key_to_tokens(key: &[u16], types: &[String]) -> Vec<String> {
    key.iter()
        .map(|&tok| {
            if tok & PHASE != 0 {
                format!("phase:{}", tok & !PHASE)
            } else {
                let name = types
                    .get(usize::from(tok & !COMPLETE))
                    .map_or("?", String::as_str);
                if tok & COMPLETE != 0 {
                    format!("*{name}")
                } else {
                    name.to_string()
                }
            }
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
            let (name, flag) = match tok.strip_prefix('*') {
                Some(n) => (n, COMPLETE),
                None => (tok.as_str(), 0),
            };
            let i = types.binary_search_by(|t| t.as_str().cmp(name)).ok()?;
            u16::try_from(i)
                .ok()
                .filter(|i| *i < UNKNOWN)
                .map(|i| i | flag)
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
}

impl FsmPolicy {
    /// An FSM from a policy file, falling back to `typewise` on unseen states.
    pub fn new(file: PolicyFile) -> Result<Self, PolicyFileError> {
        Self::with_fallback(file, Box::new(TypewisePolicy))
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
            let action = tokens_to_key(std::slice::from_ref(&s.action), &file.types)
                .and_then(|k| k.first().copied())
                .ok_or_else(|| bad("bad action"))?;
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
}

impl BatchPolicy for FsmPolicy {
    fn name(&self) -> String {
        format!("fsm({})", self.file.encoding.name())
    }

    /// Maps the graph's type ids to the policy's tokens: by exact name, else by
    /// name with the hidden size abstracted. Unmatched types get [`UNKNOWN`].
    fn prepare(&mut self, g: &Graph) -> Result<(), PolicyError> {
        self.fallback.prepare(g)?;
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
        self.encoder.encode(f, &self.rank, &mut self.key);
        if let Some(&action) = self.table.get(self.key.as_slice())
            && let Some(Some(t)) = self.action_type.get(usize::from(action))
            && f.ready_count(*t) > 0
        {
            return Choice::All(*t);
        }
        self.misses += 1;
        self.fallback.choose(f)
    }

    fn executed(&mut self, g: &Graph, batch: &[crate::graph::NodeId]) {
        self.fallback.executed(g, batch);
    }

    fn misses(&self) -> u64 {
        self.misses
    }

    /// Only the sort-cond encoding reads |Frontier(G^t)| itself; otherwise it is
    /// the fallback's need (typewise reads it, on misses).
    fn needs_sub_frontier(&self) -> bool {
        self.file.encoding == super::encoding::Encoding::SortCond
            || self.fallback.needs_sub_frontier()
    }
}
