//! State encodings F(G) of ED-Batch §2.3, shared by the trainer and the runtime.
//!
//! A state is a short key of *tokens*. A token is a type's index in the policy's
//! own type list (its types sorted by name), so a policy trained on one trace
//! applies to another trace of the same model whose type ids or batch size differ.
//! Ties are broken by that index (name order), never by trace ids. Flags in the
//! high bits mark what an encoding adds per type (see [`Encoding`]).
//!
//! The `sort-crit` encodings read the remaining lower bound
//! ([`RemainingBound`]), which the encoder keeps itself: call
//! [`StateEncoder::start`] when a run (episode) begins and
//! [`StateEncoder::observe`] after every step. Every other encoding is a pure
//! function of the frontier's counters, and those calls are no-ops for it.

use serde::{Deserialize, Serialize};

use super::frontier::Frontier;
use super::remaining::RemainingBound;
use crate::graph::{NodeId, TypeId};

/// Token bits holding the type index.
pub const TYPE_MASK: u16 = 0x03FF;
/// Token of a type the policy does not know (its state is never in the table).
pub const UNKNOWN: u16 = TYPE_MASK;
/// Most types a policy can name (indices below [`UNKNOWN`]).
pub const MAX_POLICY_TYPES: usize = UNKNOWN as usize;
/// Token bits holding the ratio bucket of `sort-crit-ratio` (see [`RATIO_BUCKETS`]).
pub const RATIO: u16 = 0x0C00;
/// Shift of the ratio bucket within a token.
pub const RATIO_SHIFT: u16 = 10;
/// Number of ratio buckets: ⌊4 · |Frontier_t(G)| / |Frontier(G^t)|⌋, capped at 3.
pub const RATIO_BUCKETS: u16 = 4;
/// Token flag: batching the type now lowers the remaining lower bound (`sort-crit*`).
pub const CRITICAL: u16 = 0x1000;
/// Token flag: the type satisfies Lemma 2.1's condition (all of Frontier(G^t) ready).
pub const COMPLETE: u16 = 0x4000;
/// Token flag: a phase token (the low bits are the phase).
pub const PHASE: u16 = 0x8000;
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
    /// `sort-cond` with each type also marked *critical* when batching it now
    /// lowers the lower bound of the remaining graph (it runs every start of
    /// its longest remaining same-type chains). Policy format version 2.
    SortCrit,
    /// `sort-crit` plus, per type, the bucket of |Frontier_t(G)| / |Frontier(G^t)|
    /// in quarters (how much of the type's sub-frontier is ready). Scale-free
    /// like the other marks, so it carries across batch sizes. Version 2.
    SortCritRatio,
}

impl Encoding {
    /// Every encoding, in a fixed order (`search train --encoding all`).
    pub const ALL: [Encoding; 7] = [
        Encoding::Base,
        Encoding::Max,
        Encoding::Sort,
        Encoding::SortCond,
        Encoding::SortPhase,
        Encoding::SortCrit,
        Encoding::SortCritRatio,
    ];

    /// The name used in files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Base => "base",
            Encoding::Max => "max",
            Encoding::Sort => "sort",
            Encoding::SortCond => "sort-cond",
            Encoding::SortPhase => "sort-phase",
            Encoding::SortCrit => "sort-crit",
            Encoding::SortCritRatio => "sort-crit-ratio",
        }
    }

    /// Parses a name (see [`name`](Self::name)).
    pub fn parse(s: &str) -> Option<Encoding> {
        Encoding::ALL.into_iter().find(|e| e.name() == s)
    }

    /// Whether keys carry [`CRITICAL`] marks (the encoder tracks the
    /// remaining bound).
    pub fn needs_bound(self) -> bool {
        matches!(self, Encoding::SortCrit | Encoding::SortCritRatio)
    }

    /// Whether keys read |Frontier(G^t)| (the exact same-type DAG is needed).
    pub fn needs_sub_frontier(self) -> bool {
        matches!(
            self,
            Encoding::SortCond | Encoding::SortCrit | Encoding::SortCritRatio
        )
    }

    /// The first policy-file version that can hold this encoding.
    pub fn min_version(self) -> u32 {
        if self.needs_bound() { 2 } else { 1 }
    }
}

/// Computes state keys, reusing a scratch buffer so a decision allocates nothing.
#[derive(Clone, Debug)]
pub struct StateEncoder {
    encoding: Encoding,
    track: bool,
    bound: Option<RemainingBound>,
    scratch: Vec<(std::cmp::Reverse<u32>, u16, u16)>,
}

impl StateEncoder {
    /// An encoder for `encoding`.
    pub fn new(encoding: Encoding) -> Self {
        StateEncoder {
            encoding,
            track: encoding.needs_bound(),
            bound: None,
            scratch: Vec::new(),
        }
    }

    /// An encoder that tracks the remaining bound whatever the encoding (the
    /// trainer shapes its rewards with it).
    pub fn tracking(encoding: Encoding) -> Self {
        StateEncoder {
            track: true,
            ..Self::new(encoding)
        }
    }

    /// The encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Begins a run at `f`'s initial state (the tracker's buffers are reused
    /// when they fit `f`'s graph).
    pub fn start(&mut self, f: &Frontier) {
        if !self.track {
            return;
        }
        match &mut self.bound {
            Some(b) if b.fits(f) => b.reset(f),
            _ => self.bound = Some(RemainingBound::new(f)),
        }
    }

    /// Follows `f.step(t, ..)`, which ran `batch`.
    #[inline]
    pub fn observe(&mut self, f: &Frontier, t: TypeId, batch: &[NodeId]) {
        if let Some(b) = &mut self.bound {
            b.after_step(f, t, batch);
        }
    }

    /// The remaining bound, when tracked and started.
    pub fn bound(&self) -> Option<&RemainingBound> {
        self.bound.as_ref()
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
            Encoding::Sort
            | Encoding::SortCond
            | Encoding::SortPhase
            | Encoding::SortCrit
            | Encoding::SortCritRatio => {
                if enc == Encoding::SortPhase {
                    let total = f.graph().len().max(1);
                    let phase = (f.executed() * usize::from(PHASES) / total) as u16;
                    key.push(PHASE | phase.min(PHASES - 1));
                }
                if enc.needs_bound() && self.bound.is_none() {
                    // Not started: only possible at the initial state.
                    self.bound = Some(RemainingBound::new(f));
                }
                let bound = self.bound.as_ref().filter(|_| enc.needs_bound());
                let cond = enc.needs_sub_frontier();
                let ratio = enc == Encoding::SortCritRatio;
                self.scratch.clear();
                self.scratch.extend(f.ready_types().map(|t| {
                    let (r, sub) = (f.ready_count(t), f.sub_frontier(t));
                    let mut token = rank[t.index()];
                    if cond && r == sub {
                        token |= COMPLETE;
                    }
                    if bound.is_some_and(|b| b.is_critical(f, t)) {
                        token |= CRITICAL;
                    }
                    if ratio {
                        let q = (u32::from(RATIO_BUCKETS) * r / sub.max(1))
                            .min(u32::from(RATIO_BUCKETS) - 1)
                            as u16;
                        token |= q << RATIO_SHIFT;
                    }
                    (std::cmp::Reverse(r), rank[t.index()], token)
                }));
                // Most ready nodes first; ties by policy type index.
                self.scratch.sort_unstable();
                key.extend(self.scratch.iter().map(|x| x.2));
            }
        }
    }
}
