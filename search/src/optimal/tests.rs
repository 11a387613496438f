use std::collections::{HashSet, VecDeque};

use engine::graph::{Graph, ed_batch_fig1 as fig1, from_rows, lower_bound};

fn graph(types: &[&str], nodes: &[(u32, Vec<u32>)]) -> Graph {
    from_rows(types, nodes).unwrap()
}
use engine::sched::validate_schedule;
use proptest::prelude::*;

use super::*;

/// Two independent chains A→B and B→A: a shortest common supersequence problem
/// (ED-Batch A.1) whose lower bound 2 is not reachable; the optimum is 3.
fn crossed_chains() -> Graph {
    graph(
        &["A", "B"],
        &[(0, vec![]), (1, vec![0]), (1, vec![]), (0, vec![2])],
    )
}

fn ready_nodes(g: &Graph, done: &[bool]) -> Vec<usize> {
    (0..g.len())
        .filter(|&v| !done[v] && g.args(NodeId(v as u32)).iter().all(|a| done[a.index()]))
        .collect()
}

/// Every Algorithm-1 sequence, exhaustively (a batchable type takes all its
/// ready nodes, a non-batchable one any single ready node): the fewest batches.
fn brute_algorithm1(g: &Graph, done: &mut Vec<bool>) -> u32 {
    let ready = ready_nodes(g, done);
    if ready.is_empty() {
        return 0;
    }
    let mut best = u32::MAX;
    for (t, op) in g.types().iter() {
        let of_t: Vec<usize> = ready
            .iter()
            .copied()
            .filter(|&v| g.node_type(NodeId(v as u32)) == t)
            .collect();
        let moves: Vec<Vec<usize>> = if op.batchable {
            vec![of_t].into_iter().filter(|m| !m.is_empty()).collect()
        } else {
            of_t.into_iter().map(|v| vec![v]).collect()
        };
        for m in moves {
            m.iter().for_each(|&v| done[v] = true);
            best = best.min(1 + brute_algorithm1(g, done));
            m.iter().for_each(|&v| done[v] = false);
        }
    }
    best
}

/// Breadth-first search over *all* valid schedules (a batch is any non-empty
/// set of ready nodes of one type, a single node for a non-batchable type): the
/// independent check that restricting to Algorithm-1 moves loses nothing.
fn brute_any_schedule(g: &Graph) -> u32 {
    let full: u32 = (1u32 << g.len()) - 1;
    let mut seen = HashSet::from([0u32]);
    let mut queue = VecDeque::from([(0u32, 0u32)]);
    while let Some((set, d)) = queue.pop_front() {
        if set == full {
            return d;
        }
        let done: Vec<bool> = (0..g.len()).map(|v| set & (1 << v) != 0).collect();
        let ready = ready_nodes(g, &done);
        for (t, op) in g.types().iter() {
            let of_t: Vec<usize> = ready
                .iter()
                .copied()
                .filter(|&v| g.node_type(NodeId(v as u32)) == t)
                .collect();
            for sub in 1u32..(1 << of_t.len()) {
                if !op.batchable && sub.count_ones() > 1 {
                    continue;
                }
                let mut next = set;
                for (i, &v) in of_t.iter().enumerate() {
                    if sub & (1 << i) != 0 {
                        next |= 1 << v;
                    }
                }
                if seen.insert(next) {
                    queue.push_back((next, d + 1));
                }
            }
        }
    }
    unreachable!("the full set is always reachable in a DAG")
}

#[test]
fn fig1_optimum_is_six_and_proved() {
    let g = fig1();
    let r = optimal(&g, &OptimalConfig::default()).unwrap();
    assert_eq!(r.batches, 6);
    assert!(r.proved);
    assert_eq!(r.lower_bound, 6);
    assert_eq!(r.schedule, ["X", "I", "I", "I", "O", "R"]);
    validate_schedule(&g, &r.to_schedule(&g)).unwrap();
}

#[test]
fn gap_to_the_lower_bound_is_proved_by_search() {
    let g = crossed_chains();
    let r = optimal(&g, &OptimalConfig::default()).unwrap();
    assert_eq!((r.batches, r.lower_bound), (3, 2));
    assert!(r.proved);
    assert!(r.expanded > 0, "a gap to the bound needs search to close");
}

#[test]
fn deepening_refutes_the_lower_bound_then_stops_at_the_budget() {
    let g = crossed_chains();
    let d = deepening_bound(&g, &OptimalConfig::default()).unwrap();
    assert_eq!((d.bound, d.optimum), (3, true));
    // No expansion allowed: nothing refuted, the A.3 bound stands, unproved.
    let cfg = OptimalConfig {
        budget: 0,
        ..OptimalConfig::default()
    };
    let d = deepening_bound(&g, &cfg).unwrap();
    assert_eq!((d.bound, d.optimum), (2, false));
}

#[test]
fn exhausted_budget_reports_unproved_best_found() {
    let g = crossed_chains();
    let cfg = OptimalConfig {
        budget: 0,
        ..OptimalConfig::default()
    };
    let r = optimal(&g, &cfg).unwrap();
    assert!(!r.proved);
    assert_eq!(r.batches, r.incumbent_batches);
    validate_schedule(&g, &r.to_schedule(&g)).unwrap();
}

#[test]
fn too_many_nodes_is_a_typed_error() {
    let rows: Vec<(u32, Vec<u32>)> = (0..65).map(|_| (0, vec![])).collect();
    let g = graph(&["A"], &rows);
    assert_eq!(
        optimal(&g, &OptimalConfig::default()),
        Err(OptimalError::TooManyNodes {
            nodes: 65,
            max_nodes: 64
        })
    );
    let cfg = OptimalConfig {
        max_nodes: NODE_LIMIT + 1,
        ..OptimalConfig::default()
    };
    assert!(matches!(
        optimal(&g, &cfg),
        Err(OptimalError::LimitTooHigh { .. })
    ));
    let cfg = OptimalConfig {
        max_nodes: 65,
        ..OptimalConfig::default()
    };
    assert_eq!(optimal(&g, &cfg).unwrap().batches, 1);
}

#[test]
fn remaining_bound_of_nothing_executed_is_the_engine_lower_bound() {
    for g in [fig1(), crossed_chains()] {
        let m = Masks::new(&g);
        assert_eq!(u64::from(m.remaining_bound(&EMPTY)), lower_bound(&g).total);
    }
}

#[test]
fn several_non_batchable_nodes_each_take_a_batch() {
    // r0, r1 (non-batchable) feed crossed A/B chains; every R node is its own
    // batch, so the optimum is 2 + 3.
    let g = graph(
        &["R!", "A", "B"],
        &[
            (0, vec![]),
            (0, vec![]),
            (1, vec![0]),
            (2, vec![2]),
            (2, vec![1]),
            (1, vec![4]),
        ],
    );
    let r = optimal(&g, &OptimalConfig::default()).unwrap();
    let mut done = vec![false; g.len()];
    assert_eq!(r.batches, 5);
    assert_eq!(r.batches, u64::from(brute_algorithm1(&g, &mut done)));
    assert_eq!(r.batches, u64::from(brute_any_schedule(&g)));
    validate_schedule(&g, &r.to_schedule(&g)).unwrap();
}

/// Random DAG rows: up to 10 nodes over types A, B, C and a non-batchable R.
fn tiny_graph() -> impl Strategy<Value = Vec<(u32, Vec<u32>)>> {
    prop::collection::vec((0u32..4, prop::collection::vec(any::<u32>(), 0..3)), 1..=10).prop_map(
        |rows| {
            rows.into_iter()
                .enumerate()
                .map(|(i, (t, args))| {
                    // Arguments point to earlier nodes only, so the graph is acyclic.
                    let args = if i == 0 {
                        Vec::new()
                    } else {
                        let mut a: Vec<u32> = args.into_iter().map(|x| x % i as u32).collect();
                        a.sort_unstable();
                        a.dedup();
                        a
                    };
                    (t, args)
                })
                .collect()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn optimum_matches_brute_force_on_tiny_graphs(rows in tiny_graph()) {
        let g = graph(&["A", "B", "C", "R!"], &rows);
        let r = optimal(&g, &OptimalConfig::default()).unwrap();
        let mut done = vec![false; g.len()];
        let brute = u64::from(brute_algorithm1(&g, &mut done));
        prop_assert!(r.proved);
        prop_assert_eq!(r.batches, brute);
        prop_assert_eq!(u64::from(brute_any_schedule(&g)), brute);
        prop_assert!(r.batches >= r.lower_bound);
        prop_assert!(r.batches <= r.incumbent_batches);
        prop_assert_eq!(r.schedule.len() as u64, r.batches);
        validate_schedule(&g, &r.to_schedule(&g)).unwrap();
        let plain = optimal(&g, &OptimalConfig { lemma: false, ..OptimalConfig::default() }).unwrap();
        prop_assert_eq!(plain.batches, r.batches);
        let d = deepening_bound(&g, &OptimalConfig::default()).unwrap();
        prop_assert_eq!((d.bound, d.optimum), (brute, true));
    }
}
