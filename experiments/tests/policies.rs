//! Kind `policies` beyond Fig. 7 (the tables of `docs/results/policies.md`):
//! trace sets, random DAGs, other data, `max_nodes`, the exact optimum, ED-Batch's
//! trainer scheme, the teacher's budget, the timed optimiser — end to end on a
//! tiny spec, the rows read back typed, the same rows from the same seeds,
//! and the checks a bad spec fails.

use std::path::{Path, PathBuf};

use experiments::config::{PoliciesConfig, RunConfig};
use experiments::hash::config_hash;
use experiments::rows::{Metrics, PolicyMetrics, Row};
use experiments::{RunOptions, RunReport, parse_spec, run_spec};
use serde_json::Value;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("batchlab-pol-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn run(yaml: &str, dir: &Path) -> RunReport {
    let spec = parse_spec(yaml, "t.yaml", false).unwrap();
    let mut opts = RunOptions::new(dir);
    opts.quiet = true;
    run_spec(&spec, &opts).unwrap()
}

fn typed(path: &Path) -> Vec<Row> {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every new field of kind `policies` at once, at tiny sizes. The optimiser
/// gets far more time than its widths need, so it ends at `target` or
/// `max-width` and its results do not depend on the machine's speed.
const SPEC: &str = "kind: policies
name: tiny
traces:
  - workloads: [tree-lstm-2type, random-dag]
    batches: [2]
    nodes: [120]
    seeds: [1, 2]
    max_nodes: 256
  - workloads: [rvnn]
    batches: [1]
    data: [default, synthetic]
    seeds: [1, 2, 3]
    max_nodes: 20
hiddens: [8]
random_dag: { types: 3, window: 8 }
policies: [typewise, 'fsm-sort:reference', 'fsm-best:reference', fsm-best, fsm-teacher,
           best-known, optimal]
fsm: { seed: 1, nodes: 120, episodes: 60, teacher_budget: 20, encodings: [sort, sort-crit] }
optimise: { budget: 10, max_width: 16, timed: true }
";

fn policy_rows(rows: &[Row]) -> Vec<(&PoliciesConfig, &PolicyMetrics)> {
    rows.iter()
        .filter_map(|r| match (&r.config, &r.metrics) {
            (RunConfig::Policies(c), Some(Metrics::Policy(m))) => Some((c, m)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_tiny_spec_runs_end_to_end_with_every_new_field() {
    let dir = tmp("e2e");
    let r = run(SPEC, &dir);
    // 2 + 2 traces of the first set, 6 rvnn traces (some above 20 nodes).
    assert_eq!(r.total, 10 * 7);
    let first_error = std::fs::read_to_string(&r.jsonl)
        .unwrap()
        .lines()
        .find(|l| !l.contains("\"error\":null"))
        .map(str::to_string);
    assert_eq!(r.failed, 0, "{first_error:?}");
    assert!(r.filtered > 0 && r.filtered.is_multiple_of(7), "{r:?}");
    let rows = typed(&r.json);
    assert_eq!(
        rows.len(),
        r.total - r.filtered,
        "no row for a trace left out"
    );
    let pr = policy_rows(&rows);
    assert_eq!(pr.len(), rows.len());
    for (c, m) in &pr {
        // The trace limit and the exact search.
        if let Some(max) = c.max_nodes {
            assert!(m.nodes <= max, "{c:?}");
        }
        assert!(m.batches >= m.lower_bound, "{c:?} {m:?}");
        let best = m.best_known.unwrap();
        let bound = m.certified_bound.unwrap();
        assert!(bound <= best && m.lower_bound <= bound, "{c:?} {m:?}");
        let o = m.optimise.as_ref().unwrap();
        assert!(o.wall_s.is_some() && o.cpu_s.is_some(), "timed: {o:?}");
        assert!(o.heuristic_batches >= best);
        assert_ne!(o.stop, "budget", "{c:?}: the budget must not bind here");
        if c.workload == "random-dag" {
            let d = c.dag.unwrap();
            assert_eq!((d.nodes, d.types, d.window, c.hidden), (120, 3, 8, 0));
            assert_eq!(m.nodes, 120);
        } else {
            assert!(c.dag.is_none());
        }
        match c.policy.as_str() {
            "optimal" => {
                assert_eq!(m.proved, Some(true), "{c:?}");
                assert!(m.batches <= best, "the optimum beats any schedule");
                assert!(m.expanded.is_some());
            }
            "best-known" => assert_eq!(m.batches, best),
            p if p.starts_with("fsm-") => {
                let rule = c.fsm.as_ref().unwrap();
                assert_eq!(
                    (rule.nodes, rule.teacher_budget_ms),
                    (Some(120), Some(20_000))
                );
                let curve = m.curve.as_ref().unwrap();
                assert_eq!(curve[0].episode, 0);
                assert_eq!(Some(curve[0].best), m.prior_batches);
                assert!(curve.windows(2).all(|w| w[1].best <= w[0].best));
                let enc = m.encoding.as_deref().unwrap();
                if p == "fsm-sort:reference" {
                    assert_eq!(enc, "sort");
                } else {
                    assert!(["sort", "sort-crit"].contains(&enc), "{enc}");
                }
                assert_eq!(m.teacher_batches.is_some(), p == "fsm-teacher");
                // The DAG's FSM and the tree's are trained on seed 1:
                // on their own trace the FSM's batches are its training batches.
                if c.seed == 1 && c.data.is_none() {
                    assert_eq!(m.train_batches, Some(m.batches), "{c:?}");
                }
            }
            _ => assert!(m.curve.is_none() && m.encoding.is_none()),
        }
    }
    // Every heuristic is at least the exact optimum of its trace.
    for (c, m) in &pr {
        if let Some((_, opt)) = pr.iter().find(|(o, _)| {
            o.policy == "optimal"
                && (&o.workload, o.batch, o.seed, &o.data, o.dag)
                    == (&c.workload, c.batch, c.seed, &c.data, c.dag)
        }) {
            assert!(m.batches >= opt.batches, "{c:?}");
        }
    }
    // Synthetic data is its own trace, written in the config.
    assert!(
        pr.iter()
            .any(|(c, _)| c.data.as_deref() == Some("synthetic"))
    );
    // Again: everything measured is reused, the traces left out are left
    // out again (they have no row to reuse).
    let again = run(SPEC, &dir);
    assert_eq!(again.skipped, rows.len());
    assert_eq!((again.ran, again.filtered), (r.filtered, r.filtered));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rows_read_back_typed_and_hash_as_written() {
    let dir = tmp("typed");
    let r = run(SPEC, &dir);
    for row in typed(&r.json) {
        assert_eq!(config_hash(&row.config), row.provenance.config_hash);
        let text = serde_json::to_string(&row).unwrap();
        let back: Row = serde_json::from_str(&text).unwrap();
        assert_eq!(back, row);
    }
    // The JSON-lines rows read typed too.
    let text = std::fs::read_to_string(&r.jsonl).unwrap();
    for line in text.lines() {
        let row: Row = serde_json::from_str(line).unwrap();
        assert!(row.error.is_none());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `v` without its timing fields (`*_s`, at any depth, and the provenance).
fn untimed(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.ends_with("_s") && *k != "provenance")
                .map(|(k, x)| (k.clone(), untimed(x)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(untimed).collect()),
        other => other.clone(),
    }
}

#[test]
fn same_seed_same_rows_except_timing() {
    let (a, b) = (tmp("det-a"), tmp("det-b"));
    let (ra, rb) = (run(SPEC, &a), run(SPEC, &b));
    let read = |p: &Path| -> Vec<Value> {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    let (ta, tb) = (read(&ra.json), read(&rb.json));
    assert_eq!(ta.len(), tb.len());
    for (x, y) in ta.iter().zip(&tb) {
        assert_eq!(untimed(x), untimed(y));
        assert_eq!(
            x["provenance"]["config_hash"],
            y["provenance"]["config_hash"]
        );
    }
    std::fs::remove_dir_all(&a).unwrap();
    std::fs::remove_dir_all(&b).unwrap();
}

/// ED-Batch's scheme is a trainer of its own: on a lattice its FSM is not the
/// default scheme's (it keeps its prior where the default scheme improves).
#[test]
fn the_reference_scheme_trains_differently() {
    let dir = tmp("schemes");
    let yaml = "kind: policies
name: sch
workloads: [lattice-lstm]
batches: [8]
hiddens: [8]
seeds: [7]
policies: ['fsm-sort-crit:reference', fsm-sort-crit]
fsm: { episodes: 200 }
";
    let r = run(yaml, &dir);
    let rows = typed(&r.json);
    let pr = policy_rows(&rows);
    assert_eq!(pr.len(), 2);
    let (reference, default) = (pr[0].1, pr[1].1);
    assert_ne!(
        (reference.batches, reference.best_episode, &reference.curve),
        (default.batches, default.best_episode, &default.curve)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn err(yaml: &str) -> String {
    match parse_spec(yaml, "specs/bad.yaml", false) {
        Ok(_) => panic!("spec accepted:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_trace_sets_fail_at_their_line() {
    let base = "kind: policies\nname: p\npolicies: [typewise]\n";
    let cases = [
        (
            "traces:\n  - workloads: [random-dag]\n    seeds: [1]\n",
            "specs/bad.yaml:5:5: traces[0].nodes: missing here and at the top level",
        ),
        (
            "traces:\n  - workloads: [rvnn]\n    batches: [2]\n    nodes: [30]\n",
            "specs/bad.yaml:7:12: traces[0].nodes: not used: only random-dag has a node count",
        ),
        (
            "traces:\n  - workloads: [rvnn]\n    batches: [2]\n  - workloads: [rvnn, tree-lstm]\n    batches: [2]\n",
            "specs/bad.yaml:7:5: traces[1]: rvnn b2 h64 default s1 is also a trace of traces[0]",
        ),
        (
            "workloads: [rvnn]\nbatches: [2]\nrandom_dag: { types: 3 }\n",
            "specs/bad.yaml:6:13: random_dag: not used: no trace set lists random-dag",
        ),
        (
            "workloads: [rvnn]\nbatches: [2]\ndata: [fixture.txt]\n",
            "specs/bad.yaml:6:8: data[0]: unknown data \"fixture.txt\"",
        ),
        (
            "workloads: [random-dag]\nnodes: [3, 0]\n",
            "specs/bad.yaml:5:12: nodes[1]: 0 is out of range 1..=10000000",
        ),
        (
            "workloads: [rvnn]\nbatches: [2]\nfsm: { teacher_budget: 5 }\n",
            "specs/bad.yaml:6:24: fsm.teacher_budget: needs an `optimise` block",
        ),
        (
            "traces:\n  - batches: [2]\n",
            "specs/bad.yaml:5:5: traces[0].workloads: missing here and at the top level",
        ),
    ];
    for (tail, want) in cases {
        let e = err(&format!("{base}{tail}"));
        assert!(e.starts_with(want), "{tail}:\n{e}\nwanted: {want}");
    }
    // The random DAG is a trace source of kind `policies` only.
    let e = err("kind: training\nname: t\nworkloads: [random-dag]\nbatches: [2]\n");
    assert!(e.contains("unknown workload \"random-dag\""), "{e}");
    // `:reference` names a trainer of FSMs, not of heuristics.
    let e = err(&format!(
        "{}workloads: [rvnn]\nbatches: [2]\n",
        base.replace("[typewise]", "['typewise:reference']")
    ));
    assert!(e.contains("unknown policy \"typewise:reference\""), "{e}");
    // A trace set's fields fall back on the top level's.
    let s = parse_spec(
        &format!("{base}seeds: [4]\nhiddens: [16]\ntraces:\n  - workloads: [rvnn]\n    batches: [2]\n  - workloads: [random-dag]\n    nodes: [50]\n"),
        "ok.yaml",
        false,
    )
    .unwrap();
    let labels: Vec<String> = experiments::expand(&s).iter().map(|r| r.label()).collect();
    assert_eq!(
        labels,
        ["rvnn b2 h16 s4 typewise", "random-dag n50 s4 typewise"]
    );
}
