//! The policy file (YAML, `docs/policy-format.md`): a learned FSM — its encoding,
//! how it was trained, and per state the chosen action and the Q values. Written
//! by `search train`, read by the runtime [`FsmPolicy`](super::FsmPolicy). Lists
//! are in a stable order (states by their tokens, Q values by action name), so the
//! same training run gives the same bytes.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::encoding::Encoding;

/// Value of the `format` field.
pub const POLICY_FORMAT: &str = "batchlab-policy";
/// The version this build writes. Version 2 added the `sort-crit` encodings
/// (token marks `!` and `@q`), `fallback`, the trainer's `reward` and
/// `exploration`, and `training.prior_batches` / `training.teacher`. Version
/// 3 added the action [`DEFER_ACTION`](super::DEFER_ACTION); a file without
/// it is written as version 2, which every earlier build reads.
pub const POLICY_VERSION: u32 = 3;
/// Versions this build reads (a version-1 file reads as version 2 with the
/// defaults the version-1 trainer used).
pub const POLICY_VERSIONS_READ: [u32; 3] = [1, 2, 3];

/// A policy file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Always `batchlab-policy`.
    pub format: String,
    /// 1 or 2 (see [`POLICY_VERSION`]).
    pub version: u32,
    /// State encoding of the keys.
    pub encoding: Encoding,
    /// Workload of the training trace (the runtime warns on a mismatch).
    pub workload: String,
    /// Where the policy came from.
    pub provenance: Provenance,
    /// Trainer settings.
    pub hyperparameters: Hyperparameters,
    /// Training outcome.
    pub training: TrainingSummary,
    /// Heuristic deciding states not in the table (default `typewise`; v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// The pass it batches: `backward` for a policy trained on the reversed
    /// graph (`search train --pass backward`), absent for the forward pass
    /// (v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<String>,
    /// The policy's type names, sorted: state tokens index this list.
    pub types: Vec<String>,
    /// One entry per state seen in training.
    pub states: Vec<StateEntry>,
}

/// Provenance of a policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// Training trace path as given.
    pub trace: String,
    /// Its node count.
    pub nodes: u64,
    /// Its `meta.batch_size`, if any.
    pub batch_size: Option<u32>,
    /// Its `meta.hidden`, if any.
    pub hidden: Option<u32>,
    /// Its `meta.dataset`, if any.
    pub dataset: Option<String>,
    /// Trainer seed.
    pub seed: u64,
}

/// Q-learning settings (see `search train --help`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hyperparameters {
    /// Step size of the Q update.
    pub learning_rate: f64,
    /// Discount.
    pub gamma: f64,
    /// Exploration rate of the first episode.
    pub epsilon_start: f64,
    /// Factor applied to epsilon after each episode.
    pub epsilon_decay: f64,
    /// Lowest exploration rate.
    pub epsilon_floor: f64,
    /// Bootstrapping horizon N.
    pub n_step: u32,
    /// Episode budget.
    pub max_episodes: u32,
    /// A greedy rollout every this many episodes.
    pub rollout_every: u32,
    /// Weight α of the sufficient-condition term of the reward (Eq. 1).
    pub alpha: f64,
    /// Stop once greedy batches ≤ stop_ratio × lower bound.
    pub stop_ratio: f64,
    /// Reward (v2; version-1 files: `eq1`).
    #[serde(default)]
    pub reward: Reward,
    /// Exploration scheme (v2; version-1 files: `step`).
    #[serde(default)]
    pub exploration: Exploration,
}

/// The reward of one batch.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reward {
    /// ED-Batch Eq. 1: −1 + α · |Frontier_a(G)| / |Frontier(G^a)|.
    #[default]
    Eq1,
    /// −1 shaped by the potential −(remaining lower bound): −1 + (bound before −
    /// bound after), i.e. 0 for a batch that lowers the bound, else −1. The
    /// return of an episode is −(batches − lower bound), so the shaping keeps
    /// the optimal policies (potential-based), and a return-to-go measures the
    /// batches lost from that point on, whenever in the episode it is met.
    Bound,
}

/// How training explores.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exploration {
    /// ε-greedy per decision; a greedy rollout every `rollout_every` episodes,
    /// the best one kept (the reference implementation's scheme).
    #[default]
    Step,
    /// Per episode, a few states of the incumbent FSM get another action (the
    /// same at every visit in that episode): every episode is a run of a whole
    /// candidate FSM, kept when it needs no more batches than the incumbent.
    Key,
}

/// Training outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSummary {
    /// Episodes run.
    pub episodes: u32,
    /// Batches of the best greedy rollout (the kept Q-table's).
    pub best_batches: u64,
    /// Lower bound of the training trace.
    pub lower_bound: u64,
    /// Episode after which the kept Q-table was found.
    pub best_episode: u32,
    /// Why training stopped: `lower-bound`, `target` or `budget`.
    pub stop_reason: String,
    /// Batches of the prior (typewise) on the training trace (v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_batches: Option<u64>,
    /// The teacher schedule the table was distilled from, if any (v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher: Option<TeacherSummary>,
}

/// Where a teacher schedule came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeacherSummary {
    /// `optimise` (computed by the trainer's caller) or the schedule file's path.
    pub source: String,
    /// Its batches on the training trace.
    pub batches: u64,
}

/// One state of the FSM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateEntry {
    /// The state's tokens: type names; `*name` marks a type meeting the
    /// sufficient condition (sort-cond); `phase:K` a progress phase (sort-phase).
    pub state: Vec<String>,
    /// The action (a type name) the FSM takes in this state, or
    /// [`DEFER_ACTION`](super::DEFER_ACTION): the fallback decides (v3).
    pub action: String,
    /// Q value of every action tried in this state, by action name.
    pub q: BTreeMap<String, f64>,
}

/// Errors reading or writing a policy file. Every variant names the file.
#[derive(Debug, Error)]
pub enum PolicyFileError {
    /// I/O failure.
    #[error("{file}: {source}")]
    Io {
        /// File.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// YAML syntax or shape (unknown field, missing field, wrong type).
    #[error("{file}:{line}:{column}: {message}")]
    Yaml {
        /// File.
        file: String,
        /// Line (1-based, 0 unknown).
        line: u64,
        /// Column.
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// Content that parses but is inconsistent.
    #[error("{file}: {message}")]
    Invalid {
        /// File.
        file: String,
        /// What is wrong.
        message: String,
    },
}

impl PolicyFile {
    /// Why `trace` cannot be the trace this policy was trained on: the first
    /// of its `workload`, `provenance.nodes`, `provenance.batch_size`,
    /// `provenance.hidden` and `provenance.dataset` that differs from the
    /// trace's (the last three where both give one), or `None`.
    pub fn provenance_mismatch(&self, trace: &crate::trace::Trace) -> Option<String> {
        let p = &self.provenance;
        let differ = |field: &str, mine: String, theirs: String| {
            Some(format!(
                "field `{field}` is {mine}, the trace's is {theirs}"
            ))
        };
        if self.workload != trace.workload {
            return differ(
                "workload",
                format!("{:?}", self.workload),
                format!("{:?}", trace.workload),
            );
        }
        if p.nodes != trace.graph.len() as u64 {
            return differ(
                "provenance.nodes",
                p.nodes.to_string(),
                trace.graph.len().to_string(),
            );
        }
        let m = &trace.meta;
        if let (Some(a), Some(b)) = (p.batch_size, m.batch_size)
            && a != b
        {
            return differ("provenance.batch_size", a.to_string(), b.to_string());
        }
        if let (Some(a), Some(b)) = (p.hidden, m.hidden)
            && a != b
        {
            return differ("provenance.hidden", a.to_string(), b.to_string());
        }
        if let (Some(a), Some(b)) = (&p.dataset, &m.dataset)
            && a != b
        {
            return differ("provenance.dataset", format!("{a:?}"), format!("{b:?}"));
        }
        None
    }

    /// Parses policy YAML; `file` names the source in errors.
    pub fn from_yaml(text: &str, file: &str) -> Result<PolicyFile, PolicyFileError> {
        let p: PolicyFile = serde_saphyr::from_str(text).map_err(|e| {
            let (line, column, message) = crate::yaml::error_parts(&e, text);
            PolicyFileError::Yaml {
                file: file.to_string(),
                line,
                column,
                message,
            }
        })?;
        p.check(file)?;
        Ok(p)
    }

    /// Reads a policy file.
    pub fn read(path: &Path) -> Result<PolicyFile, PolicyFileError> {
        let file = path.display().to_string();
        let text = crate::io::read_to_string(path).map_err(|source| PolicyFileError::Io {
            file: file.clone(),
            source,
        })?;
        Self::from_yaml(&text, &file)
    }

    /// The YAML text.
    pub fn to_yaml(&self) -> Result<String, PolicyFileError> {
        serde_saphyr::to_string(self).map_err(|e| PolicyFileError::Invalid {
            file: "(policy)".into(),
            message: e.to_string(),
        })
    }

    /// Writes the YAML atomically.
    pub fn write(&self, path: &Path) -> Result<(), PolicyFileError> {
        let text = self.to_yaml()?;
        crate::io::write_atomic(path, text.as_bytes()).map_err(|source| PolicyFileError::Io {
            file: path.display().to_string(),
            source,
        })
    }

    /// Checks format, version, and that every state token and action names a
    /// listed type.
    fn check(&self, file: &str) -> Result<(), PolicyFileError> {
        let invalid = |message: String| PolicyFileError::Invalid {
            file: file.to_string(),
            message,
        };
        if self.format != POLICY_FORMAT {
            return Err(invalid(format!(
                "field `format`: expected \"{POLICY_FORMAT}\", found {:?}",
                self.format
            )));
        }
        if !POLICY_VERSIONS_READ.contains(&self.version) {
            return Err(invalid(format!(
                "field `version`: unsupported version {} (this build reads versions 1, 2 and 3)",
                self.version
            )));
        }
        if self.encoding.min_version() > self.version {
            return Err(invalid(format!(
                "field `encoding`: {} needs version {} or later, the file says {}",
                self.encoding.name(),
                self.encoding.min_version(),
                self.version
            )));
        }
        if let Some(p) = &self.pass
            && p != "forward"
            && p != "backward"
        {
            return Err(invalid(format!(
                "field `pass`: {p:?} (expected forward or backward)"
            )));
        }
        if self.version < 2 && self.pass.is_some() {
            return Err(invalid("field `pass`: needs version 2 or later".into()));
        }
        if self.version < 2 && self.fallback.is_some() {
            return Err(invalid("field `fallback`: needs version 2 or later".into()));
        }
        if let Some(f) = &self.fallback
            && !super::HEURISTICS.contains(&f.as_str())
        {
            return Err(invalid(format!(
                "field `fallback`: unknown heuristic {f:?} (expected one of {})",
                super::HEURISTICS.join(", ")
            )));
        }
        if self.types.len() > super::encoding::MAX_POLICY_TYPES {
            return Err(invalid(format!(
                "field `types`: {} types, more than the {} a policy can hold",
                self.types.len(),
                super::encoding::MAX_POLICY_TYPES
            )));
        }
        let known = |name: &str| {
            self.types
                .binary_search_by(|t| t.as_str().cmp(name))
                .is_ok()
        };
        if self.types.iter().any(|t| t == super::DEFER_ACTION) {
            return Err(invalid(format!(
                "field `types`: {:?} is the action that defers to the fallback, not a type name",
                super::DEFER_ACTION
            )));
        }
        if self.types.windows(2).any(|w| w[0] >= w[1]) {
            return Err(invalid(
                "field `types`: names must be sorted and unique".into(),
            ));
        }
        // A state listed twice would let the later entry win silently.
        let mut seen: std::collections::HashMap<&[String], usize> =
            std::collections::HashMap::with_capacity(self.states.len());
        for (i, s) in self.states.iter().enumerate() {
            if let Some(first) = seen.insert(&s.state, i) {
                return Err(invalid(format!(
                    "states[{i}]: the state {:?} is listed already as states[{first}] (action {:?}, here {:?}); a policy lists each state once",
                    s.state, self.states[first].action, s.action
                )));
            }
            for tok in &s.state {
                if super::fsm::tokens_to_key(std::slice::from_ref(tok), &self.types).is_none() {
                    return Err(invalid(format!(
                        "states[{i}]: token {tok:?} names no type in `types`"
                    )));
                }
            }
            if s.action == super::DEFER_ACTION {
                if self.version < 3 {
                    return Err(invalid(format!(
                        "states[{i}]: action {:?} needs version 3 or later, the file says {}",
                        s.action, self.version
                    )));
                }
            } else if !known(&s.action) {
                return Err(invalid(format!(
                    "states[{i}]: action {:?} names no type in `types`",
                    s.action
                )));
            }
        }
        Ok(())
    }
}
