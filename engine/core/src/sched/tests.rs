use super::*;
use crate::graph::{Graph, NodeId, TypeId, ed_batch_fig1 as fig1, from_rows, lower_bound};

/// A cell-level trace of `name` (seed 3, its default data).
fn record(name: &str, batch: usize, hidden: usize) -> crate::trace::Trace {
    use crate::workloads::{self, DataChoice, RecordOptions};
    workloads::record(
        &RecordOptions {
            workload: workloads::workload(name).unwrap(),
            data: DataChoice::Default,
            batch,
            hidden,
            level: crate::trace::Level::Cell,
            seed: 3,
        },
        &crate::cells::CellLibrary::builtin().unwrap(),
    )
    .unwrap()
}

fn graph(types: &[&str], nodes: &[(u32, Vec<u32>)]) -> Graph {
    from_rows(types, nodes).unwrap()
}

fn batches(g: &Graph, p: &mut dyn BatchPolicy) -> u64 {
    let st = SameTypeDag::new(g);
    let (s, stats) = run_policy(g, &st, p).unwrap();
    validate_schedule(g, &s).unwrap();
    stats.batches
}

#[test]
fn fig1_batches_per_policy_match_the_paper_by_hand() {
    let g = fig1();
    assert_eq!(lower_bound(&g).total, 6);
    assert_eq!(batches(&g, &mut TypewisePolicy), 6);
    // Depth-based runs the outputs at four depths: 9 batches (ED-Batch §2.1).
    assert_eq!(batches(&g, &mut DepthPolicy::default()), 9);
    // Agenda over remaining nodes: outputs in the 2nd and 6th batches, 7 in all (§2.1).
    assert_eq!(batches(&g, &mut AgendaPolicy::updated()), 7);
    // Agenda over all nodes alternates O and I: X,O,I,O,I,O,I,O,R.
    assert_eq!(batches(&g, &mut AgendaPolicy::fixed()), 9);
    // Cavs rounds (types ready at a round's start, each taking all its ready nodes):
    // X | I4, O(5 ready by then) | I5 | I6, O(2) | R.
    assert_eq!(batches(&g, &mut CavsPolicy::default()), 7);
}

#[test]
fn frontier_tracks_sub_frontier_of_each_type() {
    let g = fig1();
    let st = SameTypeDag::new(&g);
    let mut f = Frontier::new(&g, &st);
    let (x, i, o) = (TypeId(0), TypeId(1), TypeId(2));
    assert_eq!((f.ready_count(x), f.sub_frontier(x)), (4, 4));
    // I4 is the only I without an I ancestor; every O is unblocked by other Os.
    assert_eq!((f.ready_count(i), f.sub_frontier(i)), (0, 1));
    assert_eq!((f.ready_count(o), f.sub_frontier(o)), (0, 7));
    let mut out = Vec::new();
    assert_eq!(f.step(x, &mut out), 4);
    assert_eq!((f.ready_count(i), f.sub_frontier(i)), (1, 1));
    assert_eq!((f.ready_count(o), f.sub_frontier(o)), (4, 7));
    assert_eq!(f.ratio(i), 1.0);
    assert_eq!(f.step(i, &mut out), 1);
    assert_eq!((f.ready_count(i), f.sub_frontier(i)), (1, 1));
    assert_eq!(f.ready_count(o), 5);
    assert_eq!(f.batches(), 2);
}

#[test]
fn non_batchable_type_runs_one_node_per_batch() {
    let g = graph(&["N!"], &[(0, vec![]), (0, vec![]), (0, vec![])]);
    assert_eq!(batches(&g, &mut TypewisePolicy), 3);
    assert_eq!(batches(&g, &mut CavsPolicy::default()), 3);
    assert_eq!(batches(&g, &mut DepthPolicy::default()), 3);
}

#[test]
fn encodings_render_fig1_after_the_inputs() {
    let g = fig1();
    let st = SameTypeDag::new(&g);
    let mut f = Frontier::new(&g, &st);
    let mut out = Vec::new();
    f.step(TypeId(0), &mut out);
    let types: Vec<String> = ["I", "O", "R", "X"].iter().map(|s| s.to_string()).collect();
    // Trace ids X=0, I=1, O=2, R=3 -> policy tokens (name order) I=0, O=1, R=2, X=3.
    let rank = [3u16, 0, 1, 2];
    let mut key = Vec::new();
    let mut tokens = |e: Encoding| {
        StateEncoder::new(e).encode(&f, &rank, &mut key);
        key_to_tokens(&key, &types)
    };
    assert_eq!(tokens(Encoding::Base), ["I", "O"]);
    assert_eq!(tokens(Encoding::Max), ["O", "I", "O"]);
    assert_eq!(tokens(Encoding::Sort), ["O", "I"]);
    assert_eq!(tokens(Encoding::SortCond), ["O", "*I"]);
    assert_eq!(tokens(Encoding::SortPhase), ["phase:1", "O", "I"]);
    for e in Encoding::ALL {
        assert_eq!(Encoding::parse(e.name()), Some(e));
    }
}

#[test]
fn tokens_round_trip_through_keys() {
    let types: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let key = vec![PHASE | 2, 2, 1 | COMPLETE, 0];
    let tokens = key_to_tokens(&key, &types);
    assert_eq!(tokens, ["phase:2", "c", "*b", "a"]);
    assert_eq!(tokens_to_key(&tokens, &types), Some(key));
    assert_eq!(tokens_to_key(&["zzz".to_string()], &types), None);
}

#[test]
fn crit_tokens_round_trip_through_keys() {
    let types: Vec<String> = ["a", "b", "c@2"].iter().map(|s| s.to_string()).collect();
    let key = vec![
        2 | COMPLETE | CRITICAL | (3 << RATIO_SHIFT),
        1 | CRITICAL,
        (1 << RATIO_SHIFT),
        2,
    ];
    let tokens = key_to_tokens(&key, &types);
    assert_eq!(tokens, ["*!c@2@3", "!b", "a@1", "c@2"]);
    assert_eq!(tokens_to_key(&tokens, &types), Some(key));
    // A bucket must be below RATIO_BUCKETS; flags only as prefixes.
    assert_eq!(tokens_to_key(&["a@4".to_string()], &types), None);
    assert_eq!(tokens_to_key(&["a!".to_string()], &types), None);
}

#[test]
fn encodings_mark_critical_types_of_fig1() {
    let g = fig1();
    let st = SameTypeDag::new(&g);
    let mut f = Frontier::new(&g, &st);
    let types: Vec<String> = ["I", "O", "R", "X"].iter().map(|s| s.to_string()).collect();
    let rank = [3u16, 0, 1, 2];
    let mut enc = StateEncoder::new(Encoding::SortCrit);
    let mut ratio = StateEncoder::new(Encoding::SortCritRatio);
    enc.start(&f);
    ratio.start(&f);
    let mut key = Vec::new();
    let mut out = Vec::new();
    f.step(TypeId(0), &mut out);
    enc.observe(&f, TypeId(0), &out);
    ratio.observe(&f, TypeId(0), &out);
    // After the inputs: I (1 of 1 ready, its chain of 3 starts there) is
    // complete and critical; O (4 of 7) is neither: the O chain has length 1
    // and three more O nodes wait behind I nodes.
    enc.encode(&f, &rank, &mut key);
    assert_eq!(key_to_tokens(&key, &types), ["O", "*!I"]);
    ratio.encode(&f, &rank, &mut key);
    assert_eq!(key_to_tokens(&key, &types), ["O@2", "*!I@3"]);
}

fn fig1_policy() -> PolicyFile {
    // The optimal FSM of ED-Batch Fig. 2(a) under Esort: prefer I over O.
    let s = |v: &[&str], a: &str| StateEntry {
        state: v.iter().map(|x| x.to_string()).collect(),
        action: a.to_string(),
        q: [(a.to_string(), -1.0)].into_iter().collect(),
    };
    PolicyFile {
        format: POLICY_FORMAT.into(),
        // What the trainer writes for a table without a deferred state.
        version: 2,
        encoding: Encoding::Sort,
        workload: "fig1".into(),
        provenance: Provenance {
            trace: "fig1.json".into(),
            nodes: 15,
            batch_size: None,
            hidden: None,
            dataset: None,
            seed: 0,
        },
        hyperparameters: Hyperparameters {
            learning_rate: 0.4,
            gamma: 1.0,
            epsilon_start: 0.5,
            epsilon_decay: 0.9,
            epsilon_floor: 0.05,
            n_step: 10,
            max_episodes: 1000,
            rollout_every: 50,
            alpha: 0.5,
            stop_ratio: 1.01,
            reward: Reward::Eq1,
            exploration: Exploration::Step,
        },
        training: TrainingSummary {
            episodes: 0,
            best_batches: 6,
            lower_bound: 6,
            best_episode: 0,
            stop_reason: "lower-bound".into(),
            prior_batches: None,
            teacher: None,
        },
        fallback: None,
        pass: None,
        types: ["I", "O", "R", "X"].iter().map(|s| s.to_string()).collect(),
        states: vec![
            s(&["X"], "X"),
            s(&["O", "I"], "I"),
            s(&["O"], "O"),
            s(&["R"], "R"),
        ],
    }
}

#[test]
fn fsm_follows_its_table_and_counts_misses() {
    let g = fig1();
    let mut fsm = FsmPolicy::new(fig1_policy()).unwrap();
    assert_eq!(batches(&g, &mut fsm), 6);
    assert_eq!(fsm.misses(), 0);
    // Without the {O, I} state the FSM falls back (typewise) there: same result,
    // but each such decision is a miss.
    let mut p = fig1_policy();
    p.states.remove(1);
    let mut fsm = FsmPolicy::new(p).unwrap();
    assert_eq!(batches(&g, &mut fsm), 6);
    assert_eq!(fsm.misses(), 3);
}

/// A state stored with the action `(fallback)` is decided by the fallback as
/// a miss would be, but counted as deferred: the policy holds the state.
/// Version 2 cannot say it; a type of that name is refused.
#[test]
fn a_deferred_state_is_decided_by_the_fallback_and_is_not_a_miss() {
    let g = fig1();
    let mut p = fig1_policy();
    p.version = POLICY_VERSION;
    p.states[1].action = DEFER_ACTION.into();
    let mut fsm = FsmPolicy::new(p.clone()).unwrap();
    let st = SameTypeDag::new(&g);
    let (_, stats) = run_policy(&g, &st, &mut fsm).unwrap();
    assert_eq!((stats.batches, stats.misses, stats.deferred), (6, 0, 3));
    let read = |p: &PolicyFile| PolicyFile::from_yaml(&p.to_yaml().unwrap(), "p.yaml");
    assert_eq!(read(&p).unwrap(), p);
    p.version = 2;
    let err = read(&p).unwrap_err().to_string();
    assert!(err.contains("needs version 3"), "{err}");
    let mut q = fig1_policy();
    q.types.insert(0, DEFER_ACTION.into());
    let err = read(&q).unwrap_err().to_string();
    assert!(err.contains("not a type name"), "{err}");
}

/// The FSM's fallback (typewise) reads |Frontier(G^t)|, its `sort` encoding
/// does not: the exact same-type DAG is built at the first miss, never when
/// the table covers the run, and the schedule is the one an up-front DAG gives.
#[test]
fn an_fsm_builds_the_same_type_dag_only_at_its_first_miss() {
    let g = fig1();
    let exact = |g: &Graph| SameTypeDag::new(g);
    let full = fig1_policy();
    let mut early = fig1_policy();
    early.states.remove(1); // {O, I}: misses from the second decision
    let mut late = fig1_policy();
    late.states.remove(2); // {O}: misses once the I chain is done
    for (p, misses) in [(full, 0), (early, 3), (late, 1)] {
        let mut a = FsmPolicy::new(p.clone()).unwrap();
        assert!(a.sub_frontier_on_demand());
        let st = SameTypeDag::new(&g);
        let (want, _) = run_policy(&g, &st, &mut a).unwrap();
        let mut b = FsmPolicy::new(p).unwrap();
        let (got, stats, built) = run_policy_on_demand(&g, &mut b, &exact, &mut |_| {}).unwrap();
        assert_eq!(got, want);
        assert_eq!(stats.misses, misses);
        assert_eq!(built.is_some(), misses > 0);
    }
}

#[test]
fn fsm_matches_types_across_hidden_sizes() {
    // A policy over `a[h=64]` drives a trace of `a[h=128]`.
    let mut p = fig1_policy();
    p.types = ["I[h=64]", "O[h=64]", "R[h=64]", "X[h=64]"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for s in &mut p.states {
        for t in s.state.iter_mut().chain(std::iter::once(&mut s.action)) {
            *t = format!("{t}[h=64]");
        }
        s.q = [(s.action.clone(), -1.0)].into_iter().collect();
    }
    let g = crate::graph::ed_batch_fig1_named(["X[h=128]", "I[h=128]", "O[h=128]", "R[h=128]"]);
    let mut fsm = FsmPolicy::new(p).unwrap();
    assert_eq!(batches(&g, &mut fsm), 6);
    assert_eq!(fsm.misses(), 0);
}

#[test]
fn policy_file_round_trips_through_yaml() {
    let p = fig1_policy();
    let text = p.to_yaml().unwrap();
    let back = PolicyFile::from_yaml(&text, "p.yaml").unwrap();
    assert_eq!(back, p);
    assert_eq!(back.to_yaml().unwrap(), text);
}

#[test]
fn version_1_files_still_read_with_the_version_1_trainer_defaults() {
    let v1 = fig1_policy()
        .to_yaml()
        .unwrap()
        .replace("version: 2", "version: 1")
        .replace("  reward: eq1\n", "")
        .replace("  exploration: step\n", "");
    assert!(v1.contains("version: 1") && !v1.contains("reward"), "{v1}");
    let p = PolicyFile::from_yaml(&v1, "old.yaml").unwrap();
    assert_eq!(p.version, 1);
    assert_eq!(p.hyperparameters.reward, Reward::Eq1);
    assert_eq!(p.hyperparameters.exploration, Exploration::Step);
    let mut fsm = FsmPolicy::new(p).unwrap();
    assert_eq!(batches(&fig1(), &mut fsm), 6);
    // What version 1 cannot hold is refused, naming the field.
    let e = PolicyFile::from_yaml(
        &v1.replace("encoding: sort", "encoding: sort-crit"),
        "old.yaml",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "old.yaml: field `encoding`: sort-crit needs version 2 or later, the file says 1"
    );
    let e = PolicyFile::from_yaml(&v1.replace("version: 1", "version: 4"), "p.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unsupported version 4"), "{e}");
}

#[test]
fn fallback_names_a_heuristic_and_is_used_on_misses() {
    let mut p = fig1_policy();
    p.states.clear();
    p.fallback = Some("depth".into());
    let text = p.to_yaml().unwrap();
    let mut fsm = FsmPolicy::new(PolicyFile::from_yaml(&text, "p.yaml").unwrap()).unwrap();
    // Every decision falls back to depth: 9 batches, as depth alone.
    assert_eq!(batches(&fig1(), &mut fsm), 9);
    let e = PolicyFile::from_yaml(
        &text.replace("fallback: depth", "fallback: magic"),
        "p.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("p.yaml: field `fallback`: unknown heuristic \"magic\""),
        "{e}"
    );
}

#[test]
fn policy_file_errors_name_file_and_field() {
    let text = fig1_policy().to_yaml().unwrap();
    // (Regression: `version: x` said "invalid u32" without the field.)
    for (from, to, want) in [
        (
            "workload:",
            "colour: 1\nworkload:",
            "unknown field `colour`",
        ),
        ("version: 2", "version: x", "p.yaml:2:10: field `version`"),
    ] {
        let e = PolicyFile::from_yaml(&text.replace(from, to), "p.yaml").unwrap_err();
        let e = e.to_string();
        assert!(e.starts_with("p.yaml:") && e.contains(want), "{e}");
    }
    let e = PolicyFile::from_yaml(&text.replace("action: I", "action: Q"), "p.yaml")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "p.yaml: states[1]: action \"Q\" names no type in `types`"
    );
    let e = PolicyFile::from_yaml(&text.replace("batchlab-policy", "other"), "p.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("field `format`"), "{e}");
    let e = PolicyFile::from_yaml(&text.replace("encoding: sort", "encoding: fancy"), "p.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("p.yaml:") && e.contains("fancy"), "{e}");
}

#[test]
fn validation_reports_each_kind_of_bad_schedule() {
    let g = graph(
        &["A", "N!"],
        &[(0, vec![]), (0, vec![0]), (1, vec![]), (1, vec![])],
    );
    let check = |batches: &[(u32, &[u32])]| {
        let mut s = Schedule::new();
        for (t, nodes) in batches {
            let nodes: Vec<NodeId> = nodes.iter().map(|&v| NodeId(v)).collect();
            s.push(TypeId(*t), &nodes);
        }
        validate_schedule(&g, &s).map_err(|e| e.to_string())
    };
    assert_eq!(check(&[(0, &[0]), (0, &[1]), (1, &[2]), (1, &[3])]), Ok(()));
    assert_eq!(
        check(&[(0, &[0, 1])]),
        Err("batch 0: node 1 runs before its argument 0".into())
    );
    assert_eq!(
        check(&[(0, &[1]), (0, &[0])]),
        Err("batch 0: node 1 runs before its argument 0".into())
    );
    assert_eq!(
        check(&[(0, &[0]), (0, &[0])]),
        Err("batch 1: node 0 already ran in batch 0".into())
    );
    assert_eq!(
        check(&[(0, &[0, 0])]),
        Err("batch 0: node 0 already ran in batch 0".into())
    );
    assert_eq!(
        check(&[(0, &[0, 2])]),
        Err("batch 0: node 2 has another type than the batch".into())
    );
    assert_eq!(
        check(&[(1, &[2, 3])]),
        Err("batch 0: 2 nodes of non-batchable type N".into())
    );
    assert_eq!(
        check(&[(0, &[9])]),
        Err("batch 0: node 9 is not in the graph".into())
    );
    assert_eq!(check(&[(0, &[])]), Err("batch 0 is empty".into()));
    assert_eq!(
        check(&[(0, &[0])]),
        Err("3 nodes never run (first: node 1)".into())
    );
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    /// Random DAGs over 3 types (args point to earlier nodes only).
    fn dag() -> impl Strategy<Value = Graph> {
        proptest::collection::vec(
            (0u32..3, proptest::collection::vec(any::<u32>(), 0..3)),
            1..40,
        )
        .prop_map(|rows| {
            let nodes: Vec<(u32, Vec<u32>)> = rows
                .into_iter()
                .enumerate()
                .map(|(i, (t, args))| {
                    let args = if i == 0 {
                        vec![]
                    } else {
                        let mut a: Vec<u32> = args.into_iter().map(|a| a % i as u32).collect();
                        a.dedup();
                        a
                    };
                    (t, args)
                })
                .collect();
            graph(&["A", "B", "C!"], &nodes)
        })
    }

    /// |Frontier(G^t)| from scratch: unexecuted type-t nodes none of whose
    /// unexecuted ancestors has type t.
    fn brute_sub_frontier(g: &Graph, done: &[bool], t: TypeId) -> u32 {
        let mut blocked = vec![false; g.len()];
        for &v in g.topo_order() {
            blocked[v.index()] = g
                .args(v)
                .iter()
                .any(|a| !done[a.index()] && (g.node_type(*a) == t || blocked[a.index()]));
        }
        g.nodes()
            .filter(|&v| !done[v.index()] && g.node_type(v) == t && !blocked[v.index()])
            .count() as u32
    }

    /// ED-Batch A.3 on the unexecuted nodes, from scratch.
    fn brute_remaining_bound(g: &Graph, done: &[bool]) -> u32 {
        let mut total = 0;
        for (t, op) in g.types().iter() {
            let mut chain = vec![0u32; g.len()];
            let mut best = 0;
            for &v in g.topo_order() {
                let inherited = g
                    .args(v)
                    .iter()
                    .map(|a| chain[a.index()])
                    .max()
                    .unwrap_or(0);
                let mine = u32::from(!done[v.index()] && g.node_type(v) == t);
                chain[v.index()] = inherited + mine;
                best = best.max(chain[v.index()]);
            }
            if !op.batchable {
                best = g
                    .nodes()
                    .filter(|v| !done[v.index()] && g.node_type(*v) == t)
                    .count() as u32;
            }
            total += best;
        }
        total
    }

    /// The same-type DAG from its definition: u → v when both have type t, u
    /// reaches v, and no type-t node w has u → w → v.
    fn brute_reduction(g: &Graph) -> Vec<Vec<NodeId>> {
        let n = g.len();
        let mut reach = vec![vec![false; n]; n];
        for &v in g.topo_order().iter().rev() {
            for &w in g.users(v) {
                let below = reach[w.index()].clone();
                let row = &mut reach[v.index()];
                row[w.index()] = true;
                for (r, b) in row.iter_mut().zip(below) {
                    *r |= b;
                }
            }
        }
        let ty = |i: usize| g.node_type(NodeId(i as u32));
        (0..n)
            .map(|u| {
                (0..n)
                    .filter(|&v| {
                        ty(v) == ty(u)
                            && reach[u][v]
                            && !(0..n).any(|w| ty(w) == ty(u) && reach[u][w] && reach[w][v])
                    })
                    .map(|v| NodeId(v as u32))
                    .collect()
            })
            .collect()
    }

    /// `g` with its ids reversed (arguments then come after their users), and
    /// the new id of each old one.
    fn ids_reversed(g: &Graph) -> (Graph, impl Fn(NodeId) -> NodeId) {
        let n = g.len() as u32;
        let flip = move |v: NodeId| NodeId(n - 1 - v.0);
        let rows: Vec<(u32, Vec<u32>)> = (0..n)
            .map(|j| {
                let old = flip(NodeId(j));
                let args = g.args(old).iter().map(|a| flip(*a).0).collect();
                (g.node_type(old).0, args)
            })
            .collect();
        (graph(&["A", "B", "C!"], &rows), flip)
    }

    proptest! {
        #[test]
        fn same_type_dag_is_the_transitive_reduction_of_each_type(g in dag()) {
            let want = brute_reduction(&g);
            let st = SameTypeDag::new(&g);
            let seq = SameTypeDag::sequential(&g);
            // Split into parts run last to first: neither the split nor the
            // order the parts run in may change the DAG.
            let split: Vec<SameTypeDag> = (1..=5)
                .map(|k| SameTypeDag::with_parts(&g, k, &|part| (0..k).rev().for_each(part)))
                .collect();
            for v in g.nodes() {
                prop_assert_eq!(st.successors(v), &want[v.index()][..], "node {}", v.0);
                prop_assert_eq!(seq.successors(v), st.successors(v));
                prop_assert_eq!(seq.height(v), st.height(v));
                for p in &split {
                    prop_assert_eq!(p.successors(v), st.successors(v));
                    prop_assert_eq!(p.height(v), st.height(v));
                }
            }
            for p in &split {
                prop_assert_eq!(p.in_degrees(), st.in_degrees());
            }
            // Ids that are not topological (as on the reversed graph of the
            // backward pass) take the topological-position path.
            let (r, flip) = ids_reversed(&g);
            let rst = SameTypeDag::new(&r);
            for v in g.nodes() {
                let mut mapped: Vec<NodeId> = want[v.index()].iter().map(|w| flip(*w)).collect();
                mapped.sort_unstable();
                prop_assert_eq!(rst.successors(flip(v)), &mapped[..]);
                prop_assert_eq!(rst.height(flip(v)), st.height(v));
            }
        }

        #[test]
        fn remaining_bound_equals_brute_force_and_critical_means_it_drops(
            g in dag(),
            picks in proptest::collection::vec(any::<u8>(), 40),
        ) {
            let st = SameTypeDag::new(&g);
            let mut f = Frontier::new(&g, &st);
            let mut b = RemainingBound::new(&f);
            let mut done = vec![false; g.len()];
            let mut out = Vec::new();
            let mut i = 0;
            while !f.is_done() {
                prop_assert_eq!(b.bound(), brute_remaining_bound(&g, &done));
                let ready: Vec<TypeId> = f.ready_types().collect();
                let t = ready[usize::from(picks[i % picks.len()]) % ready.len()];
                i += 1;
                let critical = b.is_critical(&f, t);
                let before = b.bound();
                let full = i % 3 != 0 || f.ready_count(t) == 1 || !g.types().batchable(t);
                out.clear();
                // Mix the step kinds the tracker must follow.
                if i % 3 == 0 {
                    let first = f.ready(t)[0];
                    f.step_filtered(t, |v| v == first, &mut out);
                } else {
                    f.step(t, &mut out);
                }
                b.after_step(&f, t, &out);
                for v in &out {
                    done[v.index()] = true;
                }
                let dropped = before - b.bound();
                prop_assert!(dropped <= 1);
                if full {
                    prop_assert_eq!(dropped == 1, critical);
                }
            }
            prop_assert_eq!(b.bound(), 0);
        }

        #[test]
        fn every_policy_gives_a_valid_schedule_at_or_above_the_bound(g in dag()) {
            let lb = lower_bound(&g).total;
            for name in HEURISTICS {
                let mut p = heuristic(name).unwrap();
                let st = SameTypeDag::new(&g);
                let (s, stats) = run_policy(&g, &st, p.as_mut()).unwrap();
                prop_assert!(validate_schedule(&g, &s).is_ok(), "{name}");
                prop_assert!(stats.batches >= lb, "{name}: {} < {lb}", stats.batches);
            }
        }

        #[test]
        fn a_dag_attached_mid_run_gives_the_incremental_counts(g in dag(), at in 0usize..40) {
            let edgeless = SameTypeDag::without_edges(&g);
            let st = SameTypeDag::new(&g);
            let mut f = Frontier::new(&g, &edgeless);
            let mut done = vec![false; g.len()];
            let mut out = Vec::new();
            let mut step = 0;
            while !f.is_done() {
                if step == at {
                    f.attach(&st);
                }
                if step >= at {
                    for t in 0..3 {
                        let t = TypeId(t);
                        prop_assert_eq!(f.sub_frontier(t), brute_sub_frontier(&g, &done, t));
                    }
                }
                let t = f.ready_types().next().unwrap();
                out.clear();
                f.step(t, &mut out);
                for v in &out {
                    done[v.index()] = true;
                }
                step += 1;
            }
        }

        #[test]
        fn incremental_sub_frontier_equals_brute_force(g in dag()) {
            let st = SameTypeDag::new(&g);
            let mut f = Frontier::new(&g, &st);
            let mut done = vec![false; g.len()];
            let mut out = Vec::new();
            while !f.is_done() {
                for t in 0..3 {
                    let t = TypeId(t);
                    prop_assert_eq!(f.sub_frontier(t), brute_sub_frontier(&g, &done, t));
                }
                let t = typewise_choice(&f);
                out.clear();
                f.step(t, &mut out);
                for v in &out {
                    done[v.index()] = true;
                }
            }
        }
    }
}

/// `in_id_order` lists every batch in id order and changes nothing else: the
/// same batches (as sets), types and counters as the run in ready order.
#[test]
fn batches_in_id_order_are_the_same_sets() {
    // Some ready-order batch is out of id order, or the test shows nothing.
    let mut unsorted_somewhere = false;
    for name in ["lattice-lstm", "tree-lstm", "bilstm-tagger-char"] {
        let trace = record(name, 16, 8);
        let g = &trace.graph;
        let st = SameTypeDag::new(g);
        let run = |sorted: bool| {
            let mut p = TypewisePolicy;
            let mut r = PolicyRun::new(g, &st, &mut p).unwrap();
            if sorted {
                r = r.in_id_order();
            }
            while r.advance().unwrap().is_some() {}
            r.finish()
        };
        let (ready, ready_stats, _) = run(false);
        let (ids, id_stats, _) = run(true);
        assert_eq!(ready_stats, id_stats, "{name}");
        validate_schedule(g, &ids).unwrap();
        for ((t1, b1), (t2, b2)) in ready.batches().zip(ids.batches()) {
            assert_eq!(t1, t2, "{name}");
            assert!(b2.is_sorted(), "{name}: {b2:?}");
            let mut b1s = b1.to_vec();
            unsorted_somewhere |= !b1.is_sorted();
            b1s.sort_unstable();
            assert_eq!(b1s, b2, "{name}");
        }
    }
    assert!(
        unsorted_somewhere,
        "every ready-order batch was already in id order"
    );
}

/// Regression (bad input round two): a policy listing the same state twice
/// with different actions let the later entry win silently; the reader
/// names both entries.
#[test]
fn a_state_listed_twice_is_refused_naming_both_entries() {
    let mut p = fig1_policy();
    let mut twin = p.states[0].clone();
    twin.action = p.types.iter().find(|t| **t != twin.action).unwrap().clone();
    twin.q = [(twin.action.clone(), -1.0)].into_iter().collect();
    p.states.push(twin);
    let text = p.to_yaml().unwrap();
    let e = PolicyFile::from_yaml(&text, "p.yaml")
        .unwrap_err()
        .to_string();
    let last = p.states.len() - 1;
    assert!(e.contains("p.yaml"), "{e}");
    assert!(
        e.contains(&format!("states[{last}]")) && e.contains("listed already as states["),
        "{e}"
    );
}
