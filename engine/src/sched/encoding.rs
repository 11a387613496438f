//! State encodings F(G) of ED-Batch §2.3, shared by the trainer and the runtime.
//!
//! A state is a short key of *tokens*. A token is a type's index in the policy's
//! own type list (its types sorted by name), so a policy trained on one trace
//! applies to another trace of the same model whose type ids or batch size differ.
//! Ties are broken by that index (name order), never by trace ids.

use serde::{Deserialize, Serialize};

use super::frontier::Frontier;

/// Token flag: the type satisfies Lemma 2.1's condition (all of Frontier(G^t) ready).
pub const COMPLETE: u16 = 0x4000;
/// Token flag: a phase token (the low bits are the phase).
pub const PHASE: u16 = 0x8000;
/// Token of a type the policy does not know (its state is never in the table).
pub const UNKNOWN: u16 = 0x3FFF;
/// Number of progress phases of [`Encoding::SortPhase`].
pub const PHASES: u16 = 4;

/// A state encoding.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// Ebase: the set of types on the frontier.
    Base,
    /// Emax: Ebase plus the most common frontier type.
    Max,
    /// Esort: frontier types sorted by how many of their nodes are ready.
    Sort,
    /// Esort with each type marked when |Frontier_t(G)| = |Frontier(G^t)|: tells
    /// apart states that look alike but need opposite choices (ED-Batch A.4).
    SortCond,
    /// Esort plus a coarse progress phase (quarter of nodes executed), the fix
    /// ED-Batch A.4 suggests.
    SortPhase,
}

impl Encoding {
    /// Every encoding, in a fixed order.
    pub const ALL: [Encoding; 5] = [
        Encoding::Base,
        Encoding::Max,
        Encoding::Sort,
        Encoding::SortCond,
        Encoding::SortPhase,
    ];

    /// The name used in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Base => "base",
            Encoding::Max => "max",
            Encoding::Sort => "sort",
            Encoding::SortCond => "sort-cond",
            Encoding::SortPhase => "sort-phase",
        }
    }

    /// Parses a name (see [`name`](Self::name)).
    pub fn parse(s: &str) -> Option<Encoding> {
        Encoding::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// Computes state keys, reusing a scratch buffer so a decision allocates nothing.
#[derive(Clone, Debug)]
pub struct StateEncoder {
    encoding: Encoding,
    scratch: Vec<(std::cmp::Reverse<u32>, u16, u16)>,
}

impl StateEncoder {
    /// An encoder for `encoding`.
    pub fn new(encoding: Encoding) -> Self {
        StateEncoder {
            encoding,
            scratch: Vec::new(),
        }
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Writes the state key of `f` into `key` (cleared first). `rank[t]` is the
    /// policy token of trace type `t` ([`UNKNOWN`] if the policy lacks it).
    pub fn encode(&mut self, f: &Frontier, rank: &[u16], key: &mut Vec<u16>) {
        key.clear();
        let enc = self.encoding;
        match enc {
            Encoding::Base => {
                key.extend(f.ready_types().map(|t| rank[t.index()]));
                key.sort_unstable();
            }
            Encoding::Max => {
                let top = f
                    .ready_types()
                    .max_by_key(|&t| (f.ready_count(t), std::cmp::Reverse(rank[t.index()])))
                    .map_or(UNKNOWN, |t| rank[t.index()]);
                key.push(top);
                key.extend(f.ready_types().map(|t| rank[t.index()]));
                key[1..].sort_unstable();
            }
            Encoding::Sort | Encoding::SortCond | Encoding::SortPhase => {
                if enc == Encoding::SortPhase {
                    let total = f.graph().len().max(1);
                    let phase = (f.executed() * usize::from(PHASES) / total) as u16;
                    key.push(PHASE | phase.min(PHASES - 1));
                }
                let cond = enc == Encoding::SortCond;
                self.scratch.clear();
                self.scratch.extend(f.ready_types().map(|t| {
                    let r = rank[t.index()];
                    let complete = cond && f.ready_count(t) == f.sub_frontier(t);
                    let token = r | if complete { COMPLETE } else { 0 };
                    (std::cmp::Reverse(f.ready_count(t)), r, token)
                }));
                // Most ready nodes first; ties by policy type index.
                self.scratch.sort_unstable();
                key.extend(self.scratch.iter().map(|x| x.2));
            }
        }
    }
}
