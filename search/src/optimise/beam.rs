//! One beam-search pass over Algorithm-1 moves (batch every ready node of one
//! type), from the empty schedule to the end of the graph.
//!
//! Every state of a level has made the same number of batches, so children
//! are ranked by (remaining lower bound, ascending; nodes executed, descending;
//! then the parent's rank and the type id, ascending). The last two make the
//! order total, so the kept states — and the schedule — do not depend on how
//! rayon splits the work. Children with equal executed sets (equal Zobrist
//! hash) are merged, keeping the first in that order. A child whose bound
//! cannot beat the incumbent is cut. In a state where some batchable type t
//! meets Lemma 2.1's condition (|Frontier_t(G)| = |Frontier(G^t)|) only that
//! move is tried: some shortest continuation starts with it.

use std::collections::HashSet;
use std::time::Instant;

use engine::graph::{NodeId, TypeId};
use rayon::prelude::*;

use super::state::{Ctx, State};

/// A child of a beam state.
#[derive(Copy, Clone, Debug)]
struct Cand {
    bound: u32,
    executed: u32,
    parent: u32,
    ty: u32,
    hash: u64,
}

impl Cand {
    fn key(&self) -> (u32, std::cmp::Reverse<u32>, u32, u32) {
        (
            self.bound,
            std::cmp::Reverse(self.executed),
            self.parent,
            self.ty,
        )
    }
}

/// How a pass ended.
pub(crate) enum PassEnd {
    /// A complete schedule: its type sequence.
    Done(Vec<TypeId>),
    /// No state left that could beat the incumbent.
    Pruned,
    /// The deadline passed.
    Timeout,
}

/// Moves worth trying from `s` (see the module docs).
fn moves(c: &Ctx, s: &State) -> impl Iterator<Item = TypeId> {
    let f = &s.f;
    let complete = f
        .ready_types()
        .find(|&t| c.g.types().batchable(t) && f.ready_count(t) == f.sub_frontier(t));
    let all = complete.is_none();
    f.ready_types()
        .filter(move |&t| all || Some(t) == complete)
        .collect::<Vec<_>>()
        .into_iter()
}

/// Runs one pass of width `width` from `start` (which has made `done`
/// batches along `prefix`). `incumbent`: batches of the best schedule known
/// (children that cannot beat it are cut).
pub(crate) fn pass<'g>(
    c: &Ctx<'g>,
    start: &State<'g>,
    width: usize,
    incumbent: u32,
    deadline: Instant,
) -> PassEnd {
    let n = c.g.len() as u32;
    let mut beam: Vec<State<'g>> = vec![start.clone()];
    // Per level: (parent index in the previous level, type) of every kept state.
    let mut levels: Vec<Vec<(u32, u32)>> = Vec::new();
    let mut depth = start.f.batches() as u32;
    loop {
        if Instant::now() >= deadline {
            return PassEnd::Timeout;
        }
        let mut cands: Vec<Cand> = beam
            .par_iter()
            .enumerate()
            .flat_map_iter(|(i, s)| {
                moves(c, s).map(move |t| {
                    let p = s.preview(c, t);
                    Cand {
                        bound: p.bound,
                        executed: p.executed,
                        parent: i as u32,
                        ty: t.0,
                        hash: p.hash,
                    }
                })
            })
            .collect();
        depth += 1;
        cands.retain(|x| depth + x.bound < incumbent);
        if let Some(fin) = cands
            .iter()
            .filter(|x| x.executed == n)
            .min_by_key(|x| x.key())
        {
            let mut types = vec![TypeId(fin.ty)];
            let mut at = fin.parent;
            for level in levels.iter().rev() {
                let (p, t) = level[at as usize];
                types.push(TypeId(t));
                at = p;
            }
            types.reverse();
            return PassEnd::Done(types);
        }
        if cands.is_empty() {
            return PassEnd::Pruned;
        }
        cands.par_sort_unstable_by_key(|x| x.key());
        let mut seen = HashSet::with_capacity(width.min(cands.len()) * 2);
        let kept: Vec<Cand> = cands
            .into_iter()
            .filter(|x| seen.insert(x.hash))
            .take(width)
            .collect();
        beam = kept
            .par_iter()
            .map_init(Vec::<NodeId>::new, |buf, x| {
                let mut s = beam[x.parent as usize].clone();
                s.apply(c, TypeId(x.ty), buf);
                s
            })
            .collect();
        levels.push(kept.iter().map(|x| (x.parent, x.ty)).collect());
    }
}
