//! The executor grammar, one for the command line (`engine replay
//! --executor`, `engine train --executor`), the experiment specs
//! (`executors:`) and the peers' system names: `NAME[:POLICY]`.
//!
//! NAME is one of [`ExecutorKind::ALL`]. POLICY, where the executor batches
//! by a policy (all but `reference` and `cavs`), is a heuristic name, a
//! policy file from `search train`, or, in a spec, `fsm` (the FSM the runner
//! trains for the workload). What each consumer accepts as POLICY is its
//! own rule (a spec takes heuristics and `fsm`; the CLI takes heuristics
//! and files); the grammar is this one.
//!
//! ```
//! use engine_core::sched::{ExecutorKind, ExecutorName};
//! let e = ExecutorName::parse("policy:depth").unwrap();
//! assert_eq!((e.kind, e.policy.as_deref()), (ExecutorKind::Policy, Some("depth")));
//! assert_eq!(ExecutorName::parse("cavs").unwrap().policy, None);
//! assert!(ExecutorName::parse("cavs:depth").is_err());
//! ```

use thiserror::Error;

/// An executor, by what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecutorKind {
    /// One node at a time, no batching: the oracle.
    Reference,
    /// DyNet: primitive ops batched by the policy.
    Dynet,
    /// Cavs: every ready vertex, type by type.
    Cavs,
    /// Cells batched by the policy.
    Policy,
    /// ED-Batch: cells batched by the policy, each run by its planned layout.
    EdBatch,
    /// ED-Batch with DyNet-order layouts (the layout's own contribution).
    EdBatchNoLayout,
    /// VPPS' persistent kernel (CUDA only), batches by the policy.
    Vpps,
}

impl ExecutorKind {
    /// Every executor, in the order messages list them.
    pub const ALL: [ExecutorKind; 7] = [
        ExecutorKind::Reference,
        ExecutorKind::Dynet,
        ExecutorKind::Cavs,
        ExecutorKind::Policy,
        ExecutorKind::EdBatch,
        ExecutorKind::EdBatchNoLayout,
        ExecutorKind::Vpps,
    ];

    /// Its NAME.
    pub fn name(self) -> &'static str {
        match self {
            ExecutorKind::Reference => "reference",
            ExecutorKind::Dynet => "dynet",
            ExecutorKind::Cavs => "cavs",
            ExecutorKind::Policy => "policy",
            ExecutorKind::EdBatch => "edbatch",
            ExecutorKind::EdBatchNoLayout => "edbatch-nolayout",
            ExecutorKind::Vpps => "vpps",
        }
    }

    /// Whether it batches by a policy (takes `:POLICY`).
    pub fn takes_policy(self) -> bool {
        !matches!(self, ExecutorKind::Reference | ExecutorKind::Cavs)
    }

    /// The policy it batches by when none is named (`None`: one must be).
    pub fn default_policy(self) -> Option<&'static str> {
        match self {
            ExecutorKind::Dynet => Some("agenda-updated"),
            ExecutorKind::Vpps => Some("depth"),
            _ => None,
        }
    }
}

/// An executor name: the executor, and the policy it names, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutorName {
    /// The executor.
    pub kind: ExecutorKind,
    /// `POLICY` of `NAME:POLICY`.
    pub policy: Option<String>,
}

/// A name outside the grammar.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ExecutorNameError {
    /// NAME is no executor.
    #[error("unknown executor {name:?}: expected {}", expected())]
    Unknown {
        /// The name given.
        name: String,
    },
    /// A policy given to an executor that batches by none.
    #[error("executor {name} batches by no policy: give it as `{name}`, without `:{policy}`")]
    NoPolicy {
        /// The executor.
        name: &'static str,
        /// The policy given.
        policy: String,
    },
    /// `NAME:` with nothing after it.
    #[error("executor {name}: an empty policy after `:` (give `{name}:POLICY`, or `{name}`)")]
    EmptyPolicy {
        /// The executor.
        name: &'static str,
    },
}

fn expected() -> String {
    let names: Vec<String> = ExecutorKind::ALL
        .iter()
        .map(|k| {
            if k.takes_policy() {
                format!("{}[:POLICY]", k.name())
            } else {
                k.name().to_string()
            }
        })
        .collect();
    names.join(", ")
}

impl ExecutorName {
    /// Parses `NAME[:POLICY]` (the POLICY is everything after the first
    /// `:`, so a policy file's path may hold more).
    pub fn parse(s: &str) -> Result<ExecutorName, ExecutorNameError> {
        let (name, policy) = match s.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (s, None),
        };
        let kind = ExecutorKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| ExecutorNameError::Unknown {
                name: s.to_string(),
            })?;
        match policy {
            Some(p) if !kind.takes_policy() => Err(ExecutorNameError::NoPolicy {
                name: kind.name(),
                policy: p.to_string(),
            }),
            Some("") => Err(ExecutorNameError::EmptyPolicy { name: kind.name() }),
            p => Ok(ExecutorName {
                kind,
                policy: p.map(str::to_string),
            }),
        }
    }
}

impl std::fmt::Display for ExecutorName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.policy {
            Some(p) => write!(f, "{}:{p}", self.kind.name()),
            None => f.write_str(self.kind.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_and_prints_back() {
        for k in ExecutorKind::ALL {
            let e = ExecutorName::parse(k.name()).unwrap();
            assert_eq!((e.kind, e.policy.as_deref()), (k, None));
            assert_eq!(e.to_string(), k.name());
            if k.takes_policy() {
                let s = format!("{}:runs/p.yaml", k.name());
                assert_eq!(ExecutorName::parse(&s).unwrap().to_string(), s);
            }
        }
    }

    #[test]
    fn names_outside_the_grammar_say_what_it_is() {
        let e = ExecutorName::parse("edbath").unwrap_err().to_string();
        assert!(
            e.contains("unknown executor \"edbath\": expected reference, dynet[:POLICY]"),
            "{e}"
        );
        assert_eq!(
            ExecutorName::parse("reference:depth").unwrap_err(),
            ExecutorNameError::NoPolicy {
                name: "reference",
                policy: "depth".into()
            }
        );
        assert_eq!(
            ExecutorName::parse("policy:").unwrap_err(),
            ExecutorNameError::EmptyPolicy { name: "policy" }
        );
    }
}
