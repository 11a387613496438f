//! Rows read back typed: serialising then deserialising gives the same row
//! for every kind, the written form is what it always was, and committed
//! rows of earlier revisions still read.

use engine::layout::TotalsEntry;
use experiments::config::{
    FsmRule, OptimiseRule, PeersConfig, PlannerCompileConfig, PlannerMemoryConfig, PoliciesConfig,
    ReplayConfig, RunConfig, TrainingConfig,
};
use experiments::hash::config_hash;
use experiments::provenance::Machine;
use experiments::rows::{
    Metrics, PeerMetrics, PlannerCompileMetrics, PlannerMemoryMetrics, PolicyMetrics, Provenance,
    ReplayMetrics, Row, TrainMetrics, TrainingMetrics,
};

fn provenance() -> Provenance {
    Provenance {
        schema: 1,
        spec: "s".into(),
        quick: false,
        config_hash: "00ff".into(),
        run: 3,
        git_revision: "abc".into(),
        machine: Machine {
            hostname: "vm".into(),
            cpu: "EPYC".into(),
            cores: 2,
        },
        device: "cpu".into(),
        seed: Some(7),
        crate_version: "0.1.0".into(),
        timestamp: 1_700_000_000,
    }
}

fn fsm() -> FsmRule {
    FsmRule {
        batch: Some(32),
        hidden: None,
        seed: Some(1),
        trainer_seed: 5,
        episodes: 200,
        encodings: vec!["sort".into()],
        nodes: None,
        teacher_budget_ms: None,
    }
}

fn totals(batches: u64) -> TotalsEntry {
    TotalsEntry {
        batches,
        gathers: 1,
        scatters: 2,
        memory_kernels: 3,
        copy_bytes: 4,
        broadcasts: 5,
        broadcast_bytes: 6,
        copy_bytes_per_instance_weights: 7,
        paper_kernels: 8,
        paper_bytes: 9,
        paper_bytes_per_instance_weights: 10,
    }
}

fn row(config: RunConfig, metrics: Metrics, samples: Vec<f64>) -> Row {
    Row {
        provenance: provenance(),
        config,
        metrics: Some(metrics),
        error: None,
        samples,
    }
}

fn replay_metrics() -> ReplayMetrics {
    ReplayMetrics {
        nodes: 100,
        instances: 8,
        batches: 12,
        kernels: 40,
        bytes_gathered: 1,
        bytes_scattered: 2,
        construction_s: 0.5,
        scheduling_s: 0.25,
        execution_s: 1.0,
        total_s: 1.75,
        instances_per_s: 4.5,
        max_rel_error: Some(0.0),
        policy_misses: 0,
        policy: Some("fsm(sort)".into()),
        device_s: None,
        cpu_s: Some(2.0),
        page_faults: Some(10),
        threads: Some(2),
        train: None,
    }
}

fn replay_config(executor: &str) -> ReplayConfig {
    ReplayConfig {
        workload: "tree-lstm".into(),
        batch: 8,
        hidden: 64,
        seed: 1,
        executor: executor.into(),
        device: "cpu".into(),
        repeats: 3,
        rounds: 1,
        check: true,
        threads: None,
        fsm: Some(fsm()),
        layout_batch: Some(8),
        train: false,
        eager: false,
        unfused: false,
    }
}

fn peer_metrics(system: &str) -> PeerMetrics {
    PeerMetrics {
        system: system.into(),
        framework: "dynet".into(),
        version: "2.2".into(),
        instances: 8,
        threads: 1,
        rounds_ok: 3,
        construction_s: Some(0.25),
        forward_s: Some(0.5),
        total_s: 0.75,
        cpu_s: 0.75,
        instances_per_s: 10.5,
        loss: Some(1.5),
        reference_loss: Some(1.5),
        loss_rel_err: Some(0.0),
        batches: Some(12),
        agenda_batches: Some(12),
        program_ops: Some(40),
        expected_ops: 40,
        dynet_nodes: Some(41),
        two_node_ops: Some(1),
        dynet_by_kind: Some(serde_json::json!({"affine": 3, "tanh": 2})),
        agenda_by_op: Some(serde_json::json!({"affine": 3})),
        attribution: Some(serde_json::json!({"dynet": 12, "+mean": 11})),
        policy: None,
        count_error: None,
        cpu_samples: vec![0.75, 0.5],
        backward_s: None,
        grad_rel_err: None,
    }
}

fn peers_config(system: &str) -> PeersConfig {
    PeersConfig {
        workload: "tree-lstm".into(),
        batch: 8,
        hidden: 64,
        seed: 1,
        threads: 1,
        system: system.into(),
        repeats: 3,
        rounds: 3,
        fsm: None,
        layout_batch: None,
        train: false,
        device: "cpu".into(),
    }
}

/// A row of every kind, with optional fields set and unset, and a failed
/// row; in the order of [`WRITTEN`].
fn rows() -> Vec<Row> {
    let policies = |policy: &str, fsm: Option<FsmRule>, optimise: Option<OptimiseRule>| {
        RunConfig::Policies(PoliciesConfig {
            workload: "tree-lstm".into(),
            batch: 8,
            hidden: 64,
            seed: 1,
            policy: policy.into(),
            fsm,
            optimise,
            data: None,
            dag: None,
            max_nodes: None,
        })
    };
    let policy_metrics = PolicyMetrics {
        nodes: 10,
        batches: 4,
        lower_bound: 3,
        ratio: 1.25,
        misses: 0,
        encoding: None,
        episodes: None,
        stop_reason: None,
        states: None,
        train_s: None,
        best_known: None,
        certified_bound: None,
        bound_method: None,
        optimise_complete: None,
        ..PolicyMetrics::default()
    };
    vec![
        row(
            policies(
                "fsm-best",
                Some(fsm()),
                Some(OptimiseRule {
                    budget_ms: 1000,
                    max_width: 8,
                    timed: false,
                }),
            ),
            Metrics::Policy(PolicyMetrics {
                encoding: Some("sort".into()),
                episodes: Some(12),
                stop_reason: Some("budget".into()),
                states: Some(5),
                train_s: Some(0.5),
                best_known: Some(3),
                certified_bound: Some(3),
                bound_method: Some("a3".into()),
                optimise_complete: Some(true),
                ..policy_metrics.clone()
            }),
            vec![],
        ),
        row(
            policies("depth", None, None),
            Metrics::Policy(policy_metrics),
            vec![],
        ),
        row(
            RunConfig::Training(TrainingConfig {
                workload: "rvnn".into(),
                batch: 2,
                hidden: 8,
                seed: 1,
                encoding: "sort".into(),
                trainer_seed: 3,
                episodes: 50,
                repeats: 2,
            }),
            Metrics::Training(TrainingMetrics {
                nodes: 10,
                lower_bound: 2,
                batches: 3,
                ratio: 1.5,
                episodes: 50,
                best_episode: 7,
                stop_reason: "budget".into(),
                states: 4,
                train_s: 0.25,
                node_steps_per_s: 1024.0,
            }),
            vec![0.25, 0.5],
        ),
        row(
            RunConfig::PlannerMemory(PlannerMemoryConfig {
                cell: "lstm".into(),
                hidden: 64,
                batch: 8,
                fixed_inputs: true,
            }),
            Metrics::PlannerMemory(Box::new(PlannerMemoryMetrics {
                ops: 20,
                lower_bound: 4,
                batches: 5,
                exhaustive: true,
                schedules: 2,
                schedules_truncated: false,
                compositions: 3,
                layout_source: "pq-tree".into(),
                arena_bytes: 4096,
                planned: totals(1),
                baseline: totals(2),
                ratio_copy_bytes: None,
                ratio_memory_kernels: Some(2.0),
                ratio_paper_bytes: Some(1.5),
            })),
            vec![],
        ),
        row(
            RunConfig::PlannerCompile(PlannerCompileConfig {
                cell: "gru".into(),
                hidden: 64,
                batch: 8,
                fixed_inputs: false,
                repeats: 3,
            }),
            Metrics::PlannerCompile(PlannerCompileMetrics {
                batches: 5,
                copy_bytes: 128,
                compile_s: 0.125,
            }),
            vec![0.125, 0.25, 0.0625],
        ),
        row(
            RunConfig::Replay(replay_config("edbatch")),
            Metrics::Replay(replay_metrics()),
            vec![1.75, 1.5, 2.0],
        ),
        row(
            RunConfig::Replay(ReplayConfig {
                device: "cuda".into(),
                rounds: 2,
                check: false,
                threads: Some(4),
                fsm: None,
                layout_batch: None,
                train: true,
                eager: true,
                unfused: true,
                ..replay_config("cavs")
            }),
            Metrics::Replay(ReplayMetrics {
                max_rel_error: None,
                policy: None,
                device_s: Some(0.5),
                cpu_s: None,
                page_faults: None,
                threads: None,
                train: Some(TrainMetrics {
                    loss: 2.5,
                    backward_batches: 10,
                    backward_lower_bound: 9,
                    backward_kernels: 30,
                    forward_s: 0.5,
                    backward_s: 0.75,
                    kept_bytes: 1024,
                }),
                ..replay_metrics()
            }),
            vec![1.75, 1.5],
        ),
        row(
            RunConfig::Peers(peers_config("dynet-agenda")),
            Metrics::Peers(Box::new(peer_metrics("dynet-agenda"))),
            vec![0.75, 0.5],
        ),
        row(
            RunConfig::Peers(PeersConfig {
                threads: 2,
                fsm: Some(fsm()),
                layout_batch: Some(8),
                train: true,
                device: "cuda".into(),
                ..peers_config("edbatch")
            }),
            Metrics::Peers(Box::new(PeerMetrics {
                framework: "batchlab".into(),
                version: "batchlab 0.1.0".into(),
                threads: 2,
                construction_s: None,
                forward_s: None,
                loss: None,
                reference_loss: None,
                loss_rel_err: None,
                batches: None,
                agenda_batches: None,
                program_ops: None,
                dynet_nodes: None,
                two_node_ops: None,
                dynet_by_kind: None,
                agenda_by_op: None,
                attribution: None,
                policy: Some("fsm(sort)".into()),
                count_error: Some("x".into()),
                cpu_samples: vec![],
                backward_s: Some(0.25),
                grad_rel_err: Some(1e-6),
                ..peer_metrics("edbatch")
            })),
            vec![0.75],
        ),
        Row {
            provenance: provenance(),
            config: RunConfig::Replay(ReplayConfig {
                device: "cuda".into(),
                check: false,
                fsm: None,
                layout_batch: None,
                ..replay_config("vpps")
            }),
            metrics: None,
            error: Some("CUDA unavailable: no device".into()),
            samples: vec![],
        },
    ]
}

/// [`rows`] as the struct-variant `RunConfig` wrote them before rows were
/// read back typed: field names, order, the `kind` tag, fields skipped when
/// at their default.
const WRITTEN: [&str; 10] = [
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"policies","workload":"tree-lstm","batch":8,"hidden":64,"seed":1,"policy":"fsm-best","fsm":{"batch":32,"hidden":null,"seed":1,"trainer_seed":5,"episodes":200,"encodings":["sort"]},"optimise":{"budget_ms":1000,"max_width":8}},"metrics":{"nodes":10,"batches":4,"lower_bound":3,"ratio":1.25,"misses":0,"encoding":"sort","episodes":12,"stop_reason":"budget","states":5,"train_s":0.5,"best_known":3,"certified_bound":3,"bound_method":"a3","optimise_complete":true},"error":null,"samples":[]}"#,
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"policies","workload":"tree-lstm","batch":8,"hidden":64,"seed":1,"policy":"depth","fsm":null},"metrics":{"nodes":10,"batches":4,"lower_bound":3,"ratio":1.25,"misses":0,"encoding":null,"episodes":null,"stop_reason":null,"states":null,"train_s":null},"error":null,"samples":[]}"#,
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"training","workload":"rvnn","batch":2,"hidden":8,"seed":1,"encoding":"sort","trainer_seed":3,"episodes":50,"repeats":2},"metrics":{"nodes":10,"lower_bound":2,"batches":3,"ratio":1.5,"episodes":50,"best_episode":7,"stop_reason":"budget","states":4,"train_s":0.25,"node_steps_per_s":1024.0},"error":null,"samples":[0.25,0.5]}"#,
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"planner-memory","cell":"lstm","hidden":64,"batch":8,"fixed_inputs":true},"metrics":{"ops":20,"lower_bound":4,"batches":5,"exhaustive":true,"schedules":2,"schedules_truncated":false,"compositions":3,"layout_source":"pq-tree","arena_bytes":4096,"planned":{"batches":1,"gathers":1,"scatters":2,"memory_kernels":3,"copy_bytes":4,"broadcasts":5,"broadcast_bytes":6,"copy_bytes_per_instance_weights":7,"paper_kernels":8,"paper_bytes":9,"paper_bytes_per_instance_weights":10},"baseline":{"batches":2,"gathers":1,"scatters":2,"memory_kernels":3,"copy_bytes":4,"broadcasts":5,"broadcast_bytes":6,"copy_bytes_per_instance_weights":7,"paper_kernels":8,"paper_bytes":9,"paper_bytes_per_instance_weights":10},"ratio_copy_bytes":null,"ratio_memory_kernels":2.0,"ratio_paper_bytes":1.5},"error":null,"samples":[]}"#,
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"planner-compile","cell":"gru","hidden":64,"batch":8,"fixed_inputs":false,"repeats":3},"metrics":{"batches":5,"copy_bytes":128,"compile_s":0.125},"error":null,"samples":[0.125,0.25,0.0625]}"#,
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"replay","workload":"tree-lstm","batch":8,"hidden":64,"seed":1,"executor":"edbatch","device":"cpu","repeats":3,"check":true,"threads":null,"fsm":{"batch":32,"hidden":null,"seed":1,"trainer_seed":5,"episodes":200,"encodings":["sort"]},"layout_batch":8},"metrics":{"nodes":100,"instances":8,"batches":12,"kernels":40,"bytes_gathered":1,"bytes_scattered":2,"construction_s":0.5,"scheduling_s":0.25,"execution_s":1.0,"total_s":1.75,"instances_per_s":4.5,"max_rel_error":0.0,"policy_misses":0,"policy":"fsm(sort)","device_s":null,"cpu_s":2.0,"page_faults":10,"threads":2,"train":null},"error":null,"samples":[1.75,1.5,2.0]}"#,
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"replay","workload":"tree-lstm","batch":8,"hidden":64,"seed":1,"executor":"cavs","device":"cuda","repeats":3,"rounds":2,"check":false,"threads":4,"fsm":null,"layout_batch":null,"train":true,"eager":true,"unfused":true},"metrics":{"nodes":100,"instances":8,"batches":12,"kernels":40,"bytes_gathered":1,"bytes_scattered":2,"construction_s":0.5,"scheduling_s":0.25,"execution_s":1.0,"total_s":1.75,"instances_per_s":4.5,"max_rel_error":null,"policy_misses":0,"policy":null,"device_s":0.5,"cpu_s":null,"page_faults":null,"threads":null,"train":{"loss":2.5,"backward_batches":10,"backward_lower_bound":9,"backward_kernels":30,"forward_s":0.5,"backward_s":0.75,"kept_bytes":1024}},"error":null,"samples":[1.75,1.5]}"#,
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"peers","workload":"tree-lstm","batch":8,"hidden":64,"seed":1,"threads":1,"system":"dynet-agenda","repeats":3,"rounds":3,"fsm":null,"layout_batch":null},"metrics":{"system":"dynet-agenda","framework":"dynet","version":"2.2","instances":8,"threads":1,"rounds_ok":3,"construction_s":0.25,"forward_s":0.5,"total_s":0.75,"cpu_s":0.75,"instances_per_s":10.5,"loss":1.5,"reference_loss":1.5,"loss_rel_err":0.0,"batches":12,"agenda_batches":12,"program_ops":40,"expected_ops":40,"dynet_nodes":41,"two_node_ops":1,"dynet_by_kind":{"affine":3,"tanh":2},"agenda_by_op":{"affine":3},"attribution":{"+mean":11,"dynet":12},"policy":null,"count_error":null,"cpu_samples":[0.75,0.5]},"error":null,"samples":[0.75,0.5]}"#,
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"peers","workload":"tree-lstm","batch":8,"hidden":64,"seed":1,"threads":2,"system":"edbatch","repeats":3,"rounds":3,"fsm":{"batch":32,"hidden":null,"seed":1,"trainer_seed":5,"episodes":200,"encodings":["sort"]},"layout_batch":8,"train":true,"device":"cuda"},"metrics":{"system":"edbatch","framework":"batchlab","version":"batchlab 0.1.0","instances":8,"threads":2,"rounds_ok":3,"construction_s":null,"forward_s":null,"total_s":0.75,"cpu_s":0.75,"instances_per_s":10.5,"loss":null,"reference_loss":null,"loss_rel_err":null,"batches":null,"agenda_batches":null,"program_ops":null,"expected_ops":40,"dynet_nodes":null,"two_node_ops":null,"dynet_by_kind":null,"agenda_by_op":null,"attribution":null,"policy":"fsm(sort)","count_error":"x","cpu_samples":[],"backward_s":0.25,"grad_rel_err":1e-6},"error":null,"samples":[0.75]}"#,
    r#"{"provenance":{"schema":1,"spec":"s","quick":false,"config_hash":"00ff","run":3,"git_revision":"abc","machine":{"hostname":"vm","cpu":"EPYC","cores":2},"device":"cpu","seed":7,"crate_version":"0.1.0","timestamp":1700000000},"config":{"kind":"replay","workload":"tree-lstm","batch":8,"hidden":64,"seed":1,"executor":"vpps","device":"cuda","repeats":3,"check":false,"threads":null,"fsm":null,"layout_batch":null},"metrics":null,"error":"CUDA unavailable: no device","samples":[]}"#,
];

#[test]
fn rows_are_written_as_before() {
    let rows = rows();
    assert_eq!(rows.len(), WRITTEN.len());
    for (row, want) in rows.iter().zip(WRITTEN) {
        assert_eq!(serde_json::to_string(row).unwrap(), want);
    }
}

#[test]
fn a_row_of_every_kind_reads_back_as_itself() {
    for row in rows() {
        let text = serde_json::to_string(&row).unwrap();
        let back: Row = serde_json::from_str(&text).unwrap();
        assert_eq!(back, row, "{text}");
        let pretty = serde_json::to_string_pretty(&row).unwrap();
        assert_eq!(serde_json::from_str::<Row>(&pretty).unwrap(), row);
    }
}

/// Metrics are read as the config's kind says: the fields a replay row's
/// metrics miss are named, rather than "no variant matched".
#[test]
fn metrics_are_read_as_the_config_kind_says() {
    let mut row = serde_json::to_value(&rows()[5]).unwrap();
    row["metrics"]
        .as_object_mut()
        .unwrap()
        .remove("instances_per_s");
    let err = serde_json::from_value::<Row>(row).unwrap_err().to_string();
    assert!(
        err.contains("metrics of a `replay` row") && err.contains("instances_per_s"),
        "{err}"
    );
    // A training row's metrics, though they would pass for a policy's
    // fields but `misses`, read as training metrics.
    let training = &rows()[2];
    let back: Row = serde_json::from_str(&serde_json::to_string(training).unwrap()).unwrap();
    assert!(matches!(back.metrics, Some(Metrics::Training(_))));
}

fn committed(path: &str) -> Vec<Row> {
    let path = format!("{}/../results/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Rows of the first committed run (2026-11-22) predate `threads`,
/// `rounds` and the CPU-time metrics, and carry a `gemm_threads` since
/// removed: they read, the missing fields at their defaults.
#[test]
fn committed_rows_of_an_early_revision_read_typed() {
    let rows = committed("2026-11-22-h100/rows/table6.json");
    assert_eq!(rows.len(), 5);
    for r in &rows {
        let RunConfig::Replay(c) = &r.config else {
            panic!("not a replay row: {r:?}")
        };
        assert_eq!(
            (c.workload.as_str(), c.batch, c.hidden),
            ("tree-lstm", 256, 512)
        );
        assert_eq!((c.rounds, c.threads, c.train), (1, None, false));
        let Some(Metrics::Replay(m)) = &r.metrics else {
            panic!("no replay metrics: {r:?}")
        };
        assert!(m.instances_per_s > 0.0);
        assert_eq!((m.cpu_s, m.threads, &m.train), (None, None, &None));
        assert!(r.error.is_none());
    }
}

/// Rows of a later run carry every field the config has now: their
/// configs hash as they did when written, so serialising a read config
/// writes what was read.
#[test]
fn committed_rows_of_a_later_revision_hash_as_written() {
    for path in [
        "2026-11-27-vm-avx2-halves/rows/table6.json",
        "2026-11-27-vm-avx2-halves/rows/table5.json",
    ] {
        for r in committed(path) {
            assert_eq!(config_hash(&r.config), r.provenance.config_hash, "{path}");
        }
    }
}
