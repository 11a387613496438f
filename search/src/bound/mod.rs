//! Certified lower bounds on the number of batches, tighter than ED-Batch
//! A.3 where types interleave, so that every best-known schedule gets a
//! certified gap (best-known ÷ bound).
//!
//! A.3 counts, per type t, the longest chain of type-t nodes: the batches of
//! t alone. Where the types' chains cross — a path a→b and another b→a, the
//! shortest-common-supersequence hardness of ED-Batch A.1 — the batches of a
//! and b together exceed the sum. For any partition of the batchable types
//! into groups, the batches of different groups are distinct, so
//!
//! > batches ≥ Σ over groups S of LB(S) + Σ over non-batchable types of their node counts,
//!
//! where LB(S) bounds the batches whose type is in S. Per group, the largest of:
//!
//! - A.3: Σ_{t∈S} of the longest type-t chain;
//! - supersequences (`scs`, `paths`): the S-batches, in order, contain the
//!   string of S-types of every path as a subsequence (nodes on a path run in
//!   increasing batches), so LB(S) ≥ SCS(s₁, s₂) for the strings of any two
//!   paths — over candidate pairs;
//! - exact pieces (`pieces`): `LB(S) ≥ OPT(G[U])` for U the S-nodes of one
//!   sample, or of a few samples together, by exhaustive search.
//!
//! The partition maximising the sum is found by dynamic programming over the
//! subsets of types. A graph small enough for the exhaustive search
//! ([`crate::optimal::deepening_bound`]) also gets that bound, which is the
//! optimum when the search finishes. Steps run in that order until the time
//! budget ends; what was computed is certified whatever the cut.

mod paths;
mod pieces;
mod scs;

use std::time::{Duration, Instant};

use engine::graph::{Graph, lower_bound};
use serde::Serialize;

use crate::optimal::{ExactBound, NODE_LIMIT, OptimalConfig, deepening_bound};

/// Limits of [`certify`].
#[derive(Clone, Debug, PartialEq)]
pub struct BoundConfig {
    /// Wall-time budget.
    pub budget: Duration,
    /// Largest group of types considered together (the group of all
    /// batchable types is always tried by supersequences).
    pub max_group: usize,
    /// Random weightings of the candidate-path programs, per group.
    pub random_weightings: usize,
    /// Candidate paths kept per weighting (the best of that many samples).
    pub per_weighting: usize,
    /// Expansions of each exhaustive search.
    pub exact_budget: u64,
    /// Seed of the random weightings.
    pub seed: u64,
    /// Run the exhaustive search on the whole graph when it is small enough
    /// (off only to test the group bounds alone).
    pub whole_graph: bool,
    /// Batches of a known schedule (0: none): once the bound reaches it, the
    /// schedule is optimal and the remaining steps are skipped.
    pub known: u64,
}

impl Default for BoundConfig {
    fn default() -> Self {
        BoundConfig {
            budget: Duration::from_secs(5),
            max_group: 3,
            random_weightings: 4,
            per_weighting: 3,
            exact_budget: 200_000,
            seed: 1,
            whole_graph: true,
            known: 0,
        }
    }
}

/// How a group's (or the graph's) bound was obtained.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// ED-Batch A.3.
    A3,
    /// Shortest common supersequence of two paths' type strings.
    Scs,
    /// Exhaustive search on a piece (one sample or a few).
    Piece,
    /// Exhaustive search on the whole graph.
    Exact,
}

/// One group of the partition behind the bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GroupBound {
    /// Type names of the group.
    pub types: Vec<String>,
    /// Its bound.
    pub bound: u64,
    /// What gave it.
    pub method: Method,
}

/// The certified bound of a graph.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BoundReport {
    /// ED-Batch A.3.
    pub a3: u64,
    /// The certified bound: no schedule has fewer batches.
    pub bound: u64,
    /// What gave it (`exact` when the whole-graph search did).
    pub method: Method,
    /// The whole-graph exhaustive search, when the graph was small enough.
    pub exact: Option<ExactBound>,
    /// The groups of the best partition whose bound beats their A.3 terms
    /// (the other types count by A.3).
    pub groups: Vec<GroupBound>,
    /// Whether every step ran before the deadline.
    pub complete: bool,
    /// Wall seconds.
    pub seconds: f64,
}

/// Computes the certified bound (see the module docs).
pub fn certify(g: &Graph, cfg: &BoundConfig) -> BoundReport {
    let started = Instant::now();
    let deadline = started + cfg.budget;
    let a3 = lower_bound(g);
    let names = |ts: &[usize]| -> Vec<String> {
        ts.iter()
            .map(|&t| g.types().name(engine::graph::TypeId(t as u32)).to_string())
            .collect()
    };
    let mut complete = true;
    let met = |b: u64| cfg.known > 0 && b >= cfg.known;
    if met(a3.total) {
        return BoundReport {
            a3: a3.total,
            bound: a3.total,
            method: Method::A3,
            exact: None,
            groups: Vec::new(),
            complete,
            seconds: started.elapsed().as_secs_f64(),
        };
    }
    let exact = if cfg.whole_graph && g.len() <= NODE_LIMIT {
        let c = OptimalConfig {
            max_nodes: NODE_LIMIT,
            budget: cfg.exact_budget.saturating_mul(10),
            lemma: true,
        };
        deepening_bound(g, &c).ok()
    } else {
        None
    };
    // Batchable types present, and the fixed part of the non-batchable ones.
    let mut count = vec![0u64; g.types().len()];
    for &t in g.node_types() {
        count[t.index()] += 1;
    }
    let batchable: Vec<usize> = g
        .types()
        .iter()
        .filter(|(t, op)| op.batchable && count[t.index()] > 0)
        .map(|(t, _)| t.index())
        .collect();
    let fixed: u64 = g
        .types()
        .iter()
        .filter(|(_, op)| !op.batchable)
        .map(|(t, _)| a3.per_type[t.index()])
        .sum();
    // Group values over subsets of `batchable` (bit i: batchable[i]).
    let k = batchable.len();
    let dp_ok = k <= 14 && !exact.as_ref().is_some_and(|e| met(e.bound));
    let mut value: Vec<Option<(u64, Method)>> = vec![None; if dp_ok { 1 << k } else { 0 }];
    if dp_ok {
        for (i, &t) in batchable.iter().enumerate() {
            value[1 << i] = Some((a3.per_type[t], Method::A3));
        }
        let mut subsets: Vec<u32> = (1u32..(1 << k))
            .filter(|m| {
                let c = m.count_ones() as usize;
                c >= 2 && (c <= cfg.max_group || c == k)
            })
            .collect();
        subsets.sort_by_key(|m| (m.count_ones(), *m));
        for m in subsets {
            if Instant::now() >= deadline {
                complete = false;
                break;
            }
            let mut in_group = vec![false; g.types().len()];
            let mut sum = 0;
            for (i, &t) in batchable.iter().enumerate() {
                if m & (1 << i) != 0 {
                    in_group[t] = true;
                    sum += a3.per_type[t];
                }
            }
            let mut best = (sum, Method::A3);
            let strings = paths::candidates(
                g,
                &in_group,
                cfg.random_weightings,
                cfg.per_weighting,
                cfg.seed ^ u64::from(m),
            );
            let alphabet = g.types().len();
            for (i, a) in strings.iter().enumerate() {
                for b in &strings[i + 1..] {
                    let s = scs::scs(a, b, alphabet) as u64;
                    if s > best.0 {
                        best = (s, Method::Scs);
                    }
                }
            }
            if m.count_ones() as usize <= cfg.max_group && Instant::now() < deadline {
                let p = pieces::piece_bound(g, &in_group, cfg.exact_budget, deadline);
                if p > best.0 {
                    best = (p, Method::Piece);
                }
            }
            value[m as usize] = Some(best);
        }
    } else if k > 14 {
        complete = false;
    }
    // Best partition: best[m] = max over groups S ∋ lowest bit of m.
    let (groups_total, groups) = if dp_ok {
        let full = (1usize << k) - 1;
        let mut best = vec![0u64; 1 << k];
        let mut choice = vec![0usize; 1 << k];
        for m in 1..=full {
            let low = m & m.wrapping_neg();
            let mut s = m;
            while s > 0 {
                if s & low != 0
                    && let Some((v, _)) = value[s]
                    && (choice[m] == 0 || v + best[m ^ s] > best[m])
                {
                    best[m] = v + best[m ^ s];
                    choice[m] = s;
                }
                s = (s - 1) & m;
            }
        }
        let mut groups = Vec::new();
        let mut m = full;
        while m > 0 {
            let s = choice[m];
            if let Some((v, method)) = value[s]
                && method != Method::A3
            {
                let ts: Vec<usize> = (0..k)
                    .filter(|i| s & (1 << i) != 0)
                    .map(|i| batchable[i])
                    .collect();
                groups.push(GroupBound {
                    types: names(&ts),
                    bound: v,
                    method,
                });
            }
            m ^= s;
        }
        (best[full] + fixed, groups)
    } else {
        (a3.total, Vec::new())
    };
    let (mut bound, mut method) = (a3.total, Method::A3);
    if groups_total > bound {
        bound = groups_total;
        method = groups
            .iter()
            .map(|g| g.method)
            .find(|&m| m != Method::A3)
            .unwrap_or(Method::A3);
    }
    if let Some(e) = &exact
        && e.bound > bound
    {
        bound = e.bound;
        method = Method::Exact;
    }
    if exact.as_ref().is_some_and(|e| !e.optimum) && !met(bound) {
        complete = false;
    }
    BoundReport {
        a3: a3.total,
        bound,
        method,
        exact,
        groups,
        complete,
        seconds: started.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::graph::from_rows;

    /// Two samples: chains A→B and B→A. A.3 says 2; every schedule needs 3.
    fn crossed_samples() -> Graph {
        let mut b = engine::graph::GraphBuilder::new();
        let a = b.types_mut().push("A", true).unwrap();
        let t = b.types_mut().push("B", true).unwrap();
        let n0 = b.add_node(a, &[], Some(0));
        b.add_node(t, &[n0], Some(0));
        let n2 = b.add_node(t, &[], Some(1));
        b.add_node(a, &[n2], Some(1));
        b.finish().unwrap()
    }

    #[test]
    fn group_bounds_see_crossed_chains_that_a3_misses() {
        let g = crossed_samples();
        let cfg = BoundConfig {
            whole_graph: false,
            ..BoundConfig::default()
        };
        let r = certify(&g, &cfg);
        assert_eq!((r.a3, r.bound), (2, 3));
        assert_eq!(r.groups.len(), 1);
        assert_eq!(r.groups[0].types, ["A", "B"]);
        assert_eq!(r.groups[0].method, Method::Scs);
        assert!(r.complete);
        // With the whole-graph search, the optimum itself, proved.
        let r = certify(&g, &BoundConfig::default());
        assert_eq!((r.bound, r.method), (3, Method::Scs));
        assert_eq!(r.exact.map(|e| (e.bound, e.optimum)), Some((3, true)));
    }

    #[test]
    fn a_single_type_graph_is_bounded_by_its_chain() {
        let g = from_rows(&["A"], &[(0, vec![]), (0, vec![0]), (0, vec![])]).unwrap();
        let r = certify(&g, &BoundConfig::default());
        assert_eq!((r.a3, r.bound), (2, 2));
        assert!(r.groups.is_empty());
    }
}
