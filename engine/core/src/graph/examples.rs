//! Small graphs built by hand: a compact constructor for tests and teaching, and
//! the running example of ED-Batch §2.1.

use super::{Graph, GraphBuilder, GraphError, NodeId, TypeId};

/// A graph from `(type index, argument list)` rows over named types; a `!`
/// suffix on a name marks the type non-batchable. Every node gets instance 0.
pub fn from_rows<A: AsRef<[u32]>>(types: &[&str], nodes: &[(u32, A)]) -> Result<Graph, GraphError> {
    let mut b = GraphBuilder::new();
    for name in types {
        let (name, batchable) = match name.strip_suffix('!') {
            Some(n) => (n, false),
            None => (*name, true),
        };
        b.types_mut().push(name, batchable)?;
    }
    let mut args: Vec<NodeId> = Vec::new();
    for (ty, a) in nodes {
        args.clear();
        args.extend(a.as_ref().iter().map(|&x| NodeId(x)));
        b.add_node(TypeId(*ty), &args, Some(0));
    }
    b.finish()
}

/// ED-Batch Fig. 1: inputs X0..X3 (type X), a left-branching chain of internal
/// nodes I4 = (X0, X1), I5 = (I4, X2), I6 = (I5, X3), an output O on every X and
/// I node (nodes 7..13, depths 1,1,1,1,2,3,4) and one non-batchable reduction R
/// over all outputs. The optimum is 6 batches (X, I4, I5, I6, all O, R); depth
/// batching takes 9, DyNet's agenda (over remaining nodes) 7.
pub fn ed_batch_fig1() -> Graph {
    ed_batch_fig1_named(["X", "I", "O", "R"])
}

/// [`ed_batch_fig1`] with other names for the types X, I, O and R (R stays
/// non-batchable), e.g. to test matching by name.
pub fn ed_batch_fig1_named(names: [&str; 4]) -> Graph {
    let mut n: Vec<(u32, Vec<u32>)> = vec![(0, vec![]), (0, vec![]), (0, vec![]), (0, vec![])];
    n.push((1, vec![0, 1]));
    n.push((1, vec![4, 2]));
    n.push((1, vec![5, 3]));
    for src in 0..7 {
        n.push((2, vec![src]));
    }
    n.push((3, (7..14).collect()));
    let r = format!("{}!", names[3]);
    // The rows above are valid by construction, whatever the names (a name
    // repeated among the four is the caller's bug).
    from_rows(&[names[0], names[1], names[2], &r], &n).unwrap_or_else(|e| panic!("fig1: {e}"))
}
