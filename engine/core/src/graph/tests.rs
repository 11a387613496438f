use super::*;

/// Builds a graph from `(type, args)` rows over named types (`!` suffix = non-batchable).
fn graph(types: &[&str], nodes: &[(u32, &[u32])]) -> Result<Graph, GraphError> {
    let mut b = GraphBuilder::new();
    for name in types {
        let (name, batchable) = match name.strip_suffix('!') {
            Some(n) => (n, false),
            None => (*name, true),
        };
        b.types_mut().push(name, batchable)?;
    }
    for (i, (ty, args)) in nodes.iter().enumerate() {
        let args: Vec<NodeId> = args.iter().map(|&a| NodeId(a)).collect();
        b.add_node(TypeId(*ty), &args, Some(i as u32 % 2));
    }
    b.finish()
}

#[test]
fn lower_bound_of_independent_chains_is_the_longest_chain() {
    // A-chain of 3 (0..2) beside an A-chain of 5 (3..7): batching across chains gives 5.
    let g = graph(
        &["A"],
        &[
            (0, &[]),
            (0, &[0]),
            (0, &[1]),
            (0, &[]),
            (0, &[3]),
            (0, &[4]),
            (0, &[5]),
            (0, &[6]),
        ],
    )
    .unwrap();
    assert_eq!(lower_bound(&g).total, 5);
}

#[test]
fn lower_bound_of_alternating_chain_counts_each_type() {
    // a0 -> b1 -> a2 -> b3: A needs 2 batches, B needs 2.
    let g = graph(&["A", "B"], &[(0, &[]), (1, &[0]), (0, &[1]), (1, &[2])]).unwrap();
    let lb = lower_bound(&g);
    assert_eq!(lb.per_type, vec![2, 2]);
    assert_eq!(lb.total, 4);
}

#[test]
fn lower_bound_chain_may_pass_through_other_types() {
    // a0 -> b1 -> a2: the two A nodes can never share a batch although no A->A edge exists.
    let g = graph(&["A", "B"], &[(0, &[]), (1, &[0]), (0, &[1])]).unwrap();
    assert_eq!(lower_bound(&g).per_type, vec![2, 1]);
}

#[test]
fn lower_bound_of_tree_with_interleaved_types() {
    // ED-Batch Fig. 1 shape: leaves L0..L3, internals I4(L0,L1), I5(L2,L3), I6(I4,I5),
    // an output O per node (7..13), and one non-batchable reduction R(all O).
    // By hand: L=1, I=2 (I4 -> I6), O=1 (no O depends on another O), R=1 => 5,
    // achieved by the schedule L, I{4,5}, I6, O{all}, R.
    let nodes: Vec<(u32, Vec<u32>)> = vec![
        (0, vec![]),
        (0, vec![]),
        (0, vec![]),
        (0, vec![]),
        (1, vec![0, 1]),
        (1, vec![2, 3]),
        (1, vec![4, 5]),
        (2, vec![0]),
        (2, vec![1]),
        (2, vec![2]),
        (2, vec![3]),
        (2, vec![4]),
        (2, vec![5]),
        (2, vec![6]),
        (3, (7..14).collect()),
    ];
    let rows: Vec<(u32, &[u32])> = nodes.iter().map(|(t, a)| (*t, a.as_slice())).collect();
    let g = graph(&["L", "I", "O", "R!"], &rows).unwrap();
    let lb = lower_bound(&g);
    assert_eq!(lb.per_type, vec![1, 2, 1, 1]);
    assert_eq!(lb.total, 5);
}

#[test]
fn lower_bound_counts_every_non_batchable_node() {
    // Three independent non-batchable nodes need three batches; a batchable
    // twin set of three needs one.
    let g = graph(
        &["N!", "A"],
        &[(0, &[]), (0, &[]), (0, &[]), (1, &[]), (1, &[]), (1, &[])],
    )
    .unwrap();
    assert_eq!(lower_bound(&g).per_type, vec![3, 1]);
    assert_eq!(lower_bound(&g).total, 4);
}

#[test]
fn lower_bound_of_empty_graph_is_zero() {
    let g = graph(&["A"], &[]).unwrap();
    assert_eq!(lower_bound(&g).total, 0);
    assert_eq!(stats(&g).depth, 0);
}

#[test]
fn users_are_listed_once_per_use_in_node_order() {
    let g = graph(&["A"], &[(0, &[]), (0, &[0, 0]), (0, &[0])]).unwrap();
    assert_eq!(g.users(NodeId(0)), &[NodeId(1), NodeId(1), NodeId(2)]);
    assert_eq!(g.args(NodeId(1)), &[NodeId(0), NodeId(0)]);
    assert_eq!(g.num_edges(), 3);
}

#[test]
fn topo_order_accepts_forward_references() {
    // Node 0 uses node 2: a trace may list nodes in any order.
    let g = graph(&["A"], &[(0, &[2]), (0, &[]), (0, &[1])]).unwrap();
    assert_eq!(g.topo_order(), &[NodeId(1), NodeId(2), NodeId(0)]);
    assert_eq!(depths(&g), vec![2, 0, 1]);
}

#[test]
fn ids_are_known_topological_exactly_when_every_argument_comes_first() {
    let forward = graph(&["A"], &[(0, &[2]), (0, &[]), (0, &[1])]).unwrap();
    assert!(!forward.ids_topological());
    let chain = graph(&["A"], &[(0, &[]), (0, &[0]), (0, &[1])]).unwrap();
    assert!(chain.ids_topological());
    // Reversed, a chain's arguments come after their users.
    assert!(!chain.reversed().ids_topological());
    assert!(forward.reversed().reversed().ids_topological() == forward.ids_topological());
    let isolated = graph(&["A"], &[(0, &[]), (0, &[])]).unwrap();
    assert!(isolated.reversed().ids_topological());
}

#[test]
fn cycle_error_names_the_nodes_on_the_cycle() {
    // 0 is a source; 1 -> 2 -> 3 -> 1 is a cycle; 4 hangs off it.
    let err = graph(
        &["A"],
        &[(0, &[]), (0, &[0, 3]), (0, &[1]), (0, &[2]), (0, &[3])],
    )
    .unwrap_err();
    assert_eq!(
        err,
        GraphError::Cycle {
            nodes: vec![1, 2, 3, 1]
        }
    );
    assert_eq!(err.to_string(), "cycle through nodes 1 -> 2 -> 3 -> 1");
}

#[test]
fn self_loop_is_reported_before_cycle() {
    let err = graph(&["A"], &[(0, &[]), (0, &[1])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 1: lists itself as an argument (self-loop)"
    );
}

#[test]
fn argument_out_of_range_names_node_and_position() {
    let err = graph(&["A"], &[(0, &[]), (0, &[0, 9])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 1: argument #1 = 9 out of range (the trace has 2 nodes)"
    );
}

#[test]
fn type_out_of_range_names_node() {
    let err = graph(&["A"], &[(0, &[]), (3, &[])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node 1: type 3 out of range (the trace has 1 types)"
    );
}

#[test]
fn duplicate_type_names_are_rejected() {
    let err = graph(&["A", "B", "A"], &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "type 2: duplicate type name \"A\" (first defined as type 0)"
    );
}

#[test]
fn stats_count_types_instances_and_depth() {
    let g = graph(&["A", "B"], &[(0, &[]), (1, &[0]), (0, &[1]), (1, &[])]).unwrap();
    let s = stats(&g);
    assert_eq!((s.nodes, s.edges, s.instances, s.depth), (4, 2, 2, 3));
    assert_eq!(s.types[0].nodes, 2);
    assert_eq!(s.types[1].nodes, 2);
    assert_eq!(s.lower_bound, 3);
}

mod prop {
    use super::*;
    use petgraph::graph::DiGraph;
    use proptest::prelude::*;

    proptest! {
        /// Random small digraphs: the builder accepts exactly the acyclic ones
        /// (petgraph is the oracle), and its order respects every edge.
        #[test]
        fn builder_agrees_with_petgraph_on_acyclicity(
            n in 1usize..12,
            edges in proptest::collection::vec((0u32..12, 0u32..12), 0..30),
        ) {
            let edges: Vec<(u32, u32)> = edges
                .into_iter()
                .filter(|(a, b)| (*a as usize) < n && (*b as usize) < n && a != b)
                .collect();
            let mut args: Vec<Vec<u32>> = vec![Vec::new(); n];
            let mut pg = DiGraph::<(), ()>::new();
            let ids: Vec<_> = (0..n).map(|_| pg.add_node(())).collect();
            for &(from, to) in &edges {
                args[to as usize].push(from);
                pg.add_edge(ids[from as usize], ids[to as usize], ());
            }
            let rows: Vec<(u32, &[u32])> = args.iter().map(|a| (0, a.as_slice())).collect();
            let result = graph(&["A"], &rows);
            prop_assert_eq!(result.is_ok(), !petgraph::algo::is_cyclic_directed(&pg));
            match result {
                Ok(g) => {
                    let mut pos = vec![0usize; n];
                    for (i, v) in g.topo_order().iter().enumerate() {
                        pos[v.index()] = i;
                    }
                    for &(from, to) in &edges {
                        prop_assert!(pos[from as usize] < pos[to as usize]);
                    }
                }
                Err(GraphError::Cycle { nodes }) => {
                    // The reported walk is a real cycle: each consecutive pair is an edge.
                    prop_assert!(nodes.len() >= 3);
                    for w in nodes.windows(2) {
                        prop_assert!(edges.contains(&(w[0], w[1])));
                    }
                }
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
    }
}
