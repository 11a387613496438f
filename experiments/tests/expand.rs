//! Grid expansion: order, count, exclusions, and stable config hashes.

use experiments::config::{ReplayConfig, RunConfig};
use experiments::hash::config_hash;
use experiments::{expand, parse_spec};

fn spec(yaml: &str) -> experiments::Spec {
    parse_spec(yaml, "t.yaml", false).unwrap()
}

#[test]
fn replay_grid_order_and_count() {
    let s = spec(
        "kind: replay
name: r
workloads: [tree-lstm, rvnn]
batches: [2, 4]
hiddens: [8]
seeds: [1, 2]
executors: [cavs, reference]
",
    );
    let runs = expand(&s);
    assert_eq!(runs.len(), 2 * 2 * 2 * 2);
    let labels: Vec<String> = runs.iter().map(|r| r.label()).collect();
    assert_eq!(labels[0], "tree-lstm b2 h8 s1 cavs cpu");
    assert_eq!(labels[1], "tree-lstm b2 h8 s1 reference cpu");
    assert_eq!(labels[2], "tree-lstm b2 h8 s2 cavs cpu");
    assert_eq!(labels[4], "tree-lstm b4 h8 s1 cavs cpu");
    assert_eq!(labels[8], "rvnn b2 h8 s1 cavs cpu");
    assert!(runs.iter().enumerate().all(|(i, r)| r.index == i));
    // Executors without an FSM carry no training rule; edbatch would.
    assert!(matches!(
        &runs[0].config,
        RunConfig::Replay(ReplayConfig {
            fsm: None,
            layout_batch: None,
            ..
        })
    ));
}

#[test]
fn policies_training_planner_orders() {
    let p = spec(
        "kind: policies\nname: p\nworkloads: [rvnn]\nbatches: [2, 4]\nhiddens: [8, 16]\npolicies: [depth, fsm-sort]\n",
    );
    let l: Vec<String> = expand(&p).iter().map(|r| r.label()).collect();
    assert_eq!(
        l,
        [
            "rvnn b2 h8 s1 depth",
            "rvnn b2 h8 s1 fsm-sort",
            "rvnn b2 h16 s1 depth",
            "rvnn b2 h16 s1 fsm-sort",
            "rvnn b4 h8 s1 depth",
            "rvnn b4 h8 s1 fsm-sort",
            "rvnn b4 h16 s1 depth",
            "rvnn b4 h16 s1 fsm-sort",
        ]
    );
    let t = spec("kind: training\nname: t\nworkloads: [rvnn]\nbatches: [2]\nencodings: [all]\n");
    assert_eq!(expand(&t).len(), engine::sched::Encoding::ALL.len());
    let m = spec(
        "kind: planner-memory\nname: m\ncells: [lstm, gru]\nhiddens: [8, 16]\nfixed_inputs: [false, true]\n",
    );
    let l: Vec<String> = expand(&m).iter().map(|r| r.label()).collect();
    assert_eq!(l[..3], ["lstm h8 b8", "lstm h8 b8 fixed", "lstm h16 b8"]);
    assert_eq!(l.len(), 8);
    let all = spec("kind: planner-compile\nname: c\n");
    assert_eq!(
        expand(&all).len(),
        engine::cells::CellLibrary::builtin().unwrap().len()
    );
}

#[test]
fn exclude_removes_matching_points_only() {
    let s = spec(
        "kind: replay
name: r
workloads: [tree-lstm, mv-rnn]
batches: [2, 4]
hiddens: [8, 16]
executors: [cavs, reference]
exclude:
  - { workloads: [mv-rnn], hiddens: [16] }
  - { executors: [reference], batches: [4] }
",
    );
    let runs = expand(&s);
    // 16 points; mv-rnn h16: 4; reference b4: 4, of which mv-rnn h16 b4: 1 counted twice.
    assert_eq!(runs.len(), 16 - 4 - 4 + 1);
    for r in &runs {
        let l = r.label();
        assert!(!(l.starts_with("mv-rnn") && l.contains(" h16 ")), "{l}");
        assert!(!(l.contains(" b4 ") && l.contains("reference")), "{l}");
    }
}

fn config(hidden: usize, executor: &str) -> RunConfig {
    RunConfig::Replay(ReplayConfig {
        workload: "tree-lstm".into(),
        batch: 32,
        hidden,
        seed: 1,
        executor: executor.into(),
        device: "cpu".into(),
        repeats: 3,
        rounds: 1,
        check: true,
        threads: None,
        fsm: None,
        layout_batch: None,
        train: false,
        eager: false,
        unfused: false,
    })
}

#[test]
fn config_hash_is_stable_and_distinct() {
    // Golden value: changing it breaks resuming every existing sweep (it
    // changed when `gemm_threads` became `threads`, with the new CPU engine,
    // whose rows are all re-measured anyway). Python
    // gives the same: FNV-1a 64 of json.dumps(config, sort_keys=True,
    // separators=(',', ':')).
    assert_eq!(config_hash(&config(64, "cavs")), "e92d77142f1a621d");
    assert_eq!(
        config_hash(&config(64, "cavs")),
        config_hash(&config(64, "cavs"))
    );
    assert_ne!(
        config_hash(&config(64, "cavs")),
        config_hash(&config(128, "cavs"))
    );
    assert_ne!(
        config_hash(&config(64, "cavs")),
        config_hash(&config(64, "dynet"))
    );
    let s = spec(
        "kind: policies\nname: p\nworkloads: [rvnn, tree-lstm]\nbatches: [2, 4]\nseeds: [1, 2]\npolicies: [depth, agenda, fsm-best]\n",
    );
    let runs = expand(&s);
    let mut hashes: Vec<&str> = runs.iter().map(|r| r.hash.as_str()).collect();
    hashes.sort();
    hashes.dedup();
    assert_eq!(hashes.len(), runs.len());
    assert!(runs.iter().all(|r| r.hash.len() == 16));
}
