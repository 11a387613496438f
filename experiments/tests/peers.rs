//! Kind `peers`: the spec's checks, its expansion, and a sweep without a
//! peers environment or worker (every row says why, nothing aborts).

use experiments::config::{PeersConfig, ReplayConfig, RunConfig};
use experiments::{Kind, RunOptions, expand, parse_spec, run_spec};

const GOOD: &str = "kind: peers
name: p
workloads: [tree-lstm, lattice-gru]
batches: [2]
hiddens: [8]
threads: [1, 2]
systems: [dynet-agenda, torch, reference, edbatch]
quick:
  threads: [1]
  rounds: 1
";

fn err(yaml: &str) -> String {
    match parse_spec(yaml, "specs/bad.yaml", false) {
        Ok(_) => panic!("spec accepted:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_peers_spec_expands_point_by_point_with_systems_last() {
    let s = parse_spec(GOOD, "p.yaml", false).unwrap();
    assert_eq!(s.kind, Kind::Peers);
    assert_eq!((s.grid.rounds, s.grid.repeats), (3, 3));
    let runs = expand(&s);
    assert_eq!(runs.len(), 2 * 2 * 4);
    let RunConfig::Peers(PeersConfig {
        threads,
        system,
        fsm,
        layout_batch,
        ..
    }) = &runs[3].config
    else {
        panic!("not a peers run");
    };
    assert_eq!((*threads, system.as_str()), (1, "edbatch"));
    assert!(fsm.is_some() && layout_batch.is_some());
    let RunConfig::Peers(PeersConfig { threads, fsm, .. }) = &runs[4].config else {
        panic!()
    };
    assert_eq!(*threads, 2);
    assert!(fsm.is_none(), "dynet-agenda needs no FSM");
    let q = parse_spec(GOOD, "p.yaml", true).unwrap();
    assert_eq!((q.grid.rounds, q.grid.threads.clone()), (1, Some(vec![1])));
}

#[test]
fn bad_peers_specs_name_file_line_and_field() {
    let e = err(&GOOD.replace("torch, reference", "tensorflow, reference"));
    assert!(e.starts_with("specs/bad.yaml:7:"), "{e}");
    assert!(
        e.contains("systems[1]: unknown system \"tensorflow\""),
        "{e}"
    );
    let e = err(&GOOD.replace("threads: [1, 2]", "threads: [0]"));
    assert!(e.contains("threads[0]: 0 is out of range"), "{e}");
    let e = err(&GOOD.replace("  rounds: 1", "  rounds: 0"));
    assert!(e.contains("quick.rounds: 0 is out of range"), "{e}");
    let e = err(&GOOD.replace("systems: [", "executors: [cavs]\nsystems: ["));
    assert!(e.contains("executors: not used by kind peers"), "{e}");
    let e = err(&GOOD.replace("systems: [dynet-agenda, torch, reference, edbatch]\n", ""));
    assert!(e.contains("systems: missing"), "{e}");
    let replay = "kind: replay\nname: r\nworkloads: [tree-lstm]\nbatches: [2]\nexecutors: [cavs]\n";
    let e = err(&format!("{replay}systems: [torch]\n"));
    assert!(e.contains("systems: not used by kind replay"), "{e}");
    let e = err(&format!("{replay}rounds: 0\n"));
    assert!(e.contains("rounds: 0 is out of range"), "{e}");
    // Replay rounds default to 1 (absent from the run's hash) and are kept.
    let one = parse_spec(replay, "r.yaml", false).unwrap();
    assert_eq!(one.grid.rounds, 1);
    let two = parse_spec(&format!("{replay}rounds: 2\n"), "r.yaml", false).unwrap();
    let runs = expand(&two);
    assert!(matches!(
        &runs[0].config,
        RunConfig::Replay(ReplayConfig { rounds: 2, .. })
    ));
    assert_ne!(runs[0].hash, expand(&one)[0].hash);
}

/// Runs `yaml` (a peers spec, no environment, no worker) in a fresh
/// folder named after `tag`: every run fails, and its rows.
fn failed_rows(yaml: &str, tag: &str) -> serde_json::Value {
    let s = parse_spec(yaml, "p.yaml", false).unwrap();
    let dir = std::env::temp_dir().join(format!("batchlab-peers-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut opts = RunOptions::new(&dir);
    opts.quiet = true;
    let r = run_spec(&s, &opts).unwrap();
    assert_eq!((r.ran, r.failed), (2, 2));
    let rows = serde_json::from_str(&std::fs::read_to_string(&r.json).unwrap()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    rows
}

#[test]
fn without_environment_or_worker_every_row_says_why() {
    let yaml = "kind: peers\nname: p\nworkloads: [tree-gru]\nbatches: [2]\nhiddens: [8]\nsystems: [dynet-none, cavs]\nrepeats: 1\nrounds: 1\n";
    let rows = failed_rows(yaml, "rows");
    let errors: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["error"].as_str().unwrap())
        .collect();
    assert!(
        errors[0].contains("peer unavailable") && errors[0].contains("paper-repro peers --install"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("no batchlab worker command"),
        "{errors:?}"
    );
}

#[test]
fn a_device_axis_adds_cuda_points_and_leaves_cpu_configs_as_they_were() {
    let cpu = parse_spec(GOOD, "p.yaml", false).unwrap();
    let both = parse_spec(&format!("{GOOD}devices: [cpu, cuda]\n"), "p.yaml", false).unwrap();
    let (a, b) = (expand(&cpu), expand(&both));
    assert_eq!(b.len(), 2 * a.len());
    // A CPU point's config (and so its hash, what resuming reads) carries no
    // device: rows measured before the axis existed still match.
    let cpu_hashes: Vec<&str> = a.iter().map(|r| r.hash.as_str()).collect();
    for r in &b {
        let RunConfig::Peers(PeersConfig { device, .. }) = &r.config else {
            panic!("not a peers run")
        };
        let json = serde_json::to_value(&r.config).unwrap();
        if device == "cpu" {
            assert!(json.get("device").is_none(), "{json}");
            assert!(cpu_hashes.contains(&r.hash.as_str()));
        } else {
            assert_eq!(json["device"], "cuda");
            assert!(!cpu_hashes.contains(&r.hash.as_str()));
        }
    }
    let e = err(&format!("{GOOD}devices: [tpu]\n"));
    assert!(e.contains("devices[0]"), "{e}");
}

#[test]
fn on_cuda_the_cpu_only_peers_are_refused_by_name() {
    let yaml = "kind: peers\nname: p\nworkloads: [tree-gru]\nbatches: [2]\nhiddens: [8]\nsystems: [dynet-none, dgl]\ndevices: [cuda]\nrepeats: 1\nrounds: 1\n";
    for row in failed_rows(yaml, "cuda").as_array().unwrap() {
        let e = row["error"].as_str().unwrap();
        assert!(e.contains("runs on the CPU only"), "{e}");
        assert_eq!(row["provenance"]["device"], "cuda");
    }
}
