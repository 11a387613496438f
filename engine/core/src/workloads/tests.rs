use super::*;
use crate::cells::CellLibrary;
use crate::data::{Lattice, Pair, Sentence, Structures, Tree, TreeNode, Word};
use crate::graph::{NodeId, lower_bound, stats};
use crate::trace::{Level, Trace};

fn lib() -> CellLibrary {
    CellLibrary::builtin().expect("built-in cells load")
}

fn opts(name: &str, batch: usize, level: Level, seed: u64) -> RecordOptions {
    RecordOptions {
        workload: workload(name).expect("workload exists"),
        data: DataChoice::Default,
        batch,
        hidden: 16,
        level,
        seed,
    }
}

/// Records `samples` of workload `name` at cell level.
fn given(name: &str, samples: Structures) -> Trace {
    record_samples(&opts(name, 1, Level::Cell, 1), &lib(), &samples).expect("records")
}

fn count(t: &Trace, type_prefix: &str) -> usize {
    let g = &t.graph;
    g.nodes()
        .filter(|&v| role_of(g.types().name(g.node_type(v))) == type_prefix)
        .count()
}

/// ((x x) x): leaves at post-order 0, 1, 3; internals at 2 and 4.
fn small_tree() -> Tree {
    Tree {
        nodes: vec![
            TreeNode::Leaf,
            TreeNode::Leaf,
            TreeNode::Internal { left: 0, right: 1 },
            TreeNode::Leaf,
            TreeNode::Internal { left: 2, right: 3 },
        ],
        ..Default::default()
    }
}

fn words(spec: &[(u32, bool)]) -> Sentence {
    Sentence {
        words: spec
            .iter()
            .map(|&(chars, rare)| Word { chars, rare })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn every_workload_records_revalidates_and_expands() {
    let lib = lib();
    assert_eq!(WORKLOADS.len(), 15);
    for w in WORKLOADS {
        for level in [Level::Cell, Level::Op] {
            let t = record(&opts(w.name, 4, level, 3), &lib)
                .unwrap_or_else(|e| panic!("{} {level:?}: {e}", w.name));
            let back = Trace::from_json(&t.to_json(), "mem").expect("re-reads");
            assert_eq!(back, t, "{} {level:?} round trip", w.name);
            assert_eq!(t.graph.num_instances(), 4, "{}", w.name);
            // Exactly one node (the loss sum) belongs to no instance and has no user.
            let sinks: Vec<NodeId> = t
                .graph
                .nodes()
                .filter(|&v| t.graph.users(v).is_empty())
                .collect();
            if level == Level::Cell {
                assert_eq!(sinks.len(), 1, "{}: one sink", w.name);
                assert_eq!(t.graph.instance(sinks[0]), None);
            }
            assert!(lower_bound(&t.graph).total >= 3, "{}", w.name);
        }
    }
}

#[test]
fn same_seed_same_bytes_other_seed_other_samples() {
    let lib = lib();
    for name in [
        "tree-lstm-2type",
        "lattice-lstm",
        "bilstm-tagger-char",
        "tree-gru",
    ] {
        let a = record(&opts(name, 8, Level::Cell, 11), &lib)
            .unwrap()
            .to_json();
        let b = record(&opts(name, 8, Level::Cell, 11), &lib)
            .unwrap()
            .to_json();
        let c = record(&opts(name, 8, Level::Cell, 12), &lib)
            .unwrap()
            .to_json();
        assert_eq!(a, b, "{name}");
        assert_ne!(a, c, "{name}");
    }
}

#[test]
fn tree_lstm_unrolls_a_tree_as_counted_by_hand() {
    let t = given("tree-lstm", Structures::Trees(vec![small_tree()]));
    // 3 lookups + 3 leaf cells + 2 internal cells + 5 losses (one per tree node) + 1 sum.
    assert_eq!(t.graph.len(), 14);
    assert_eq!(count(&t, "tree_lstm.internal"), 2);
    assert_eq!(count(&t, "sentiment.loss"), 5);
    // Lower bound: lookup 1 + leaf 1 + internal 2 (one depends on the other) + loss 1 + sum 1.
    assert_eq!(lower_bound(&t.graph).total, 6);
    let s = stats(&t.graph);
    assert_eq!(
        s.types
            .iter()
            .find(|x| x.name == "loss.sum[h=16]")
            .map(|x| x.batchable),
        Some(false)
    );
}

#[test]
fn bilstm_tagger_unrolls_a_sentence_as_counted_by_hand() {
    let t = given(
        "bilstm-tagger",
        Structures::Sentences(vec![words(&[(2, false), (3, true), (1, false)])]),
    );
    // 3 lookups, 3 fwd, 3 bwd, 3 mlp, 3 losses, 1 sum.
    assert_eq!(t.graph.len(), 16);
    // lookup 1 + fwd 3 + bwd 3 + mlp 1 + loss 1 + sum 1.
    assert_eq!(lower_bound(&t.graph).total, 10);
}

#[test]
fn char_tagger_runs_a_char_bilstm_for_rare_words_only() {
    let t = given(
        "bilstm-tagger-char",
        Structures::Sentences(vec![words(&[(2, false), (3, true), (1, false)])]),
    );
    assert_eq!(count(&t, "embed.word"), 2);
    assert_eq!(count(&t, "embed.char"), 3);
    assert_eq!(count(&t, "lstm.char_fwd"), 3);
    assert_eq!(count(&t, "lstm.char_bwd"), 3);
    assert_eq!(count(&t, "tagger.char_word"), 1);
    assert_eq!(t.graph.len(), 2 + 3 + 3 + 3 + 1 + 3 + 3 + 3 + 3 + 1);
}

#[test]
fn nmt_decoder_continues_from_the_encoder() {
    let t = given("lstm-nmt", Structures::Pairs(vec![Pair { src: 2, tgt: 3 }]));
    assert_eq!(t.graph.len(), 2 + 2 + 3 + 3 + 3 + 1);
    let g = &t.graph;
    let first_dec = g
        .nodes()
        .find(|&v| role_of(g.types().name(g.node_type(v))) == "lstm.dec")
        .unwrap();
    let prev = g.args(first_dec)[1];
    assert_eq!(role_of(g.types().name(g.node_type(prev))), "lstm.enc");
    // embed.src 1 + enc 2 + embed.tgt 1 + dec 3 + loss 1 + sum 1.
    assert_eq!(lower_bound(g).total, 9);
}

#[test]
fn lattice_char_cells_take_previous_char_and_words_ending_there() {
    // 4 nodes, char arcs into 1, 2, 3; word arcs 0->2 and 1->3.
    let l = Lattice {
        nodes: 4,
        char_arc: vec![false, true, true, true],
        word_arcs: vec![(0, 2), (1, 3)],
        ..Default::default()
    };
    let t = given("lattice-lstm", Structures::Lattices(vec![l]));
    assert_eq!(t.graph.len(), 4 + 4 + 2 + 2 + 4 + 1);
    let g = &t.graph;
    let chars: Vec<NodeId> = g
        .nodes()
        .filter(|&v| role_of(g.types().name(g.node_type(v))) == "lattice.char")
        .collect();
    let roles = |v: NodeId| -> Vec<String> {
        g.args(v)
            .iter()
            .map(|a| role_of(g.types().name(g.node_type(*a))).to_string())
            .collect()
    };
    assert_eq!(roles(chars[0]), ["embed.char"]);
    assert_eq!(
        roles(chars[2]),
        ["embed.char", "lattice.char", "lattice.word"]
    );
    assert_eq!(g.args(chars[2])[1], chars[1]);
}

#[test]
fn time_delay_builds_a_triangle() {
    let leaves4 = Tree {
        nodes: vec![
            TreeNode::Leaf,
            TreeNode::Leaf,
            TreeNode::Internal { left: 0, right: 1 },
            TreeNode::Leaf,
            TreeNode::Leaf,
            TreeNode::Internal { left: 3, right: 4 },
            TreeNode::Internal { left: 2, right: 5 },
        ],
        ..Default::default()
    };
    let t = given("td-rnn", Structures::Trees(vec![leaves4.clone()]));
    // 4 lookups, 3 + 2 + 1 combines, 1 loss, 1 sum.
    assert_eq!(t.graph.len(), 12);
    assert_eq!(lower_bound(&t.graph).total, 1 + 3 + 1 + 1);
    let t = given("td-lstm", Structures::Trees(vec![leaves4]));
    assert_eq!(count(&t, "td_lstm.leaf"), 4);
    assert_eq!(count(&t, "td_lstm.combine"), 6);
}

#[test]
fn synthetic_paper_settings() {
    let lib = lib();
    let t = record(&opts("tree-fc", 2, Level::Cell, 1), &lib).unwrap();
    // Complete trees of 256 leaves: 256 lookups + 255 FC cells + 1 root loss, per sample.
    assert_eq!(t.graph.len(), 2 * (256 + 255 + 1) + 1);
    assert_eq!(t.meta.dataset.as_deref(), Some("synthetic"));
    let t = record(&opts("fixed-lstm", 2, Level::Cell, 1), &lib).unwrap();
    assert_eq!(t.graph.len(), 2 * 64 * 3 + 1);
}

#[test]
fn two_type_tree_uses_both_internal_types() {
    let t = record(&opts("tree-lstm-2type", 16, Level::Cell, 5), &lib()).unwrap();
    let a = count(&t, "tree_lstm.internal_a");
    let b = count(&t, "tree_lstm.internal_b");
    assert!(a > 0 && b > 0);
    // 50/50 draw: neither type dominates grossly on hundreds of nodes.
    assert!(a * 3 > b && b * 3 > a, "a={a} b={b}");
}

#[test]
fn op_level_has_one_node_per_cell_op_plus_port_sums() {
    let lib = lib();
    let l = Lattice {
        nodes: 4,
        char_arc: vec![false, true, true, true],
        word_arcs: vec![(0, 3), (1, 3)],
        ..Default::default()
    };
    let samples = Structures::Lattices(vec![l]);
    let cell_t = record_samples(&opts("lattice-gru", 1, Level::Cell, 1), &lib, &samples).unwrap();
    let op_t = record_samples(&opts("lattice-gru", 1, Level::Op, 1), &lib, &samples).unwrap();
    let w = workload("lattice-gru").unwrap();
    let g = &cell_t.graph;
    let mut expected = 0;
    for v in g.nodes() {
        let role = w.role(role_of(g.types().name(g.node_type(v)))).unwrap();
        expected += lib.instantiate(role.cell, 16).unwrap().ops.len();
    }
    // Node 3 has two word producers on its `many` port, and the final loss sum has
    // four: one port_sum per `many` port input with several producers.
    let sums = op_t
        .graph
        .nodes()
        .filter(|&v| {
            op_t.graph
                .types()
                .name(op_t.graph.node_type(v))
                .starts_with("port_sum[")
        })
        .count();
    assert_eq!(sums, 2);
    assert_eq!(op_t.graph.len(), expected + sums);
    assert_eq!(op_t.meta.level, Some(Level::Op));
}

#[test]
fn op_level_separates_forward_and_backward_weights() {
    let samples = Structures::Sentences(vec![words(&[(2, false), (2, false)])]);
    let t = record_samples(&opts("bilstm-tagger", 1, Level::Op, 1), &lib(), &samples).unwrap();
    let names: Vec<&str> = t
        .graph
        .types()
        .iter()
        .map(|(_, o)| o.name.as_str())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("affine@lstm.fwd:")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.starts_with("affine@lstm.bwd:")),
        "{names:?}"
    );
    // Elementwise ops of equal shape batch across roles.
    assert!(names.contains(&"sigmoid[16]"), "{names:?}");
}

#[test]
fn wrong_structure_kind_is_an_error() {
    let err = record_samples(
        &opts("tree-lstm", 1, Level::Cell, 1),
        &lib(),
        &Structures::Pairs(vec![Pair { src: 1, tgt: 1 }]),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("workload tree-lstm needs Trees"),
        "{err}"
    );
    let mut o = opts("tree-lstm", 1, Level::Cell, 1);
    o.data = DataChoice::parse("wikiner-dev").unwrap();
    let err = record(&o, &lib()).unwrap_err();
    assert!(
        err.to_string()
            .contains("data set wikiner-dev holds Sentences"),
        "{err}"
    );
}

#[test]
fn zero_batch_or_hidden_is_an_error() {
    let mut o = opts("rvnn", 0, Level::Cell, 1);
    assert_eq!(
        record(&o, &lib()).unwrap_err().to_string(),
        "batch must be at least 1"
    );
    o.batch = 1;
    o.hidden = 0;
    assert_eq!(
        record(&o, &lib()).unwrap_err().to_string(),
        "hidden must be at least 1"
    );
}

#[test]
fn binding_rejects_wrong_producers_and_missing_ports() {
    let lib = lib();
    let w = workload("lattice-gru").unwrap();
    let char_role = &super::Role::from(w.role("lattice.char").unwrap());
    let cell = lib.instantiate(&char_role.cell, 16).unwrap();
    // x, then words only (no prev): the words go to the `many` port, not to `prev`.
    let b = bind_ports(
        char_role,
        &cell,
        &["embed.char", "lattice.word", "lattice.word"],
    )
    .unwrap();
    assert_eq!(b, vec![vec![0], vec![], vec![1, 2]]);
    // A word where the character embedding belongs: `x` cannot be skipped.
    let err = bind_ports(char_role, &cell, &["lattice.word"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "role lattice.char: port x needs an argument"
    );
    let err = bind_ports(char_role, &cell, &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "role lattice.char: port x needs an argument"
    );
    // A producer no port accepts.
    let err = bind_ports(char_role, &cell, &["embed.char", "ner.loss"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "role lattice.char: argument #1 of role ner.loss fits no remaining port"
    );
}

#[test]
fn batch_larger_than_data_set_reuses_every_sample_before_repeating() {
    let mut rng = <rand_xoshiro::Xoshiro256PlusPlus as rand::SeedableRng>::seed_from_u64(1);
    let picks = super::record::pick_samples_for_test(5, 12, &mut rng);
    let mut first: Vec<usize> = picks[..5].to_vec();
    first.sort_unstable();
    assert_eq!(first, vec![0, 1, 2, 3, 4]);
    assert_eq!(picks.len(), 12);
}

/// A workload whose builder names a role its table lacks: an error naming
/// it, never a panic (the builder is part of the table entry).
static BROKEN: WorkloadSpec = WorkloadSpec {
    name: "broken-tree",
    description: "test only",
    paper: "none",
    builder: Builder::Tree {
        leaf: TreeLeaf::EmbedThenCell("tree_lstm.leaf"),
        internal: TreeInternal::One("tree_lstm.missing"),
        loss: TreeLoss::Root,
    },
    synthetic: Synthetic::Natural,
    default_data: DefaultData::Synthetic,
    roles: &[
        RoleSpec {
            role: "embed.word",
            cell: "lookup",
            batchable: true,
            ports: &[],
        },
        RoleSpec {
            role: "tree_lstm.leaf",
            cell: "tree_lstm.leaf",
            batchable: true,
            ports: &[&["embed.word"]],
        },
    ],
};

#[test]
fn a_builder_role_missing_from_the_table_is_an_error_not_a_panic() {
    let o = RecordOptions {
        workload: &BROKEN,
        data: DataChoice::Synthetic,
        batch: 2,
        hidden: 8,
        level: Level::Cell,
        seed: 1,
    };
    let e = record(&o, &lib()).unwrap_err().to_string();
    assert!(
        e.contains("broken-tree") && e.contains("tree_lstm.missing"),
        "{e}"
    );
}

#[test]
fn every_workload_structure_comes_from_its_builder_and_synthetic_data_records() {
    for w in WORKLOADS {
        let o = RecordOptions {
            workload: w,
            data: DataChoice::Synthetic,
            batch: 2,
            hidden: 8,
            level: Level::Cell,
            seed: 3,
        };
        let t = record(&o, &lib()).unwrap_or_else(|e| panic!("{}: {e}", w.name));
        assert_eq!(t.graph.num_instances(), 2, "{}", w.name);
        assert_eq!(w.structure(), w.builder.structure());
    }
}

#[test]
fn the_record_estimate_is_near_the_recorded_size() {
    let o = opts("tree-lstm", 200, Level::Cell, 5);
    let (est, nodes) = estimate(&o, &lib()).unwrap();
    let t = record(&o, &lib()).unwrap();
    let real = t.graph.len() as f64;
    assert!(
        (nodes as f64) > 0.5 * real && (nodes as f64) < 2.0 * real,
        "{nodes} vs {real}"
    );
    assert!(est.total() > 0);
    let tiny = crate::memory::Budget {
        bytes: 1000,
        source: "--max-memory".into(),
    };
    let e = record_within(&o, &lib(), Some(&tiny)).unwrap_err();
    assert!(matches!(e, RecordError::TooLarge(_)), "{e}");
}
