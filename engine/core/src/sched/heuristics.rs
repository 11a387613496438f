//! The classic batching heuristics the papers compare against, as runtime
//! policies. Every tie is broken towards the smaller type id (the trace's type
//! order), so each is deterministic on a given trace.

use super::frontier::Frontier;
use super::policy::{BatchPolicy, Choice, PolicyError};
use crate::graph::{Graph, NodeId, TypeId, depths};

/// TF Fold: batch by topological depth — all nodes at depth d (one batch per
/// type, in type order) before any node at depth d+1.
#[derive(Default)]
pub struct DepthPolicy {
    depth: Vec<u32>,
}

impl BatchPolicy for DepthPolicy {
    fn name(&self) -> String {
        "depth".into()
    }

    fn prepare(&mut self, g: &Graph) -> Result<(), PolicyError> {
        self.depth = depths(g);
        Ok(())
    }

    fn needs_sub_frontier(&self) -> bool {
        false
    }

    fn choose(&mut self, f: &Frontier) -> Choice {
        // The smallest depth among ready nodes is the current level: every node
        // of a smaller depth has run, since its depth is smaller than its users'.
        let mut best: Option<(u32, TypeId)> = None;
        for t in f.ready_types() {
            if let Some(d) = f.ready(t).iter().map(|v| self.depth[v.index()]).min()
                && best.is_none_or(|(bd, _)| d < bd)
            {
                best = Some((d, t));
            }
        }
        let (d, t) = best.unwrap_or((0, TypeId(0)));
        Choice::AtDepth(t, d)
    }
}

/// DyNet's agenda: the ready type whose nodes have the smallest average depth.
/// `updated` averages over the type's not-yet-executed nodes (recomputed as
/// nodes run); otherwise over all its nodes, fixed before scheduling.
pub struct AgendaPolicy {
    updated: bool,
    depth: Vec<u32>,
    depth_sum: Vec<u64>,
    count: Vec<u64>,
}

impl AgendaPolicy {
    /// Agenda over all nodes of a type (DyNet's static average).
    pub fn fixed() -> Self {
        Self::new(false)
    }

    /// Agenda over the type's remaining nodes.
    pub fn updated() -> Self {
        Self::new(true)
    }

    fn new(updated: bool) -> Self {
        AgendaPolicy {
            updated,
            depth: Vec::new(),
            depth_sum: Vec::new(),
            count: Vec::new(),
        }
    }
}

impl BatchPolicy for AgendaPolicy {
    fn name(&self) -> String {
        if self.updated {
            "agenda-updated"
        } else {
            "agenda"
        }
        .into()
    }

    fn prepare(&mut self, g: &Graph) -> Result<(), PolicyError> {
        self.depth = depths(g);
        self.depth_sum = vec![0; g.types().len()];
        self.count = vec![0; g.types().len()];
        for v in g.nodes() {
            let t = g.node_type(v).index();
            self.depth_sum[t] += u64::from(self.depth[v.index()]);
            self.count[t] += 1;
        }
        Ok(())
    }

    fn choose(&mut self, f: &Frontier) -> Choice {
        let mut best: Option<(u64, u64, TypeId)> = None;
        for t in f.ready_types() {
            let (s, c) = (self.depth_sum[t.index()], self.count[t.index()].max(1));
            // Compare s/c < bs/bc exactly by cross-multiplying.
            let better = match best {
                None => true,
                Some((bs, bc, _)) => {
                    u128::from(s) * u128::from(bc) < u128::from(bs) * u128::from(c)
                }
            };
            if better {
                best = Some((s, c, t));
            }
        }
        Choice::All(best.map_or(TypeId(0), |b| b.2))
    }

    fn needs_sub_frontier(&self) -> bool {
        false
    }

    fn executed(&mut self, g: &Graph, batch: &[NodeId]) {
        if !self.updated {
            return;
        }
        for &v in batch {
            let t = g.node_type(v).index();
            self.depth_sum[t] -= u64::from(self.depth[v.index()]);
            self.count[t] -= 1;
        }
    }
}

/// Cavs: batch every ready vertex. Rounds: the types ready at the start of a
/// round run one after the other in type order, each taking all its ready nodes.
#[derive(Default)]
pub struct CavsPolicy {
    round: Vec<TypeId>,
}

impl BatchPolicy for CavsPolicy {
    fn name(&self) -> String {
        "cavs".into()
    }

    fn prepare(&mut self, _g: &Graph) -> Result<(), PolicyError> {
        self.round.clear();
        Ok(())
    }

    fn needs_sub_frontier(&self) -> bool {
        false
    }

    fn choose(&mut self, f: &Frontier) -> Choice {
        loop {
            // The round is kept in reverse so the next type pops off the end.
            while let Some(t) = self.round.pop() {
                if f.ready_count(t) > 0 {
                    return Choice::All(t);
                }
            }
            self.round.extend(f.ready_types());
            if self.round.is_empty() {
                // Nothing ready: let the run loop report it rather than spin.
                return Choice::All(TypeId(0));
            }
            self.round.reverse();
        }
    }
}

/// The sufficient-condition heuristic: the ready type maximising
/// |Frontier_t(G)| / |Frontier(G^t)| (the second term of ED-Batch Eq. 1); ties
/// go to more ready nodes, then the smaller type id.
#[derive(Default)]
pub struct TypewisePolicy;

impl BatchPolicy for TypewisePolicy {
    fn name(&self) -> String {
        "typewise".into()
    }

    fn choose(&mut self, f: &Frontier) -> Choice {
        Choice::All(typewise_choice(f))
    }
}

/// The typewise rule on its own, for policies that fall back to it.
pub fn typewise_choice(f: &Frontier) -> TypeId {
    let mut best: Option<(u64, u64, u32, TypeId)> = None;
    for t in f.ready_types() {
        let (r, s) = (
            u64::from(f.ready_count(t)),
            u64::from(f.sub_frontier(t).max(1)),
        );
        let better = match best {
            None => true,
            Some((br, bs, bn, _)) => {
                // r/s > br/bs, exactly; then more ready nodes.
                let (lhs, rhs) = (r * bs, br * s);
                lhs > rhs || (lhs == rhs && f.ready_count(t) > bn)
            }
        };
        if better {
            best = Some((r, s, f.ready_count(t), t));
        }
    }
    best.map_or(TypeId(0), |b| b.3)
}
