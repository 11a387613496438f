//! Recorded per-node data: what `engine record` stores from annotated
//! fixtures, how the model reads it, and that traces without it replay as
//! before.

use engine::cells::CellLibrary;
use engine::data::{Dataset, Lattice, Sentence, Structures, Tree, TreeNode, Word};
use engine::error::ReplayError;
use engine::executor::Executor;
use engine::model::model;
use engine::session::replay;
use engine::trace::{Level, NodeData, Trace};
use engine::workloads::{self, DataChoice, RecordOptions, record, record_samples, role_of};

fn opts(name: &str, data: DataChoice, batch: usize, level: Level) -> RecordOptions {
    RecordOptions {
        workload: workloads::workload(name).unwrap(),
        data,
        batch,
        hidden: 8,
        level,
        seed: 3,
    }
}

fn rec(name: &str, data: DataChoice, batch: usize) -> Trace {
    record(&opts(name, data, batch, Level::Cell), &lib()).unwrap()
}

fn lib() -> CellLibrary {
    CellLibrary::builtin().unwrap()
}

/// `(role, data)` of every node, in id order.
fn roles_and_data(t: &Trace) -> Vec<(String, NodeData)> {
    let g = &t.graph;
    g.nodes()
        .map(|v| {
            let role = role_of(g.types().name(g.node_type(v))).to_string();
            (role, t.node_data(v))
        })
        .collect()
}

/// The values recorded on the nodes of `role`, in id order.
fn on(t: &Trace, role: &str, f: impl Fn(NodeData) -> Option<u32>) -> Vec<Option<u32>> {
    roles_and_data(t)
        .into_iter()
        .filter(|(r, _)| r == role)
        .map(|(_, d)| f(d))
        .collect()
}

fn ids(t: &Trace, role: &str) -> Vec<Option<u32>> {
    on(t, role, |d| d.id)
}

fn labels(t: &Trace, role: &str) -> Vec<Option<u32>> {
    on(t, role, |d| d.label)
}

#[test]
fn recorded_sst_trace_has_labels_on_every_loss_and_ids_on_every_lookup() {
    let sst_dev = DataChoice::Real(Dataset::SstDev);
    for name in [
        "tree-lstm",
        "tree-gru",
        "tree-lstm-2type",
        "tree-fc",
        "rvnn",
        "td-lstm",
    ] {
        let t = rec(name, sst_dev.clone(), 16);
        let (mut lookups, mut losses) = (0, 0);
        for (role, d) in roles_and_data(&t) {
            match role.as_str() {
                "embed.word" => {
                    assert!(d.id.is_some() && d.label.is_none(), "{name}: {d:?}");
                    lookups += 1;
                }
                "sentiment.loss" => {
                    assert!(
                        d.label.is_some_and(|l| l <= 4) && d.id.is_none(),
                        "{name}: {d:?}"
                    );
                    losses += 1;
                }
                _ => assert!(d.is_empty(), "{name}: {role} has {d:?}"),
            }
        }
        assert!(lookups > 16 && losses >= 16, "{name}: {lookups} {losses}");
        assert_eq!(t.data_counts(), (lookups, losses), "{name}");
        // Version 2, canonical: write -> read -> write is byte-identical.
        let json = t.to_json();
        assert!(json.contains("\"version\": 2,"), "{name}");
        let back = Trace::from_json(&json, "t.json").unwrap();
        assert_eq!(back, t);
        assert_eq!(back.to_json(), json);
    }
    let t = rec("mv-rnn", sst_dev, 4);
    assert!(ids(&t, "mv.leaf").iter().all(Option::is_some));
    assert!(
        labels(&t, "sentiment.loss")
            .iter()
            .all(|l| l.is_some_and(|l| l <= 4))
    );
}

/// ((a b) c) with labels per node and word ids per leaf.
fn tree() -> Tree {
    Tree {
        nodes: vec![
            TreeNode::Leaf,
            TreeNode::Leaf,
            TreeNode::Internal { left: 0, right: 1 },
            TreeNode::Leaf,
            TreeNode::Internal { left: 2, right: 3 },
        ],
        labels: vec![0, 1, 2, 3, 4],
        word_ids: vec![70, 80, 5000],
    }
}

#[test]
fn recorded_values_are_the_samples_annotations() {
    let lib = lib();
    let samples = Structures::Trees(vec![tree()]);
    let cell = |name| {
        record_samples(
            &opts(name, DataChoice::Default, 1, Level::Cell),
            &lib,
            &samples,
        )
        .unwrap()
    };
    let words = vec![Some(70), Some(80), Some(5000)];
    let t = cell("tree-lstm");
    assert_eq!(ids(&t, "embed.word"), words);
    assert_eq!(
        labels(&t, "sentiment.loss"),
        vec![Some(0), Some(1), Some(2), Some(3), Some(4)]
    );
    let t = cell("mv-rnn");
    assert_eq!(ids(&t, "mv.leaf"), words);
    // Root-only losses and the time-delay apex read the root's label.
    for name in ["tree-fc", "rvnn", "td-rnn", "td-lstm"] {
        let t = cell(name);
        assert_eq!(ids(&t, "embed.word"), words, "{name}");
        assert_eq!(labels(&t, "sentiment.loss"), vec![Some(4)], "{name}");
    }

    // Tagger: word lookups read word ids, losses tags; character lookups
    // (of the rare word) have nothing recorded.
    let s = Sentence {
        words: vec![
            Word {
                chars: 2,
                rare: false,
            },
            Word {
                chars: 3,
                rare: true,
            },
        ],
        word_ids: vec![4, 900],
        tags: vec![0, 6],
    };
    let samples = Structures::Sentences(vec![s]);
    let t = record_samples(
        &opts("bilstm-tagger-char", DataChoice::Default, 1, Level::Cell),
        &lib,
        &samples,
    )
    .unwrap();
    assert_eq!(ids(&t, "embed.word"), vec![Some(4)]);
    assert_eq!(ids(&t, "embed.char"), vec![None; 3]);
    assert_eq!(labels(&t, "tagger.loss"), vec![Some(0), Some(6)]);
    let t = record_samples(
        &opts("bilstm-tagger", DataChoice::Default, 1, Level::Cell),
        &lib,
        &samples,
    )
    .unwrap();
    assert_eq!(ids(&t, "embed.word"), vec![Some(4), Some(900)]);

    // Lattice: char lookups of nodes with a char arc read its char id (node 0
    // and start nodes have none), word lookups the arc's word id; the NER
    // loss records no tag (9 classes against Weibo's 18 tag ids).
    let l = Lattice {
        nodes: 4,
        char_arc: vec![false, true, false, true],
        word_arcs: vec![(0, 2), (1, 3)],
        tags: vec![0, 3, 3, 7],
        char_ids: vec![11, 12],
        word_ids: vec![21, 22],
    };
    let samples = Structures::Lattices(vec![l]);
    let t = record_samples(
        &opts("lattice-lstm", DataChoice::Default, 1, Level::Cell),
        &lib,
        &samples,
    )
    .unwrap();
    assert_eq!(ids(&t, "embed.char"), vec![None, Some(11), None, Some(12)]);
    assert_eq!(ids(&t, "embed.word"), vec![Some(21), Some(22)]);
    assert!(labels(&t, "ner.loss").iter().all(Option::is_none));
}

#[test]
fn synthetic_and_op_level_traces_have_no_data_and_stay_version_1() {
    for name in ["tree-lstm", "bilstm-tagger", "lattice-gru"] {
        let t = rec(name, DataChoice::Synthetic, 4);
        assert!(t.data.is_empty(), "{name}");
        let json = t.to_json();
        assert!(
            json.contains("\"version\": 1,") && !json.contains("\"data\""),
            "{name}"
        );
    }
    let t = record(
        &opts("tree-lstm", DataChoice::Real(Dataset::SstDev), 4, Level::Op),
        &lib(),
    )
    .unwrap();
    assert!(t.data.is_empty());
    // Structure-only fixtures (v1) record no data either.
    let plain = Structures::Trees(vec![Tree::new(tree().nodes)]);
    let t = record_samples(
        &opts("tree-lstm", DataChoice::Default, 1, Level::Cell),
        &lib(),
        &plain,
    )
    .unwrap();
    assert!(t.data.is_empty());
}

#[test]
fn the_model_reads_recorded_rows_and_labels_and_seeds_the_rest() {
    let lib = lib();
    let samples = Structures::Trees(vec![tree()]);
    let t = record_samples(
        &opts("tree-lstm", DataChoice::Default, 1, Level::Cell),
        &lib,
        &samples,
    )
    .unwrap();
    let mut bare = t.clone();
    bare.data.clear();
    let (m, mb) = (model(&t, &lib, 5).unwrap(), model(&bare, &lib, 5).unwrap());
    let g = &t.graph;
    let mut rows = Vec::new();
    for v in g.nodes() {
        let d = t.node_data(v);
        let (row, label) = m.node_data(v);
        let (seeded_row, seeded_label) = mb.node_data(v);
        assert_eq!(
            row,
            d.id.map_or(seeded_row, |id| id.min(999)),
            "node {}",
            v.0
        );
        assert_eq!(label, d.label.unwrap_or(seeded_label), "node {}", v.0);
        if d.id.is_some() {
            rows.push(row);
        }
    }
    // Ids past the 1000-row tables share the last row (the unknown word).
    assert_eq!(rows, vec![70, 80, 999]);

    // The recorded data changes the numbers: the loss differs from the bare
    // trace's, and every executor agrees with the reference on it.
    let (_, out) = replay(&t, &m, &lib, &mut Executor::Reference).unwrap();
    let (_, bare_out) = replay(&bare, &mb, &lib, &mut Executor::Reference).unwrap();
    let sink = *g.topo_order().last().unwrap();
    assert_ne!(out.node(sink)[0], bare_out.node(sink)[0]);
    let (_, cavs) = replay(&t, &m, &lib, &mut Executor::Cavs).unwrap();
    assert!(engine::compare::max_rel_error(&t, &cavs, &out) < 1e-4);

    // The export carries the same rows and labels.
    let e = engine::export::export_model(&t, &m, &lib, 5, engine::export::Reference::None).unwrap();
    for v in g.nodes() {
        let n = &e.header.nodes[v.index()];
        assert_eq!((n.row, n.label), m.node_data(v));
    }
}

#[test]
fn recorded_data_that_does_not_fit_the_cell_is_an_error_naming_the_node() {
    let lib = lib();
    let samples = Structures::Trees(vec![tree()]);
    let t = record_samples(
        &opts("tree-lstm", DataChoice::Default, 1, Level::Cell),
        &lib,
        &samples,
    )
    .unwrap();
    let roles = roles_and_data(&t);
    let node_of = |role: &str| roles.iter().position(|(r, _)| r == role).unwrap();
    let err = |t: &Trace| match model(t, &lib, 5) {
        Err(e @ ReplayError::NodeData { .. }) => e.to_string(),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("expected an error"),
    };
    let loss = node_of("sentiment.loss");
    let mut bad = t.clone();
    bad.data[loss].label = Some(5);
    assert_eq!(
        err(&bad),
        format!(
            "node {loss}: field `data`: label 5 is not a class of its cell sentiment.loss (5 classes)"
        )
    );
    let mut bad = t.clone();
    let leaf = node_of("tree_lstm.leaf");
    bad.data[leaf].id = Some(1);
    assert_eq!(
        err(&bad),
        format!(
            "node {leaf}: field `data`: has a token id (1) but its cell tree_lstm.leaf has no lookup"
        )
    );
    let mut bad = t.clone();
    let embed = node_of("embed.word");
    bad.data[embed].label = Some(1);
    assert_eq!(
        err(&bad),
        format!("node {embed}: field `data`: has a label (1) but its cell lookup has no loss")
    );
}

/// The final loss of the reference replay of traces recorded without data,
/// as computed before traces carried data: a trace without `data` replays as
/// before. (Bit-identical on the machine that computed them; the tolerance
/// only admits another CPU's SIMD rounding, while any change of a lookup row
/// or a label moves the loss by far more.)
#[test]
fn traces_without_data_replay_exactly_as_before() {
    let lib = lib();
    let cases: [(&str, DataChoice, u32); 5] = [
        ("tree-lstm", DataChoice::Synthetic, 0x43aa_762f),
        ("tree-lstm", DataChoice::Real(Dataset::SstDev), 0x433c_3f51),
        ("mv-rnn", DataChoice::Real(Dataset::SstDev), 0x433c_2195),
        ("bilstm-tagger", DataChoice::Default, 0x4390_978b),
        ("lattice-lstm", DataChoice::Default, 0x439f_21b1),
    ];
    for (name, data, bits) in cases {
        let mut t = rec(name, data, 4);
        t.data.clear();
        // Through the file format: a version-1 trace.
        let json = t.to_json();
        assert!(json.contains("\"version\": 1,"));
        let t = Trace::from_json(&json, "old.json").unwrap();
        let m = model(&t, &lib, 11).unwrap();
        let (_, out) = replay(&t, &m, &lib, &mut Executor::Reference).unwrap();
        let sink = *t.graph.topo_order().last().unwrap();
        let (loss, before) = (out.node(sink)[0], f32::from_bits(bits));
        assert!(
            ((loss - before) / before).abs() < 1e-5,
            "{name}: loss {loss}, before {before}"
        );
    }
}
